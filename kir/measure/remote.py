"""An evaluator whose work runs on an executor's workers: :class:`RemoteEvaluator`.

The search sees the usual evaluator (``evaluate``, ``evaluate_many`` with verdicts in order,
``note_best``) plus ``submit(kernel)``, a :class:`concurrent.futures.Future` of the verdict,
and ``capacity``, the jobs worth keeping in flight (the steady-state strategy uses both,
:mod:`kir.search.steady`). Each candidate becomes a location-free :class:`EvalJob`
(:mod:`kir.measure.portable`): the executor validates it on some CPU worker and, when valid,
has a device worker check and time (or model) it.

An :class:`Executor` is where the work runs: :class:`LocalExecutor` (threads of this
process: the reference the tests compare with) or the Ray executor
(:mod:`kir.measure.ray_executor`). Faults are the executor's: a lost worker gives a "crash"
for its job only, retried once elsewhere.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from typing import Iterator, Protocol, Sequence

from kir.driver.load import Loaded
from kir.ir import Kernel
from kir.measure.model_sizes import counted_sizes
from kir.measure.portable import DeviceService, EvalContext, EvalJob, validate
from kir.search.device import DeviceDescriptor
from kir.search.evaluator import Evaluation, Status


class Executor(Protocol):
    """Runs validation and device work for :class:`RemoteEvaluator`."""

    capacity: int  # jobs worth keeping in flight

    def describe(self) -> DeviceDescriptor:
        """The device its workers announced."""

    def validate(self, context: EvalContext, job: EvalJob) -> "Future[Evaluation]":
        """Validate on some CPU worker."""

    def measure(self, context: EvalContext, job: EvalJob,
                validated: Evaluation) -> "Future[Evaluation]":
        """Check and time (or model) a validated candidate on a device worker."""

    def close(self) -> None:
        """Release the workers."""


class RemoteEvaluator:
    """Validate and time candidates through ``executor``. ``give_up_factor`` as for
    :class:`kir.measure.mlx.MLXEvaluator`; ``owns_executor``: :meth:`close` closes it (a
    campaign shares one executor per device between its searches)."""

    def __init__(self, loaded: Loaded, executor: Executor, *,
                 check_sizes: dict[str, int] | None = None,
                 validate_sizes: Sequence[dict[str, int]] | None = None,
                 give_up_factor: float | None = 3.0, owns_executor: bool = True,
                 **settings) -> None:
        self.executor = executor
        self.descriptor = executor.describe()
        self.context = EvalContext.of(loaded, self.descriptor, check_sizes=check_sizes,
                                      validate_sizes=validate_sizes, **settings)
        self.target = self.descriptor.target
        self.device = self.descriptor.device
        self.modelled = self.context.modelled
        # A GPU times at the compiled sizes; the model counts the first case (at the check
        # sizes) and prices at the compiled ones when its counts can be carried there.
        self.time_sizes = dict(loaded.bound.sizes)
        if self.modelled and check_sizes:
            counted_at = dict(loaded.bound.spec.bind({**loaded.bound.sizes,
                                                      **check_sizes}).sizes)
            if counted_sizes(loaded.bound.spec, counted_at, loaded.bound.sizes)[1]:
                self.time_sizes = counted_at
        self.give_up_factor = give_up_factor
        # The best's time and the kernel holding it, together (note_best): a job is built
        # from one pair, never from a new time and the old holder.
        self._lead: tuple[float | None, Kernel | None] = (None, None)
        self.owns_executor = owns_executor

    @property
    def capacity(self) -> int:
        return max(1, int(self.executor.capacity))

    def note_best(self, best_ms: float | None, kernel: Kernel | None = None) -> None:
        """The search's best valid time so far (sets where timing gives up) and the kernel
        holding it, which the jobs carry to the device for near-best candidates to race
        (:mod:`kir.measure.gpu.leads`)."""
        self._lead = (best_ms, kernel)

    def _give_up(self) -> float | None:
        best_ms = self._lead[0]
        if self.modelled or not best_ms or not self.give_up_factor:
            return None
        return best_ms * self.give_up_factor

    def submit(self, kernel: Kernel, give_up_ms: float | None = None) -> "Future[Evaluation]":
        """Start judging ``kernel``; the future holds its verdict (cancelling it stops the
        work not yet started)."""
        best_ms, holder = self._lead
        racing = not self.modelled and best_ms is not None
        job = EvalJob.of(self.context, kernel, give_up_ms if give_up_ms is not None
                         else self._give_up(), best_ms if racing else None,
                         holder if racing else None)
        return _Chain(self.executor, self.context, job).outer

    def evaluate(self, kernel: Kernel) -> Evaluation:
        """Judge one candidate and wait for it."""
        return self.submit(kernel).result()

    def evaluate_many(self, kernels: Sequence[Kernel]) -> Iterator[Evaluation]:
        """Judge candidates side by side; verdicts in the order given. Timing gives up
        against the best time known when the batch starts (as with a local GPU pool)."""
        give_up = self._give_up()
        futures = [self.submit(kernel, give_up) for kernel in kernels]
        try:
            for future in futures:
                yield future.result()
        finally:  # the search stopped early: do not run what it will not read
            for future in futures:
                future.cancel()

    def close(self) -> None:
        if self.owns_executor:
            self.executor.close()

    def __enter__(self) -> "RemoteEvaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Chain:
    """Validation, then (when valid) the device step, as one future."""

    def __init__(self, executor: Executor, context: EvalContext, job: EvalJob) -> None:
        self.executor, self.context, self.job = executor, context, job
        self.outer: Future = Future()
        self.inner: Future | None = None
        self._guard = threading.Lock()
        self.outer.add_done_callback(self._cancelled)
        self._then(executor.validate(context, job), self._validated)

    def _then(self, future: Future, step) -> None:
        with self._guard:
            self.inner = future
        future.add_done_callback(step)

    def _cancelled(self, outer: Future) -> None:
        if outer.cancelled():
            with self._guard:
                inner = self.inner
            if inner is not None:
                inner.cancel()

    def _validated(self, future: Future) -> None:
        verdict = _result(future)
        if verdict is None or not verdict.ok:
            return self._finish(verdict)
        if self.outer.cancelled():
            return None
        self._then(self.executor.measure(self.context, self.job, verdict), self._measured)
        return None

    def _measured(self, future: Future) -> None:
        self._finish(_result(future))

    def _finish(self, verdict: Evaluation | None) -> None:
        if verdict is None:
            self.outer.cancel()
            return
        try:
            self.outer.set_result(verdict)
        except InvalidStateError:  # cancelled meanwhile
            pass


def _result(future: Future) -> Evaluation | None:
    """A step's verdict; None when it was cancelled; an exception is the job's crash."""
    if future.cancelled():
        return None
    exc = future.exception()
    if exc is not None:
        return Evaluation.rejected(Status.CRASH, f"the worker raised {type(exc).__name__}: {exc}")
    return future.result()


class LocalExecutor:
    """Run remote jobs in threads of this process: ``workers`` validations at a time and one
    :class:`DeviceService`. The jobs take the same path as on a cluster (IR text, bundle,
    cases rebuilt from the context); tests compare it and the cluster with the local pools."""

    def __init__(self, role: str = "auto", *, workers: int = 2, runner=None,
                 gpu_workers: int = 1) -> None:
        self.service = DeviceService(role, runner, gpu_workers)
        self.capacity = workers + gpu_workers
        self._cpu = ThreadPoolExecutor(workers, thread_name_prefix="kir-validate")
        self._device = ThreadPoolExecutor(gpu_workers, thread_name_prefix="kir-device")

    def describe(self) -> DeviceDescriptor:
        return self.service.describe()

    def validate(self, context: EvalContext, job: EvalJob) -> "Future[Evaluation]":
        return self._cpu.submit(validate, context, job)

    def measure(self, context: EvalContext, job: EvalJob,
                validated: Evaluation) -> "Future[Evaluation]":
        return self._device.submit(self.service.measure, context, job, validated)

    def close(self) -> None:
        self._cpu.shutdown(wait=True, cancel_futures=True)
        self._device.shutdown(wait=True, cancel_futures=True)
        self.service.close()
