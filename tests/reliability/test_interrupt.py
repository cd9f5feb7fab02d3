"""Issue 10, L1: Ctrl-C during a search writes the best kernel so far, exits 130, and no
worker prints a KeyboardInterrupt traceback. Ctrl-C reaches the whole process group from a
terminal, so the test sends SIGINT to the group of a real `kir compile --search`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX-only")
def test_ctrl_c_writes_the_best_so_far(tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "kir.commands.main", "compile", str(ROOT / "examples" / "softmax.cu"),
               "--search", "--target", "model", "--size", "rows=8", "--size", "cols=256",
               "--budget", "100000", "--db", str(tmp_path / "t.db"), "--out-dir", str(out),
               "-q"]
    env = {**os.environ, "KIR_CACHE_DIR": str(tmp_path / "cache")}
    # A terminal's Ctrl-C reaches a process that handles SIGINT; the child inherits this
    # process's ignored and blocked signals, and in some full-suite runs SIGINT reached
    # neither this process nor the search (the search ran on for minutes; which earlier test
    # leaves it so was not found), so the precondition is set here, not assumed.
    state = _sigint_state()
    with _sigint_deliverable():
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True, env=env, cwd=tmp_path)
    # Wait until the database holds a few evaluations, then press Ctrl-C.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if _rows(tmp_path / "t.db") >= 5:
            break
        time.sleep(0.2)
    assert process.poll() is None, process.communicate()
    os.killpg(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, (stdout, stderr, state)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert "interrupted after" in stderr
    trace = json.loads((out / "best.trace.json").read_text())
    assert trace["stopped"] == "interrupted"
    assert (out / "softmax_kir.py").exists() and (out / "best.kir").exists()
    assert (out / "report.md").exists()
    assert "best:" in stdout


@contextlib.contextmanager
def _sigint_deliverable():
    """SIGINT handled by Python's default handler and not blocked, for the block."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, previous)


def _sigint_state() -> str:
    """This process's ignored and blocked signal masks (Linux), for a failure's message."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return "unknown"
    return " ".join(line for line in lines if line.startswith(("SigIgn", "SigBlk")))


def _rows(path: Path) -> int:
    import sqlite3

    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=1) as conn:
            return conn.execute("SELECT count(*) FROM evaluations").fetchone()[0]
    except sqlite3.Error:
        return 0
