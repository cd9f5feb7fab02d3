"""``benchmarks/in_turns.py`` and ``search_gpu.py``'s same-budget verdict: which kernel a
search held as its best after N evaluations, and how the verdict reads the rounds timed in
turns. The timing itself needs a GPU (BENCHMARKS.md has its figures)."""

from __future__ import annotations

from tests.benchmark_scripts import benchmark_script


def test_best_at_counts_rejected_evaluations_and_keeps_the_first_of_equals():
    in_turns = benchmark_script("in_turns")
    trail = [([], 2.0), (["a"], None), (["b"], 1.5), (["c"], 1.5), (["d"], 0.5)]
    assert in_turns.best_at(trail, 1) == []
    assert in_turns.best_at(trail, 2) == []  # the rejected evaluation is no best
    assert in_turns.best_at(trail, 4) == ["b"]  # the first of equal times stays
    assert in_turns.best_at(trail, 5) == ["d"]
    assert in_turns.best_at(trail, 99) == ["d"]
    assert in_turns.best_at([(["a"], None)], 1) is None


def test_ratio_in_turns_is_the_median_of_per_round_ratios():
    in_turns = benchmark_script("in_turns")
    # A GPU that slowed down in round 3 slows both kernels: the ratio ignores it.
    assert in_turns.ratio_in_turns([2.0, 2.2, 4.0], [1.0, 1.0, 2.0]) == 2.0
    assert in_turns.ratio_in_turns([1.0, 1.0, 1.0], [2.0, 1.0, 0.5]) == 1.0


def test_time_in_turns_interleaves_the_calls():
    in_turns = benchmark_script("in_turns")
    order: list[str] = []
    times = in_turns.time_in_turns([lambda: order.append("a"), lambda: order.append("b")],
                                   rounds=2, warmup=0, repeat=1)
    assert order == ["a", "b", "a", "b"]
    assert [len(t) for t in times] == [2, 2]


def test_same_budget_verdict_without_timing_when_the_kernels_agree():
    search_gpu = _search_gpu()
    trail = [[[], 2.0], [["x{at=0}"], 1.0], [["y{at=0}"], 0.9]]
    entry = {"evolve": {"evaluations": 3, "trail": trail},
             "random": {"evaluations": 2, "trail": [[[], 2.0], [["x{at=0}"], 1.1]]}}
    # At N = 2 both hold x: the same kernel, nothing to time (loaded is never touched).
    row = search_gpu.same_budget_in_turns(None, None, None, entry, None)
    assert row == {"evaluations": 2, "evolve_steps": ["x{at=0}"],
                   "random_steps": ["x{at=0}"], "verdict": "same kernel",
                   "random_over_evolve": 1.0}
    entry["random"]["trail"] = [[[], None], [["x{at=0}"], None]]
    assert search_gpu.same_budget_in_turns(None, None, None, entry, None)["verdict"] == \
        "no valid kernel on one side"


def _search_gpu():
    import sys

    from tests.benchmark_scripts import BENCHMARKS

    sys.path.insert(0, str(BENCHMARKS))  # the script imports its neighbours as the user runs it
    try:
        return benchmark_script("search_gpu")
    finally:
        sys.path.remove(str(BENCHMARKS))
