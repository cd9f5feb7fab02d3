"""A lead is raced against its holder: a GPU worker that times a candidate near the search's
best times it in turns with the kernel holding that best, in one worker, and records the
holder's time scaled by the candidate's median ratio over the rounds (kir.measure.gpu.leads).
Run on the CPU emulator with scripted timings (no GPU here): what is tested is which timings
are taken and what the verdict records, not the clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.backends import emit
from kir.driver.load import load_kernel
from kir.measure.gpu.jobs import EmulatorRunner, GpuJob, run_job
from kir.measure.gpu.leads import CLEAR_LEAD, LEAD_MARGIN, RACE_ROUNDS
from kir.measure.mlx import MLXEvaluator
from kir.search.evaluator import Evaluation

from .doubles import ScriptedRunner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"rows": 8, "cols": 100}


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


def _job(loaded, tmp_path, best, holder=True):
    emitted = emit(loaded.kernel, loaded.bound, "cuda")
    return GpuJob(loaded.kernel, str(loaded.bound.spec.path.resolve()), dict(SIZES), "cuda",
                  warmup=0, repeat=3, lock_path=str(tmp_path / "gpu.lock"),
                  confirm_below_ms=best, emitted=emitted,
                  holder=emitted if holder else None)


@pytest.mark.parametrize("first, rounds, recorded", [
    # A lead that holds side by side: the holder's 1.0 ms times the median ratio 0.8.
    (0.85, [(0.4, 0.5), (0.41, 0.5), (0.39, 0.5)], 0.8),
    # A lucky first timing that loses side by side: recorded slower than the best.
    (0.85, [(0.6, 0.5), (0.6, 0.5), (0.55, 0.5)], 1.2),
    # A near miss (within the margin above the best) that wins side by side.
    (1.0 + LEAD_MARGIN / 2, [(0.45, 0.5), (0.45, 0.5), (0.45, 0.5)], 0.9),
    # Beats the holder side by side, but the host is slower now than when the best was
    # timed: its own median (1.2) is above the best (1.0), so it does not take the lead.
    (0.99, [(1.2, 1.3), (1.19, 1.3), (1.21, 1.3)], 1.2),
])
def test_a_timing_near_the_best_is_raced_against_the_holder(loaded, tmp_path, first, rounds,
                                                             recorded):
    medians = [first] + [t for pair in rounds for t in pair]
    runner = ScriptedRunner(medians)
    cache: dict = {}
    verdict, fatal = run_job(_job(loaded, tmp_path, 1.0), runner, cache)
    assert verdict.ok and not fatal, verdict
    assert verdict.time_ms == pytest.approx(recorded)
    assert len(runner.timed) == 1 + 2 * RACE_ROUNDS
    mine, holder = runner.timed[1], runner.timed[2]
    assert mine is not holder and runner.timed[1::2] == [mine] * RACE_ROUNDS \
        and runner.timed[2::2] == [holder] * RACE_ROUNDS  # in turns
    race = verdict.details["race"]
    assert race["rounds_ms"] == [list(pair) for pair in rounds] or \
        race["rounds_ms"] == [tuple(pair) for pair in rounds]
    assert "lead_ms" not in verdict.details


def test_races_of_equal_kernels_do_not_compound_below_their_own_times(loaded, tmp_path):
    """Ten races in a row, each won by 3% by noise alone against a holder taking the same
    0.5 ms: the best stays at the kernels' own 0.5 ms instead of 0.97^10 of it."""
    best, cache = 0.5, {}
    for _ in range(10):
        runner = ScriptedRunner([best * 0.99] + [0.485, 0.5] * RACE_ROUNDS)
        verdict = run_job(_job(loaded, tmp_path, best), runner, cache)[0]
        best = min(best, verdict.time_ms)
    assert best == pytest.approx(0.5, rel=0.031)


def test_the_holder_is_built_once_per_worker_until_the_best_changes(loaded, tmp_path):
    pair = [0.4, 0.5] * RACE_ROUNDS
    runner = ScriptedRunner([0.9, *pair, 0.9, *pair])
    cache: dict = {}
    job = _job(loaded, tmp_path, 1.0)
    for _ in range(2):
        assert run_job(job, runner, cache)[0].ok
    assert runner.built == 3  # the candidate twice, the holder once


@pytest.mark.parametrize("best, first", [(None, 0.5), (1.0, 1.0 + 2 * LEAD_MARGIN)])
def test_no_race_without_a_best_or_far_from_it(loaded, tmp_path, best, first):
    runner = ScriptedRunner([first])
    verdict = run_job(_job(loaded, tmp_path, best), runner, {})[0]
    assert verdict.time_ms == first and len(runner.timed) == 1
    assert "race" not in verdict.details


def test_a_clear_lead_is_timed_twice_and_the_slow_holder_never_run(loaded, tmp_path):
    """A rewrite 50x faster than the unrewritten kernel holding the best: racing would time
    the holder three more times (at N=4096 attention, 2.7 s a call: 35 s holding the GPU
    alone while every other job waits); the lead is clear of any noise, so it is only timed
    again."""
    best = 100.0
    first = best * (1 - CLEAR_LEAD) / 50
    runner = ScriptedRunner([first, first * 1.02])
    verdict = run_job(_job(loaded, tmp_path, best), runner, {})[0]
    assert verdict.time_ms == pytest.approx(first * 1.02)
    assert verdict.details["lead_ms"] == [round(first, 5), round(first * 1.02, 5)]
    assert "race" not in verdict.details and runner.built == 1  # the holder never built


def test_a_holder_that_cannot_be_built_leaves_the_lead_timed_twice(loaded, tmp_path):
    runner = ScriptedRunner([0.8, 0.85], broken_holder=True)
    verdict = run_job(_job(loaded, tmp_path, 1.0), runner, {})[0]
    assert verdict.time_ms == 0.85 and verdict.details["lead_ms"] == [0.8, 0.85]
    assert "does not build" in verdict.details["race_refused"]


def test_the_evaluator_sends_the_holder_of_its_best(loaded, monkeypatch):
    """The search names its best kernel (note_best); the evaluator's jobs carry it emitted,
    the final timing's do not (a measurement, not a race)."""
    evaluator = MLXEvaluator(loaded, "cuda", runner=EmulatorRunner(), workers=1)
    try:
        assert evaluator.gpu_job(loaded.kernel).holder is None
        evaluator.note_best(0.25, loaded.kernel)
        job = evaluator.gpu_job(loaded.kernel)
        assert job.confirm_below_ms == 0.25
        assert job.holder.source == emit(loaded.kernel, loaded.bound, "cuda").source
        evaluator.note_best(0.2)  # a best without its kernel (e.g. from a database)
        assert evaluator.gpu_job(loaded.kernel).holder is None
        sent = []
        monkeypatch.setattr(evaluator.gpu, "run", lambda job: sent.append(job) or
                            Evaluation.timed(0.3))
        evaluator.note_best(0.25, loaded.kernel)
        evaluator.retime(loaded.kernel)
        assert sent[0].holder is None and sent[0].confirm_below_ms is None
    finally:
        evaluator.close()



def test_the_holder_compiles_outside_the_gpu_lock_and_first_runs_under_its_shared_side(loaded):
    """As a candidate is built: kir's compile holds no lock, the first run the shared side.
    Compiled under the lock, every worker's copy of a slow holder kept all timings waiting."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from kir.measure.gpu.leads import holder_built

    events: list[str] = []

    class Lock:
        @contextmanager
        def shared(self):
            events.append("shared")
            yield
            events.append("released")

    class Runner:
        def build_ahead(self, emitted):
            events.append("compile")
            return "built"

        def run(self, built, case):
            events.append("run")

    job = SimpleNamespace(holder=emit(loaded.kernel, loaded.bound, "cuda"), compile_ahead=True)
    cache: dict = {}
    assert holder_built(job, Runner(), None, cache, Lock()) == "built"
    assert events == ["compile", "shared", "run", "released"]
    assert holder_built(job, Runner(), None, cache, Lock()) == "built"  # kept: no new events
    assert len(events) == 4
