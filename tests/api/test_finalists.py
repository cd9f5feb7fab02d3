"""After a GPU search the best few candidates are timed again alone and the fastest, at
that time, is the result (kir.api.finalists). Runs the real MLXEvaluator on the CPU emulator
(no GPU here) through a real search; and the timing budget that cuts the runs of a slow
kernel (backends.mlx_runner.measure)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from kir.api.finalists import DIVERSE, DIVERSE_MARGIN, FINALISTS, ROUNDS, retime_finalists
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.measure.gpu.jobs import EmulatorRunner
from kir.measure.mlx import MLXEvaluator
from kir.rules import apply_trace, context_for, parse_step
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
        # each finalist once more (and up to DIVERSE of another make, which depends on the
        # emulator's timings), and the unrewritten kernel when it is not one of them, in
        # turns in one GPU job
        retimed = FINALISTS + (loaded.kernel.fingerprint() not in fastest)
        assert evaluator.stats["gpu_jobs"] == jobs + 1
    assert len(ok) >= FINALISTS
    assert len(notes) == 1, notes
    listing = notes[0].split("): ", 1)[1].split(";")[0]
    assert retimed <= listing.count("->") <= retimed + DIVERSE, notes
    assert "(unrewritten)" in listing, notes
    # The result is a finalist or the input, at its time alone (listed); the speed-up
    # compares it with the input's time alone.
    near = [f for f in ok if ok[f] <= min(ok.values()) * (1 + DIVERSE_MARGIN)]
    assert final.best_kernel.fingerprint() in fastest + near + [loaded.kernel.fingerprint()]
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


def _another_make(searched_ms: float):
    """The short search's history re-timed: its first three ok records at 1.00-1.02 ms and
    one later record that uses a rule none of those three uses at ``searched_ms``, the rest
    at 5 ms; that record is the fastest alone (0.5 ms against 2.0). Returns (loaded,
    registry, ctx, the result so timed, the record, the times alone)."""
    loaded, registry, ctx, result = _searched_as_on_a_gpu()
    records = [r for r in result.history if r.status == "ok" and r.genome]
    names = [{t.split("{")[0] for t in r.genome} for r in records]
    pick = next((r for i, r in enumerate(records[3:], 3)
                 if names[i] - set().union(*names[:3])), None)
    if pick is None:
        pytest.skip("the short search made no candidate with a rule of its own")
    times = {records[i].fingerprint: 1.0 + 0.01 * i for i in range(3)}
    times[pick.fingerprint] = searched_ms
    history = [dataclasses.replace(r, time_ms=times.get(r.fingerprint, 5.0))
               for r in result.history]
    steps = [parse_step(t, registry) for t in records[0].genome]
    searched = dataclasses.replace(
        result, history=history, best_ms=1.0, best_steps=tuple(steps),
        best_kernel=apply_trace(loaded.kernel, steps, registry, ctx).kernel)
    quiet = {f: 2.0 for f in {r.fingerprint for r in history} | {loaded.kernel.fingerprint()}}
    quiet[pick.fingerprint] = 0.5
    return loaded, registry, ctx, searched, pick, QuietTimes(quiet)


def test_a_candidate_of_another_make_is_timed_with_the_finalists():
    """The three fastest by the search's times share their rules; a candidate within
    DIVERSE_MARGIN that brings a rule none of them uses is timed in turns with them, and
    wins when it is faster alone. One slower than the margin is not timed."""
    loaded, registry, ctx, searched, pick, quiet = _another_make(1.05)
    final = retime_finalists(searched, loaded.kernel, registry, ctx, quiet, lambda line: None)
    assert final.best_kernel.fingerprint() == pick.fingerprint
    far = [dataclasses.replace(r, time_ms=1.5) if r.fingerprint == pick.fingerprint else r
           for r in searched.history]
    final = retime_finalists(dataclasses.replace(searched, history=far), loaded.kernel,
                             registry, ctx, quiet, lambda line: None)
    assert final.best_kernel.fingerprint() != pick.fingerprint


def test_a_hint_of_another_make_is_timed_whatever_its_time_in_the_search():
    """A hint judged while every worker compiled can read far slower in the search than it
    is; one that brings a rule none of the finalists uses is timed with them anyway (and
    wins when it is the fastest alone); the same genome not named as a hint is not."""
    loaded, registry, ctx, searched, pick, quiet = _another_make(3.0)  # far outside the margin
    final = retime_finalists(searched, loaded.kernel, registry, ctx, quiet, lambda line: None,
                             hints=[tuple(pick.genome)])
    assert final.best_kernel.fingerprint() == pick.fingerprint
    final = retime_finalists(searched, loaded.kernel, registry, ctx, quiet, lambda line: None)
    assert final.best_kernel.fingerprint() != pick.fingerprint
