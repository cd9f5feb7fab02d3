"""The GPU workers of one pool compute a check case's expected outputs once, not each.

Every GPU worker checks candidates against the spec reference's outputs at the compiled sizes
(:func:`kir.measure.gpu.jobs.build_gpu_case`). Run by each of a pool's workers as it starts,
the reference costs the CPU as many times over: on the H200 (16 cores) fourteen workers each
running the FlashAttention reference at N=4096 (then under the GPU lock as well, see
:func:`kir.measure.gpu.jobs._cached_case`) pushed a search's first verdict from 21 to 39 s.
So a pool gives its jobs a folder of its own (``GpuJob.case_dir``); the first worker to
need a case computes the expected outputs and leaves them there as ``.npy`` files, and the
others, waiting on a file lock meanwhile, read them. The inputs are made again from the seed
(cheap, and they are what the reference was given: the same seed gives the same arrays).
Without ``fcntl`` (Windows) each worker computes its own, as before.

The pool removes its folder when it closes. A process killed first (a Ray actor at a
cluster's shutdown) cannot, so the folder's name carries the owner's process id and a new
pool removes the folders of owners no longer running (:func:`new_case_dir`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kir.measure.gpu.jobs import GpuJob, Runner, _Prepared

try:
    import fcntl
except ImportError:  # Windows: no shared cases
    fcntl = None  # type: ignore[assignment]


PREFIX = "kir-gpu-cases-"


def new_case_dir() -> str:
    """A fresh folder for one pool's shared cases, named after this process; the folders of
    pools whose process is gone are removed first (they may hold large arrays)."""
    root = Path(tempfile.gettempdir())
    for old in root.glob(f"{PREFIX}*-*"):
        pid = old.name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's: leave it
    return True


def case_name(job: "GpuJob") -> str:
    """A file name for what ``job``'s expected outputs depend on (its :meth:`case_key`, the
    baseline kernel by its fingerprint, the spec's text when it has no file)."""
    spec_path, sizes, target, seed, baseline = job.case_key()
    text = repr((spec_path, sizes, target, seed,
                 baseline.fingerprint() if baseline is not None else None, job.spec_text))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def prepared_case(job: "GpuJob", runner: "Runner") -> "_Prepared":
    """``job``'s bound spec and check case, the expected outputs shared through
    ``job.case_dir`` with the pool's other workers (computed here when no worker has yet)."""
    from kir.measure.gpu.jobs import build_gpu_case

    if not job.case_dir or fcntl is None:
        return build_gpu_case(job, runner)
    folder = Path(job.case_dir) / case_name(job)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one computes, the others wait and read
        done = folder / "done"
        if done.exists():
            names = done.read_text().split()
            expected = {name: np.load(folder / f"{name}.npy") for name in names}
            return build_gpu_case(job, runner, expected=expected)
        prepared = build_gpu_case(job, runner)
        try:
            for name, array in prepared.case.expected.items():
                np.save(folder / f"{name}.npy", np.asarray(array))
            (folder / "done.tmp").write_text("\n".join(prepared.case.expected))
            os.replace(folder / "done.tmp", done)  # complete files only
        except OSError:
            pass  # no room to share it (a full disk): the others compute their own
        return prepared
