"""The transfer table's replays go to the evaluator as one batch (a GPU evaluator compiles
them side by side), each kernel once, with the same rows as one at a time."""

from __future__ import annotations

from kir.report.ablation import ablate
from kir.rules import apply_trace, parse_step

from .doubles import BatchFunctionEvaluator, FunctionEvaluator
from .search_toy import CTX, toy_evaluate, toy_kernel, toy_registry

STEPS = ("set-const{loop=L0,value=3}", "unroll-loop{loop=L1,factor=2}",
         "unroll-loop{loop=L2,factor=4}", "set-const{loop=L0,value=3}")


def _winner():
    registry = toy_registry()
    steps = [parse_step(text, registry) for text in STEPS]
    kernel = apply_trace(toy_kernel(), steps, registry, CTX).kernel
    return registry, steps, toy_evaluate(kernel).time_ms


def test_replays_are_one_batch_with_the_rows_of_one_at_a_time():
    registry, steps, best = _winner()
    alone = ablate(toy_kernel(), steps, best, registry, CTX, FunctionEvaluator(toy_evaluate))
    batch = BatchFunctionEvaluator(toy_evaluate)
    rows = ablate(toy_kernel(), steps, best, registry, CTX, batch)
    assert rows == alone
    # Four replays, two of them the same kernel (the set-const step given twice): one
    # batch of three distinct kernels, nothing judged alone.
    assert batch.batches == [3] and batch.calls == 3
    assert rows[0] == rows[3] and rows[1].verdict == "paid off"


class FailingBatch(BatchFunctionEvaluator):
    """A batch that raises after its first verdict (a broken GPU pool, say)."""

    def evaluate_many(self, kernels):
        self.batches.append(len(kernels))
        yield self.evaluate(kernels[0])
        raise RuntimeError("the pool went away")


def test_a_batch_that_raises_is_finished_one_by_one():
    registry, steps, best = _winner()
    alone = ablate(toy_kernel(), steps, best, registry, CTX, FunctionEvaluator(toy_evaluate))
    failing = FailingBatch(toy_evaluate)
    assert ablate(toy_kernel(), steps, best, registry, CTX, failing) == alone
    assert failing.batches == [3] and failing.calls == 3


def test_an_evaluator_that_raises_rejects_that_replay_only():
    registry, steps, best = _winner()

    def flaky(kernel):
        if kernel.fingerprint() == first:
            raise RuntimeError("worker died")
        return toy_evaluate(kernel)

    rest = [s for i, s in enumerate(steps) if i != 1]
    first = apply_trace(toy_kernel(), rest, registry, CTX).kernel.fingerprint()
    rows = ablate(toy_kernel(), steps, best, registry, CTX, FunctionEvaluator(flaky))
    assert rows[1].status == "crash" and rows[1].time_without_ms is None
    assert all(isinstance(r.time_without_ms, float) for i, r in enumerate(rows) if i != 1)
