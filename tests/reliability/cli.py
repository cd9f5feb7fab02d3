"""Helpers for the reliability tests: a kir command in a child process (a test of a hang must
not hang pytest: the child gets a wall-clock limit), small kernels with specs, and a check
that the output holds no Python traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

SCALE_CU = """__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 2.0f;
}
"""
SCALE_SPEC = """sizes = { N = 256 }
launch = { grid = ["ceil(N / 128)"], block = [128] }
REFERENCE
[args]
x = { dtype = "f32", shape = ["N"] }
y = { dtype = "f32", shape = ["N"], role = "out" }
n = { value = "N", dtype = "i32" }
"""
SCALE_REF = """def scale(args, sizes):
    return {"y": args["x"] * 2.0}
"""


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out + self.err


def kir(*args: str | Path, timeout: float = 120, cwd: Path | None = None,
        env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> Ran:
    """Run ``kir ARGS`` in a child process; a run past ``timeout`` fails the test (that is
    the hang the caller tests for) instead of hanging it."""
    command = [*prefix, sys.executable, "-m", "kir.commands.main", *map(str, args)]
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              cwd=cwd, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"kir {' '.join(map(str, args))} did not end within {timeout} s "
                             f"(output so far: {exc.stdout!r} {exc.stderr!r})") from None
    return Ran(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def kir_here(capsys, *args: str | Path) -> Ran:
    """``kir ARGS`` in this process (quicker; for commands that cannot hang): exit code and
    what it printed. An exception escaping ``main`` fails the test."""
    from kir.commands.main import main

    capsys.readouterr()
    started = time.monotonic()
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err, time.monotonic() - started)


def no_traceback(ran: Ran) -> None:
    assert "Traceback" not in ran.text, ran.text
    assert "internal error" not in ran.text, ran.text


def scale_kernel(folder: Path, *, spec: str | None = None, reference: str | None = None,
                 source: str = SCALE_CU) -> Path:
    """``folder/scale.cu`` with its spec (``spec`` replaces the default's text) and, when
    ``reference`` is given, ``refs.py`` holding it as ``refs:scale``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scale.cu").write_text(source)
    text = spec if spec is not None else SCALE_SPEC
    text = text.replace("REFERENCE", 'reference = "refs:scale"' if reference else "")
    (folder / "scale.kir.toml").write_text(text)
    if reference:
        (folder / "refs.py").write_text(reference)
    return folder / "scale.cu"


def example_copy(folder: Path, name: str) -> Path:
    """``examples/NAME.cu`` with its spec and the references, copied into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for file in (f"{name}.cu", f"{name}.kir.toml", "refs.py"):
        shutil.copy(EXAMPLES / file, folder / file)
    return folder / f"{name}.cu"


def read_only_prefix(folder: Path) -> tuple[str, ...] | None:
    """A command prefix that runs a command with ``folder`` read-only, or None when this
    machine offers no way: as root (which permission bits do not stop) a private read-only
    bind mount (``unshare``), else the folder's permission bits (the caller sets them)."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("unshare") is None:
        return None
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
    prefix = ("unshare", "-rm", "sh", "-c", script, str(folder))
    probe = subprocess.run([*prefix, "sh", "-c", f'! touch "{folder}/.probe" 2>/dev/null'],
                           capture_output=True)
    return prefix if probe.returncode == 0 else None
