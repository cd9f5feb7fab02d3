"""Run candidate checks in worker processes, in order, with a per-candidate timeout.

A :class:`CheckPool` keeps ``workers`` processes, each set up once with the evaluation
context (inputs, references), so a candidate costs one pickled kernel. Results come back in
submission order. A candidate running past its timeout is recorded as "timeout" and its
worker is replaced; when a worker dies, the candidates that were running with it are retried
one at a time, and the one that kills a worker on its own is recorded as "crash".
Several threads may run batches on one pool at once; they share its processes (a worker that
dies then takes the others' candidates with it, and each is retried as above; a candidate
whose pool another thread replaced, after a timeout or a crash of its own, is checked again
as if nothing happened, up to MAX_REQUEUES times, and only then suspected).
:meth:`CheckPool.cancel` stops every check under way or waiting, of every thread (a search
that stopped does not wait for them, and its finalists are then timed on a quiet machine);
their verdicts say so.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ProcessPoolExecutor, \
    ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterator, Sequence

from kir.search.evaluator import Evaluation

_CONTEXT: Any = None
_CHECK: Callable[[Any, Any], Evaluation] | None = None


def become_worker() -> None:
    """Set up a worker process of the search: it ignores Ctrl-C (the terminal sends SIGINT to
    the whole process group; the search process decides what an interrupt means, and a worker
    printing a KeyboardInterrupt traceback over its progress line helps nobody), and on Linux
    the kernel kills it when its parent (the search) dies: a SIGKILLed search runs no cleanup,
    and a worker left behind would hold the search's output pipes open (and a GPU) forever."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


# How much lower a checking worker's CPU priority is than the search process's (nice). On the
# H200's 16 cores a search keeps 7 validations and up to 14 compiles busy at once, and the
# search's own process, which breeds and applies the next candidates (most of them turn out
# to be kernels already judged), got so little of a core that it could not keep them fed:
# 48 ms a candidate there against 7 ms on an idle machine (BENCHMARKS.md, round 22).
CHECK_NICENESS = 5


def _init(check: Callable[[Any, Any], Evaluation], context: Any) -> None:
    global _CONTEXT, _CHECK
    become_worker()
    try:
        os.nice(CHECK_NICENESS)
    except (OSError, AttributeError):
        pass  # a platform without nice: same priority
    _CONTEXT, _CHECK = context, check


# How often a waiting run looks whether CheckPool.cancel was called, in seconds.
POLL_S = 0.2
# How many times a candidate lost to a pool another thread replaced is checked again before
# it is suspected itself (a candidate that keeps killing workers must not loop forever).
MAX_REQUEUES = 2
# The verdict of a candidate whose check was cancelled (CheckPool.cancel).
NOT_CHECKED = Evaluation.rejected("not_applicable", "not checked: the checks were cancelled")


def _run(kernel: Any) -> Evaluation:
    assert _CHECK is not None
    return _CHECK(kernel, _CONTEXT)


def _nothing() -> None:
    """A task that makes a new pool start its workers (see CheckPool._started)."""


class CheckPool:
    """Worker processes running ``check(kernel, context)`` (both picklable, module-level)."""

    def __init__(self, check: Callable[[Any, Any], Evaluation], context: Any, *,
                 workers: int = 2, timeout_s: float = 60.0) -> None:
        self.check = check
        self.context = context
        self.workers = max(1, int(workers))
        self.timeout_s = float(timeout_s)
        self._pool: ProcessPoolExecutor | None = None
        # Threads may run batches side by side (a steady search checks one candidate a
        # thread): they share the executor, made and replaced under this lock.
        self._lock = threading.RLock()
        self._generation = 0  # advanced by cancel: runs begun before it answer at once
        self._epoch = 0  # advanced whenever a pool is discarded: its checks are lost
        self._launcher: ThreadPoolExecutor | None = None  # see _started

    def _started(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # fork starts workers in milliseconds with kir already imported; elsewhere the
            # platform default (spawn) pickles the context through initargs.
            method = "fork" if sys.platform.startswith("linux") else None
            ctx = multiprocessing.get_context(method)
            pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init,
                                       initargs=(self.check, self.context))
            # With fork the executor starts its workers in the thread of its first submit,
            # and Linux kills a worker when the thread that forked it ends (PR_SET_PDEATHSIG,
            # become_worker): the threads that run checks come and go (a plain thread a
            # batch), and a pool started by one that had finished broke under the others.
            # So a thread that lives as long as this CheckPool starts them.
            if self._launcher is None:
                self._launcher = ThreadPoolExecutor(1, thread_name_prefix="kir-checks")
            self._launcher.submit(pool.submit, _nothing).result()
            self._pool = pool
        return self._pool

    def _discard(self, epoch: int | None = None) -> None:
        """Stop this pool's worker processes (ours, by handle) and forget the pool; with
        ``epoch``, only if the pool is still the one of that epoch (a failure seen in a pool
        another thread has already replaced must not take the new one down with it)."""
        with self._lock:
            if epoch is not None and epoch != self._epoch:
                return
            pool, self._pool = self._pool, None
            if pool is not None:
                self._epoch += 1
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):
            if process.is_alive():
                process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Shut the workers down."""
        with self._lock:
            pool, self._pool = self._pool, None
            launcher, self._launcher = self._launcher, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if launcher is not None:
            launcher.shutdown(wait=True)

    def cancel(self) -> None:
        """Stop every check of every thread, under way or waiting (the executor hands a
        worker's next tasks to it ahead of time, so they cannot be told apart): the worker
        processes are killed, and each run begun before answers its remaining candidates
        "not checked" at once. The next run starts new workers."""
        with self._lock:
            self._generation += 1
        self._discard()

    def run(self, kernels: Sequence[Any]) -> Iterator[Evaluation]:
        """Check ``kernels``, yielding verdicts in their order as they become available."""
        queue: deque[int] = deque(range(len(kernels)))
        suspects: set[int] = set()  # were running when a worker died: retried alone
        requeued: Counter = Counter()  # checks lost to a pool another thread replaced
        # index, start (None while the check waits for a worker), pool epoch
        running: dict[Future, tuple[int, float | None, int]] = {}
        results: dict[int, Evaluation] = {}
        next_out = 0
        generation = self._generation
        while next_out < len(kernels):
            if self._generation != generation:  # cancelled
                for index in range(next_out, len(kernels)):
                    results.setdefault(index, NOT_CHECKED)
                queue.clear()
                running.clear()
            self._fill(kernels, queue, suspects, running)
            if running:
                _mark_started(running)
                starts = [start for _, start, _ in running.values() if start is not None]
                nearest = min(starts) + self.timeout_s if starts else time.monotonic() + POLL_S
                # Short waits: after cancel() a killed pool's futures may never complete.
                done, _ = wait(list(running), return_when=FIRST_COMPLETED,
                               timeout=min(max(0.0, nearest - time.monotonic()), POLL_S))
                broken = self._collect(done, running, results, suspects, queue, generation,
                                       requeued)
                if broken:
                    continue
                self._requeue_lost(running, suspects, queue, requeued)
                self._expire(running, results, queue)
            while next_out in results:
                yield results.pop(next_out)
                next_out += 1

    def _fill(self, kernels: Sequence[Any], queue: deque[int], suspects: set[int],
              running: dict[Future, tuple[int, float | None, int]]) -> None:
        if any(index in suspects for index, _, _ in running.values()):
            return  # a suspect runs alone, so a dying worker names its killer
        while queue and len(running) < self.workers:
            index = queue[0]
            if index in suspects and running:
                return  # it waits for the others to finish
            queue.popleft()
            with self._lock:
                future = self._started().submit(_run, kernels[index])
                epoch = self._epoch
            running[future] = (index, None, epoch)
            if index in suspects:
                return

    def _collect(self, done: set[Future], running: dict[Future, tuple[int, float | None, int]],
                 results: dict[int, Evaluation], suspects: set[int],
                 queue: deque[int], generation: int, requeued: Counter) -> bool:
        broken: int | None = None  # the epoch of the pool that broke under this run
        for future in done:
            index, _, epoch = running.pop(future)
            try:
                results[index] = future.result()
            except (BrokenProcessPool, CancelledError):
                if self._generation != generation:  # cancel killed the workers
                    results[index] = NOT_CHECKED
                    continue
                if epoch != self._epoch:  # another thread replaced the pool: not its fault
                    _requeue(index, suspects, queue, requeued)
                    continue
                broken = epoch
                if index in suspects or self.workers == 1:
                    results[index] = Evaluation.rejected(
                        "crash", "the worker process died while checking this candidate")
                else:
                    suspects.add(index)
                    queue.appendleft(index)
            except Exception as exc:  # noqa: BLE001 - a verdict, not a traceback
                results[index] = Evaluation.rejected(
                    "crash", f"checking raised {type(exc).__name__}: {exc}")
        if broken is None:
            return False
        # Everything still running died with the pool: retry each alone.
        for future, (index, _, _) in running.items():
            suspects.add(index)
            queue.appendleft(index)
        running.clear()
        self._discard(broken)
        return True

    def _requeue_lost(self, running: dict[Future, tuple[int, float | None, int]],
                      suspects: set[int], queue: deque[int], requeued: Counter) -> None:
        """Check again the candidates whose pool another thread discarded (its workers are
        gone) and whose futures the executor has not failed yet (it may never)."""
        lost = [f for f, (_, _, epoch) in running.items()
                if epoch != self._epoch and not f.done()]
        for future in lost:
            _requeue(running.pop(future)[0], suspects, queue, requeued)

    def _expire(self, running: dict[Future, tuple[int, float | None, int]],
                results: dict[int, Evaluation], queue: deque[int]) -> None:
        now = time.monotonic()
        late = [f for f, (_, start, _) in running.items()
                if start is not None and now - start >= self.timeout_s]
        if not late:
            return
        epoch = running[late[0]][2]
        for future in late:
            index, _, _ = running.pop(future)
            results[index] = Evaluation.rejected(
                "timeout", f"checking took longer than {self.timeout_s:g} s")
        # The pool cannot stop one task: replace it and rerun the innocent ones.
        for future, (index, _, _) in running.items():
            queue.appendleft(index)
        running.clear()
        self._discard(epoch)


def _mark_started(running: dict[Future, tuple[int, float | None, int]]) -> None:
    """Start the clock of each check a worker has taken. A check's timeout counts from then,
    not from its submission: threads share the pool, so a check may wait behind the other
    threads' checks first, and that wait is not its own. The executor marks a future running
    when it hands it to the workers' queue (one more task than there are workers), so a
    clock starts at most one task early; it is read every :data:`POLL_S` at most."""
    now = time.monotonic()
    for future, (index, start, epoch) in list(running.items()):
        if start is None and (future.running() or future.done()):
            running[future] = (index, now, epoch)


def _requeue(index: int, suspects: set[int], queue: deque[int], requeued: Counter) -> None:
    """Check a candidate again whose pool another thread discarded; after MAX_REQUEUES
    such losses it is suspected itself (run alone: a candidate that keeps killing workers
    must not be requeued forever)."""
    requeued[index] += 1
    if requeued[index] > MAX_REQUEUES:
        suspects.add(index)
    queue.appendleft(index)
