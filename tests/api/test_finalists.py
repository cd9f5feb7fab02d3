"""After a GPU search the best few candidates are timed again alone and the fastest, at
that time, is the result (kir.api.finalists). Runs the real MLXEvaluator on the CPU emulator
(no GPU here) through a real search; and the timing budget that cuts the runs of a slow
kernel (backends.mlx_runner.measure)."""

from __future__ import annotations

import time
from pathlib import Path

from kir.api.finalists import FINALISTS, retime_finalists
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
        assert evaluator.stats["gpu_jobs"] == jobs + FINALISTS  # each finalist once more
    ok = {r.fingerprint: r.time_ms for r in result.history if r.status == "ok"}
    assert len(ok) >= FINALISTS
    assert len(notes) == 1, notes
    listing = notes[0].split("): ", 1)[1].split(";")[0]
    assert listing.count("->") == FINALISTS, notes
    # The result is one of the three fastest of the search, at its time alone (listed).
    fastest = sorted(ok, key=ok.get)[:FINALISTS]
    assert final.best_kernel.fingerprint() in fastest
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
