"""Several GPU workers at once: candidates compile in parallel, time one at a time.

Compiling a candidate (NVRTC, the Metal compiler) takes about a second and only the CPU; a
search of hundreds of candidates is bound by it when one worker does everything. A
:class:`GpuPool` keeps ``workers`` :class:`~kir.measure.gpu.worker.GpuWorker` processes, each
with the isolation of a single worker (a crash or hang costs its candidate only), and gives
every job the path of one :class:`~kir.measure.gpu.lock.GpuLock`: the workers compile and check
side by side and take turns for the timing, which runs with nothing else of ours on the GPU.

Each worker is driven by one thread of this process (the threads only wait on pipes).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable, Iterator

from kir.measure.gpu.jobs import GpuJob, Runner
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
        self._local = threading.local()
        self._all: list[GpuWorker] = []
        self._guard = threading.Lock()
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="kir-gpu")

    @property
    def started(self) -> int:
        """Worker processes started so far, replacements included."""
        return sum(w.started for w in self._all)

    def _worker(self) -> GpuWorker:
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = GpuWorker(self.runner, timeout_s=self.timeout_s,
                               startup_s=self.startup_s)
            self._local.worker = worker
            with self._guard:
                self._all.append(worker)
        return worker

    def _run(self, job: GpuJob) -> Evaluation:
        # A job waits for the lock while others time: its timeout must allow for that.
        return self._worker().run(dataclasses.replace(job, lock_path=self.lock_path))

    def submit(self, job: GpuJob) -> "Future[Evaluation]":
        """Start ``job`` on a free worker; the future holds its verdict."""
        return self._executor.submit(self._run, job)

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
        self._executor.shutdown(wait=True)
        with self._guard:
            for worker in self._all:
                worker.close()
            self._all.clear()
        for path in (self.lock_path, self.lock_path + ".turnstile") if self._own_lock else ():
            try:
                os.unlink(path)
            except OSError:
                pass

    def __enter__(self) -> "GpuPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
