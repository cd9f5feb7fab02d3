"""After a GPU search the best few candidates are timed again alone and the fastest, at
that time, is the result (kir.api.finalists). Runs the real MLXEvaluator on the CPU emulator
(no GPU here) through a real search; and the timing budget that cuts the runs of a slow
kernel (backends.mlx_runner.measure)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from kir.api.finalists import FINALISTS, ROUNDS, retime_finalists
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.measure.gpu.jobs import EmulatorRunner
from kir.measure.mlx import MLXEvaluator
from kir.rules import context_for
from kir.search import SearchConfig, search

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_fastest_finalist_timed_alone_is_the_result():
    loaded = load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 8, "cols": 100})
    registry = load_registry(plugins=False)
    ctx = context_for(loaded)
    notes: list[str] = []
    with MLXEvaluator(loaded, "cuda", runner=EmulatorRunner(), warmup=0, repeat=2, workers=1,
                      gpu_timeout_s=30.0, gpu_startup_s=60.0) as evaluator:
        result = search(loaded.kernel, registry, evaluator, ctx,
                        SearchConfig(budget=8, seed=1))
        jobs = evaluator.stats["gpu_jobs"]
        final = retime_finalists(result, loaded.kernel, registry, ctx, evaluator, notes.append)
        ok = {r.fingerprint: r.time_ms for r in result.history if r.status == "ok"}
        fastest = sorted(ok, key=ok.get)[:FINALISTS]
        # each finalist once more, and the unrewritten kernel when it is not one of them,
        # in turns in one GPU job
        retimed = FINALISTS + (loaded.kernel.fingerprint() not in fastest)
        assert evaluator.stats["gpu_jobs"] == jobs + 1
    assert len(ok) >= FINALISTS
    assert len(notes) == 1, notes
    listing = notes[0].split("): ", 1)[1].split(";")[0]
    assert listing.count("->") == retimed and "(unrewritten)" in listing, notes
    # The result is one of the three fastest of the search or the input, at its time alone
    # (listed); the speed-up compares it with the input's time alone.
    assert final.best_kernel.fingerprint() in fastest + [loaded.kernel.fingerprint()]
    unrewritten = [part for part in listing.split(", ") if "(unrewritten)" in part]
    listed_ms = float(unrewritten[0].split("-> ")[1].split(" ms")[0])  # 4 digits
    assert abs(final.baseline_ms - listed_ms) < 1e-3 * listed_ms
    alone = [float(part.split("-> ")[1].split(" ms")[0]) for part in listing.split(", ")]
    assert final.best_ms == min(alone) or abs(final.best_ms - min(alone)) < 1e-3 * min(alone)
    assert final.history == result.history  # the search's own times stay in its history


def test_a_modelled_result_is_left_alone():
    loaded = load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 8, "cols": 100})
    from kir.measure.model import ModelEvaluator

    registry = load_registry(plugins=False)
    ctx = context_for(loaded)
    with ModelEvaluator(loaded) as evaluator:
        result = search(loaded.kernel, registry, evaluator, ctx, SearchConfig(budget=3))
        same = retime_finalists(result, loaded.kernel, registry, ctx, evaluator,
                                lambda line: None)
    assert same is result


def test_a_slow_kernel_is_timed_fewer_times(monkeypatch):
    from backends import mlx_runner

    monkeypatch.setattr(mlx_runner, "TIMING_BUDGET_MS", 20.0)
    runs = []

    def slow():
        runs.append(1)
        time.sleep(0.01)  # 10 ms a run: 12 more runs would be 120 ms, over the 20 ms budget

    timing = mlx_runner.measure(slow, warmup=3, repeat=10)
    assert timing.runs == mlx_runner.SLOW_RUNS and len(runs) == 1 + mlx_runner.SLOW_RUNS
    runs.clear()
    quick = mlx_runner.measure(lambda: runs.append(1), warmup=3, repeat=10)
    assert quick.runs == 10 and len(runs) == 13  # a quick kernel keeps every run


class QuietTimes:
    """Stands in for an evaluator's ``retime`` (all retime_finalists uses): the times alone
    are what this test sets, which a real GPU would not let it choose."""

    def __init__(self, times_ms):
        self.times_ms = times_ms  # kernel fingerprint -> ms

    def retime(self, kernel, rivals=(), rounds=1):
        from kir.search.evaluator import Evaluation

        turns = [[self.times_ms[k.fingerprint()]] * rounds for k in (kernel, *rivals)]
        return Evaluation.timed(turns[0][0], turns_ms=turns)


def _searched_as_on_a_gpu():
    """A short cost-model search of the softmax example, its result marked as a GPU
    search's (so the finalists are timed again): (loaded, registry, ctx, result)."""
    from kir.measure.model import ModelEvaluator

    loaded = load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 8, "cols": 100})
    registry = load_registry(plugins=False)
    ctx = context_for(loaded)
    with ModelEvaluator(loaded) as evaluator:
        result = search(loaded.kernel, registry, evaluator, ctx, SearchConfig(budget=6, seed=1))
    return loaded, registry, ctx, dataclasses.replace(result, modelled=False)


def test_the_input_is_the_result_when_it_is_faster_alone():
    """A search whose finalists, timed alone, are all slower than the unrewritten kernel
    timed alone hands back the unrewritten kernel, and reports both at their times alone."""
    loaded, registry, ctx, result = _searched_as_on_a_gpu()
    assert result.best_steps  # some rewrite won in the search
    kernels = {r.fingerprint for r in result.history if r.status == "ok"}
    base = loaded.kernel.fingerprint()
    quiet = QuietTimes({f: (1.0 if f == base else 2.0) for f in kernels | {base}})
    notes: list[str] = []
    final = retime_finalists(result, loaded.kernel, registry, ctx, quiet, notes.append)
    assert final.best_steps == () and final.best_ms == 1.0 and final.baseline_ms == 1.0
    assert "(unrewritten)" in notes[0]


class FirstFails(QuietTimes):
    """The first finalist cannot be timed (its final check failed); the others can."""

    def __init__(self, times_ms, failing):
        super().__init__(times_ms)
        self.failing = failing
        self.calls = []

    def retime(self, kernel, rivals=(), rounds=1):
        from kir.search.evaluator import Evaluation, Status

        self.calls.append((kernel.fingerprint(), len(rivals), rounds))
        if kernel.fingerprint() == self.failing:
            return Evaluation.rejected(Status.INVALID, "on the GPU: wrong")
        return super().retime(kernel, rivals, rounds)


def test_the_others_are_timed_in_turns_when_the_first_finalist_cannot_be():
    loaded, registry, ctx, result = _searched_as_on_a_gpu()
    kernels = {r.fingerprint for r in result.history if r.status == "ok"}
    base = loaded.kernel.fingerprint()
    best = result.best_kernel.fingerprint()
    quiet = FirstFails({f: (1.0 if f == base else 2.0) for f in kernels | {base}}, best)
    notes: list[str] = []
    final = retime_finalists(result, loaded.kernel, registry, ctx, quiet, notes.append)
    assert quiet.calls[0][0] == best and quiet.calls[1][0] != best
    assert quiet.calls[1][1] == quiet.calls[0][1] - 1 and quiet.calls[1][2] == ROUNDS
    assert final.best_kernel.fingerprint() != best and final.best_ms == 1.0
