"""One GPU, several worker processes: a readers-writer lock so that timing runs alone.

A GPU search spends most of a candidate's time compiling it (NVRTC or the Metal compiler take
about a second per kernel), which parallel worker processes can share out — but a timing is
only honest when nothing else runs on the GPU meanwhile. Compiling happens inside MLX's first
call of a kernel, together with that call's launch, so the compile-and-check part of a job
takes the lock *shared* (any number of workers compile and check at once) and the timing takes
it *exclusive* (it waits until no check is running, and no check starts until it is done).

Writers get priority through a turnstile: a timer holds the turnstile while it waits, so new
checks queue behind it instead of starving it. Both are ``flock`` locks on files next to each
other, so they work between unrelated processes and vanish with a process that dies holding
them. Without ``fcntl`` (Windows) the lock does nothing, and the evaluator uses one worker.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


class GpuLock:
    """The readers-writer lock at ``path`` (None: no locking)."""

    def __init__(self, path: str | None) -> None:
        self.path = path if fcntl is not None else None
        self._fds: tuple[int, int] | None = None

    def _open(self) -> tuple[int, int]:
        if self._fds is None:
            assert self.path is not None
            turnstile = os.open(self.path + ".turnstile", os.O_RDWR | os.O_CREAT, 0o600)
            main = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._fds = (turnstile, main)
        return self._fds

    def shared(self) -> contextlib.AbstractContextManager[None]:
        """Held while compiling and checking: many at once, never during a timing."""
        return self._held(fcntl.LOCK_SH if fcntl else 0)

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Held while timing: the GPU runs nothing of ours but this."""
        return self._held(fcntl.LOCK_EX if fcntl else 0)

    @contextlib.contextmanager
    def _held(self, mode: int) -> Iterator[None]:
        if self.path is None:
            yield
            return
        turnstile, main = self._open()
        # Through the turnstile: a queued timer holds it, so no new holder of either kind
        # passes it until that timer has the lock (writer priority).
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(main, mode)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(main, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the lock files (a later use opens them again)."""
        if self._fds is not None:
            for fd in self._fds:
                os.close(fd)
            self._fds = None
