"""Test doubles for the :class:`kir.search.evaluator.Evaluator` protocol: evaluators made of
plain functions, so search tests can see what the engine spent without a real target."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from kir.backends.mlx_runner import Timing
from kir.ir import Kernel
from kir.measure.gpu.jobs import EmulatorRunner
from kir.search.evaluator import Evaluation


class FunctionEvaluator:
    """An evaluator from a plain function, for tests and quick experiments.

    ``fn(kernel)`` returns an :class:`Evaluation`, a time in ms (a valid candidate), or None
    (an invalid one). ``calls`` counts invocations, so tests can see what the engine spent.
    """

    def __init__(self, fn: Callable[[Kernel], Evaluation | float | None], *,
                 target: str = "test", device: str = "cpu", modelled: bool = True) -> None:
        self.fn = fn
        self.target = target
        self.device = device
        self.modelled = modelled
        self.calls = 0
        self.batches: list[int] = []

    def evaluate(self, kernel: Kernel) -> Evaluation:
        """Call the function and turn its answer into an :class:`Evaluation`."""
        self.calls += 1
        result = self.fn(kernel)
        if isinstance(result, Evaluation):
            return result
        if result is None:
            return Evaluation.rejected("invalid", "the function rejected the kernel")
        return Evaluation.timed(float(result))


class BatchFunctionEvaluator(FunctionEvaluator):
    """A :class:`FunctionEvaluator` that also offers ``evaluate_many``; it records batch
    sizes in ``batches`` (tests use it to check the engine batches a generation)."""

    def evaluate_many(self, kernels: Sequence[Kernel]) -> Iterable[Evaluation]:
        """Evaluate ``kernels`` in order, yielding each verdict as it is ready."""
        self.batches.append(len(kernels))
        for kernel in kernels:
            yield self.evaluate(kernel)



class ScriptedRunner(EmulatorRunner):
    """A GPU worker's runner that builds, runs and checks on the CPU emulator and whose
    timings are the given medians in turn: what a test of the timing logic sees is which
    timings are taken and what the verdict records, not the clock. ``timed`` lists the built
    kernel of each timing; ``built`` counts builds; with ``broken_holder`` every build after
    the first (a race's holder) fails."""

    def __init__(self, medians: list[float], cut_short: bool = False,
                 broken_holder: bool = False) -> None:
        self.medians = list(medians)
        self.cut_short = cut_short
        self.broken_holder = broken_holder
        self.timed: list[object] = []
        self.built = 0

    def build_ahead(self, emitted):
        self.built += 1
        if self.broken_holder and self.built > 1:
            raise RuntimeError("holder does not build")
        return super().build_ahead(emitted)

    def time(self, built, inputs, warmup, repeat, give_up_ms=None):
        self.timed.append(built)
        median = self.medians.pop(0)
        return Timing(median, median * 0.9, median * 1.1, 0.2,
                      1 if self.cut_short else repeat, self.cut_short)
