"""Parent side of the emulator's worker process: one per Python process, started on first use.

A launch runs in the worker so that a kernel that spins forever can be killed (fibers cannot be
preempted) and a kernel that crashes takes only the worker down. Both become EmulatorError; the
next launch starts a fresh worker.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kir.backends.emulate.toolchain import EmulatorError

_WORKER_SCRIPT = Path(__file__).resolve().parent / "_worker_main.py"


class Worker:
    """A worker subprocess and the pipes to it."""

    def __init__(self) -> None:
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        self.process = subprocess.Popen([sys.executable, str(_WORKER_SCRIPT)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.libraries: set = set()  # the kernel libraries it has loaded

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe:
                pipe.close()
        self.log.close()

    def call(self, request: dict[str, Any], timeout: float, what: str) -> dict[str, Any]:
        """Send one request and wait for its reply, at most ``timeout`` seconds."""
        self.log.seek(0)
        self.log.truncate()
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(struct.pack("<Q", len(data)) + data)
            self.process.stdin.flush()
        except BrokenPipeError:
            raise self._crashed(what) from None
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        chunks: list[bytes] = []
        needed, have_header = 8, False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise EmulatorError(f"{what} timed out after {timeout:g} s (a thread may loop "
                                    "forever); the worker process was killed", kind="timeout")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, min(needed, 1 << 20))
            if not chunk:
                raise self._crashed(what)
            chunks.append(chunk)
            needed -= len(chunk)
            if needed == 0:
                blob = b"".join(chunks)
                chunks = []
                if have_header:
                    return pickle.loads(blob)
                (needed,) = struct.unpack("<Q", blob)
                have_header = True

    def _crashed(self, what: str) -> EmulatorError:
        code = self.process.wait()
        self.log.seek(0)
        output = self.log.read().decode(errors="replace")
        notes = [line for line in output.splitlines() if line.startswith("kir-emu:")]
        where = notes[-1][len("kir-emu: "):] if notes else "no location recorded"
        try:
            signame = signal.Signals(-code).name
        except ValueError:
            signame = f"exit status {code}"
        self.stop()
        return EmulatorError(f"{what} crashed ({signame}): {where}", kind="crash",
                             hint=("last output:\n" + output[-1500:]) if output.strip() else None)


_lock = threading.Lock()
_worker: Worker | None = None
# A worker keeps every kernel library it loaded (and its fiber stacks) mapped: after this
# many it is retired and a fresh one started, so a long run (a test suite, a search) stays
# under the kernel's map count (vm.max_map_count, 65530 here), where dlopen then failed
# with "failed to map segment from shared object".
MAX_LIBRARIES_PER_WORKER = 48


def run_request(request: dict[str, Any], timeout: float, what: str) -> dict[str, Any]:
    """Run one launch request in this process's worker (started or restarted as needed)."""
    global _worker
    with _lock:
        if _worker is None or not _worker.alive():
            if _worker is not None:
                _worker.stop()
            _worker = Worker()
        _worker.libraries.add(request.get("so"))
        try:
            return _worker.call(request, timeout, what)
        finally:
            if not _worker.alive() or len(_worker.libraries) >= MAX_LIBRARIES_PER_WORKER:
                _worker.stop()
                _worker = None


@atexit.register
def _shutdown() -> None:
    global _worker
    if _worker is not None:
        _worker.stop()
        _worker = None
