"""Steady-state evolution over an asynchronous evaluator: verdicts are recorded as they
complete, jobs in flight count against the budget and the time, the workers stay busy."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from kir.search import SearchConfig, TuningDB, search
from kir.search.engine import default_key

from .doubles import FunctionEvaluator
from .search_toy import CTX, toy_evaluate, toy_kernel, toy_registry


class AsyncEvaluator(FunctionEvaluator):
    """``submit`` on a thread pool of ``capacity`` workers; a candidate's delay depends on
    its kernel, so verdicts complete out of submission order. Records how many jobs were in
    flight at most (counted when a job is submitted, so a busy machine starting the pool's
    threads late does not change it; each job takes at least 30 ms, so the strategy filling
    the pool is not a race with the first job ending) and how many were ever submitted."""

    def __init__(self, capacity: int = 4, delay=None) -> None:
        super().__init__(toy_evaluate)
        self.capacity = capacity
        self.delay = delay or (lambda kernel: 0.03 + 0.002 * (hash(kernel.fingerprint()) % 5))
        self.pool = ThreadPoolExecutor(capacity)
        self.guard = threading.Lock()
        self.running = self.most = self.submitted = 0
        self.order: list[str] = []  # fingerprints, in submission order

    def _job(self, kernel):
        try:
            time.sleep(self.delay(kernel))
            return self.evaluate(kernel)
        finally:
            with self.guard:
                self.running -= 1

    def submit(self, kernel):
        with self.guard:
            self.running += 1
            self.most = max(self.most, self.running)
        self.submitted += 1
        self.order.append(kernel.fingerprint())
        return self.pool.submit(self._job, kernel)


def steady(budget=30, evaluator=None, **config):
    evaluator = evaluator or AsyncEvaluator()
    result = search(toy_kernel(), toy_registry(), evaluator, CTX,
                    SearchConfig(strategy="steady", budget=budget, seed=5, **config))
    return result, evaluator


def test_steady_search_keeps_workers_busy_within_the_budget():
    result, ev = steady(budget=40)
    assert result.stopped == "budget" and len(result.history) == 40
    # The baseline is judged alone (evaluate); the rest were submitted, never past the budget.
    assert ev.submitted + 1 == ev.calls == result.evaluator_calls <= 40
    assert ev.most == ev.capacity  # every worker had a job at once
    assert result.best_ms is not None and result.best_ms < result.baseline_ms / 2
    assert "invalid" in result.counts  # the planted broken rule was tried, never best
    assert all(r.status == "ok" for r in result.history if r.best_ms == result.best_ms
               and r.time_ms == result.best_ms)


def test_verdicts_are_recorded_as_they_complete():
    """A slow candidate does not hold back the ones submitted after it."""
    ev = AsyncEvaluator(3, lambda kernel: 0.4 if not ev.order[1:] else 0.001)
    result, _ = steady(budget=12, evaluator=ev)
    slow = ev.order[0]  # the first candidate the strategy submitted
    recorded = [r.fingerprint for r in result.history[1:]]  # after the baseline
    assert len(result.history) == 12 and recorded.index(slow) > 0
    assert set(recorded[:recorded.index(slow)]) <= set(ev.order[1:])


def test_time_limit_cancels_jobs_in_flight():
    """Jobs of 0.5 s, two at a time, a limit of 0.75 s: the first two complete at about
    0.5 s, the next two are in flight at the limit (0.25 s from either end, so a loaded
    machine's thread delays do not move a completion across it) and are not waited for.
    (With 50-ms jobs and a 0.4-s limit the last jobs could complete just before the limit
    and leave none in flight: seen once under CI's load.)"""
    result, ev = steady(budget=10_000, evaluator=AsyncEvaluator(2, lambda k: 0.5),
                        time_limit_s=0.75)
    assert result.stopped == "time"
    assert 2 <= len(result.history) < 10
    # the history: the baseline (evaluated, never submitted) and the completed jobs; so at
    # least one submitted job was left in flight
    assert ev.submitted >= len(result.history)


def test_without_submit_one_candidate_at_a_time_and_resumable(tmp_path):
    plain = FunctionEvaluator(toy_evaluate)
    with TuningDB(tmp_path / "t.db") as db:
        key = default_key(toy_kernel(), plain, CTX.sizes)
        first = search(toy_kernel(), toy_registry(), plain, CTX,
                       SearchConfig(strategy="steady", budget=20, seed=1), db, key=key)
        again = FunctionEvaluator(toy_evaluate)
        second = search(toy_kernel(), toy_registry(), again, CTX,
                        SearchConfig(strategy="steady", budget=20, seed=1), db, key=key)
    assert len(first.history) == 20 and plain.calls == 20
    # Serial and seeded: the same trajectory, every verdict from the database.
    assert again.calls == 0 and second.cached == 20
    assert [r.genome for r in second.history] == [r.genome for r in first.history]
