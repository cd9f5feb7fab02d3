"""Several GPU workers at once: candidates compile in parallel, time one at a time.

Compiling a candidate (NVRTC, the Metal compiler) takes about a second and only the CPU; a
search of hundreds of candidates is bound by it when one worker does everything. A
:class:`GpuPool` keeps ``workers`` :class:`~kir.measure.gpu.worker.GpuWorker` processes, each
with the isolation of a single worker (a crash or hang costs its candidate only), and gives
every job the path of one :class:`~kir.measure.gpu.lock.GpuLock`: the workers compile and check
side by side and take turns for the timing, which runs with nothing else of ours on the GPU.

Jobs run on the pool's threads (they only wait on pipes), each taking an idle worker. A
worker process dies with the thread that started it (``PR_SET_PDEATHSIG`` is per thread),
so only those threads, which live as long as the pool, start them.

A fresh worker's first job pays for its start: Python and MLX imported, the GPU context made,
the spec's inputs generated and its reference run at the compiled sizes (seconds each; on the
H200 the first 15-25 s of a 60-s search went to workers starting one batch of candidates at a
time). So the pool's first job also starts every other worker on a *preparation* job
(:attr:`GpuJob.prepare_only`: that start-up and nothing else), side by side with it; the
candidates that follow find them ready. A caller with work to do before its first candidate
(a search building its hints) calls :meth:`GpuPool.prepare` first, and all start meanwhile.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable, Iterator

from kir.measure.gpu.jobs import GpuJob, Runner
from kir.measure.gpu.shared_case import new_case_dir
from kir.measure.gpu.worker import GpuWorker
from kir.search.evaluator import Evaluation


class GpuPool:
    """``workers`` GPU worker processes sharing one timing lock."""

    def __init__(self, runner: Runner, workers: int = 4, *, timeout_s: float = 60.0,
                 startup_s: float = 60.0, lock_path: str | None = None) -> None:
        self.runner = runner
        self.workers = max(1, workers)
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        # A lock of our own, unless the caller names one shared with other pools of the same
        # GPU (remote device workers on one host: kir.measure.portable); that one stays.
        self._own_lock = lock_path is None
        if lock_path is None:
            handle, lock_path = tempfile.mkstemp(prefix="kir-gpu-", suffix=".lock")
            os.close(handle)
        self.lock_path = lock_path
        # Check cases the workers share (kir.measure.gpu.shared_case): the spec's reference
        # runs once a pool, not once a worker.
        self.case_dir = new_case_dir()
        self._all: list[GpuWorker] = []
        self._idle: queue.SimpleQueue[GpuWorker] = queue.SimpleQueue()
        self._guard = threading.Lock()
        self._prepared = False
        self._busy_preparing: set[int] = set()  # ids of workers on their preparation job
        self._running: dict[int, GpuWorker] = {}  # workers on a job of submit's, by id
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="kir-gpu")
        self._quiet = threading.Condition()  # guards _active: jobs submitted, not yet done
        self._active = 0

    @property
    def started(self) -> int:
        """Worker processes started so far, replacements included."""
        return sum(w.started for w in self._all)

    def _new_worker(self) -> GpuWorker:
        worker = GpuWorker(self.runner, timeout_s=self.timeout_s, startup_s=self.startup_s)
        self._all.append(worker)  # under self._guard
        return worker

    def _checkout(self) -> GpuWorker:
        """An idle worker, a new one while fewer than ``workers`` exist, else the next to
        finish (one being prepared). At most ``workers`` jobs run at once (the executor's
        threads), so a job never waits for a worker another job holds."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._guard:
            if len(self._all) < self.workers:
                return self._new_worker()
        return self._idle.get()

    def _run(self, job: GpuJob) -> Evaluation:
        worker = self._checkout()
        with self._guard:
            self._running[id(worker)] = worker
        try:
            # A job waits for the lock while others time: its timeout must allow for that.
            return worker.run(self._for_pool(job))
        finally:
            with self._guard:
                self._running.pop(id(worker), None)
            self._idle.put(worker)

    def interrupt_running(self) -> int:
        """Kill the workers running a job now (their jobs answer "crash"; each starts again
        on its next job) and return how many. A search that stopped does not read those
        verdicts, and its finalists are timed once the host is quiet: a candidate's compile
        can take 20 s (NVRTC on a large unrolled kernel, on the H200), which the finalists'
        timing would otherwise wait for. Workers still starting are left alone."""
        with self._guard:
            running = list(self._running.values())
        for worker in running:
            worker.interrupt()
        return len(running)

    def _for_pool(self, job: GpuJob) -> GpuJob:
        """``job`` with the pool's GPU lock and shared check cases."""
        return dataclasses.replace(job, lock_path=self.lock_path, case_dir=self.case_dir)

    def _make_preparing(self, count: int) -> list[GpuWorker]:
        """Make ``count`` more workers (never more than ``workers`` in all), marked
        preparing."""
        with self._guard:
            spare = [self._new_worker()
                     for _ in range(min(count, self.workers - len(self._all)))]
            self._busy_preparing.update(id(w) for w in spare)
        return spare

    def _prepare(self, worker: GpuWorker, job: GpuJob) -> None:
        """Run ``worker``'s preparation job, then make it idle. On an executor thread: a
        worker process is killed when the thread that started it ends (PR_SET_PDEATHSIG is
        per thread), and the executor's threads live as long as the pool."""
        try:
            worker.run(dataclasses.replace(self._for_pool(job), prepare_only=True))
        except (OSError, ValueError):
            pass  # the pool closed it meanwhile (close kills workers still preparing)
        finally:
            with self._guard:
                self._busy_preparing.discard(id(worker))
            self._idle.put(worker)

    def prepare(self, job: GpuJob) -> None:
        """Start every worker now on a preparation job made from ``job`` (any job of the
        search: the check case is the same for all), so that their start-up overlaps what
        the caller does before its first candidate. Once per pool; a later first
        :meth:`submit` then starts none."""
        with self._guard:
            if self._prepared:
                return
            self._prepared = True
        for worker in self._make_preparing(self.workers):
            self._executor.submit(self._prepare, worker, job)

    def submit(self, job: GpuJob) -> "Future[Evaluation]":
        """Start ``job`` on a free worker; the future holds its verdict. The first job also
        starts the other workers unless :meth:`prepare` did (see the module's docstring):
        queued right behind it, they each take a thread of their own before any later job
        does."""
        with self._guard:
            first, self._prepared = not self._prepared, True
        # the others made before the job takes its own
        spare = self._make_preparing(self.workers - 1) if first else []
        future = self._executor.submit(self._run, job)
        with self._quiet:
            self._active += 1
        future.add_done_callback(self._job_done)  # also when cancelled before it started
        for worker in spare:
            self._executor.submit(self._prepare, worker, job)
        return future

    def _job_done(self, _future: Future) -> None:
        with self._quiet:
            self._active -= 1
            self._quiet.notify_all()

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until every job submitted so far has finished (or was cancelled before it
        started); False when ``timeout_s`` passed first. A search that stops at its time
        limit leaves jobs running whose verdicts nobody reads, and a timing made beside
        them shares the host and the GPU with their compiles and checks."""
        with self._quiet:
            return self._quiet.wait_for(lambda: self._active == 0, timeout_s)

    def run(self, job: GpuJob) -> Evaluation:
        """Run one job and wait for it."""
        return self.submit(job).result()

    def run_many(self, jobs: Iterable[GpuJob]) -> Iterator[Evaluation]:
        """Verdicts in the order of ``jobs``; all are started at once."""
        futures = [self.submit(job) for job in jobs]
        for future in futures:
            yield future.result()

    def close(self) -> None:
        """Stop every worker process and remove the lock files."""
        with self._guard:  # a search shorter than the start-up need not wait for it
            starting = [w for w in self._all if id(w) in self._busy_preparing]
        for worker in starting:
            worker.kill()
        self._executor.shutdown(wait=True)
        with self._guard:
            for worker in self._all:
                worker.close()
            self._all.clear()
        shutil.rmtree(self.case_dir, ignore_errors=True)
        for path in (self.lock_path, self.lock_path + ".turnstile") if self._own_lock else ():
            try:
                os.unlink(path)
            except OSError:
                pass

    def __enter__(self) -> "GpuPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
