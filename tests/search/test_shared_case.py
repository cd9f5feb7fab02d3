"""A pool's GPU workers share a check case's expected outputs (kir.measure.gpu.shared_case):
the spec's reference runs once, the others read what it left."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kir.driver.load import load_kernel
from kir.measure.gpu import shared_case
from kir.measure.gpu.jobs import EmulatorRunner, GpuJob
from kir.measure.gpu.pool import GpuPool
from kir.spec.bound import BoundSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 8, "cols": 100})


def _job(loaded, **changes):
    bound = loaded.bound
    fields = dict(kernel=loaded.kernel, spec_path=str(bound.spec.path.resolve()),
                  sizes=dict(bound.sizes), target="cuda")
    return GpuJob(**{**fields, **changes})


def _counting_reference(monkeypatch):
    calls = []
    original = BoundSpec.reference

    def counted(self, inputs):
        calls.append(dict(self.sizes))
        return original(self, inputs)

    monkeypatch.setattr(BoundSpec, "reference", counted)
    return calls


def test_the_reference_runs_once_a_folder(loaded, tmp_path, monkeypatch):
    calls = _counting_reference(monkeypatch)
    job = _job(loaded, case_dir=str(tmp_path))
    first = shared_case.prepared_case(job, EmulatorRunner())
    again = shared_case.prepared_case(job, EmulatorRunner())
    assert len(calls) == 1
    assert set(first.case.expected) == set(again.case.expected) == {"y"}
    np.testing.assert_array_equal(first.case.expected["y"], again.case.expected["y"])
    np.testing.assert_array_equal(first.case.inputs["x"], again.case.inputs["x"])
    # another seed or other sizes are another case
    shared_case.prepared_case(_job(loaded, case_dir=str(tmp_path), seed=1), EmulatorRunner())
    shared_case.prepared_case(_job(loaded, case_dir=str(tmp_path), sizes={"rows": 4, "cols": 100}),
                              EmulatorRunner())
    assert len(calls) == 3


def test_without_a_folder_each_computes_its_own(loaded, monkeypatch):
    calls = _counting_reference(monkeypatch)
    for _ in range(2):
        shared_case.prepared_case(_job(loaded), EmulatorRunner())
    assert len(calls) == 2


def test_a_pool_shares_its_cases_and_removes_them(loaded):
    with GpuPool(EmulatorRunner(), workers=2, timeout_s=30.0, startup_s=60.0) as pool:
        verdicts = list(pool.run_many([_job(loaded, warmup=1, repeat=2)] * 3))
        assert all(v.ok for v in verdicts)
        folder = Path(pool.case_dir)
        (case,) = [p for p in folder.iterdir() if p.is_dir()]
        assert (case / "done").read_text().split() == ["y"] and (case / "y.npy").exists()
    assert not folder.exists()


def test_folders_of_pools_whose_process_is_gone_are_removed(tmp_path, monkeypatch):
    """A pool killed before it could close (a Ray actor at shutdown) leaves its folder; the
    next pool on the machine removes it, and leaves those of running processes alone."""
    import os
    import subprocess
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead = tmp_path / f"{shared_case.PREFIX}{gone}-abc"
    live = tmp_path / f"{shared_case.PREFIX}{os.getppid()}-def"
    for folder in (dead, live):
        (folder / "case").mkdir(parents=True)
    mine = shared_case.new_case_dir()
    assert not dead.exists() and live.exists()
    assert Path(mine).parent == tmp_path
    assert Path(mine).name.startswith(f"{shared_case.PREFIX}{os.getpid()}-")
