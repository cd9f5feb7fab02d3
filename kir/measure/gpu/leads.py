"""When a candidate's timing may take the search's lead: raced in turns against the kernel
that holds it, or, where the job does not carry that kernel, timed twice.

A search times hundreds of candidates, most within a few per cent of each other, while its
compiles and validations load the host; at 0.1-0.2 ms a median of ten calls then moves by
10-20% with the host's state (BENCHMARKS.md round 23). Timed once, the fastest of them is
mostly the luckiest. Round 23 made a lead hold twice (:func:`confirmed`); that still compares
a timing now with the holder's timing taken minutes earlier under another load, so the
search's "best" drifted with the host (round 24: register rows read as slow as the input when
timed first, under the heaviest load). :func:`raced` compares like with like: the candidate and
the holder timed in turns, in one worker, holding the GPU alone. The candidate is recorded at
the larger of its own median over the race and the holder's recorded time times the median of
its per-round ratios, so it takes the lead only by beating the holder side by side *and*
timing under the best now. Both are needed: on the H200 a 0.1-ms reduction recorded at the
ratio alone drifted 30% below any time its kernels took alone over 49 races (a false win of
a few per cent, scaled from the last false win, compounds); its own median is a measurement
taken now, which no chain of races can push down.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

# A candidate timed within this fraction above the best is raced too: noise that made a
# faster kernel read a little slower would otherwise hide it for good.
LEAD_MARGIN = 0.05
# A candidate timed this fraction or more below the best leads clearly: more than the host's
# load moves a timing (round 23: 10-20%). It is timed twice (:func:`confirmed`), not raced:
# a race times the holder too, and a holder far slower than the candidate made races cost
# what the search could not pay (the unrewritten attention kernel, 169 ms at N=1024 and 2.7 s
# at N=4096, against its 0.3-3 ms rewrites: 6 s and 35 s a race, each holding the GPU alone
# while the other workers' jobs waited; the H200 searches recorded 3 candidates in 60 s).
CLEAR_LEAD = 0.25
# Rounds of a race, each one timing of the candidate then one of the holder.
RACE_ROUNDS = 3


def near_best(job: Any, timing: Any) -> bool:
    """Whether ``timing`` (the candidate's first) is close enough to the search's best that
    only a race can tell which is faster: from :data:`CLEAR_LEAD` below it to
    :data:`LEAD_MARGIN` above it."""
    best = job.confirm_below_ms
    return best is not None and not timing.cut_short and \
        best * (1 - CLEAR_LEAD) < timing.median_ms < best * (1 + LEAD_MARGIN)


def confirmed(job: Any, runner: Any, built: Any, inputs: dict[str, Any],
              timing: Any) -> tuple[Any, list[float] | None]:
    """A lead must hold twice: a timing under ``job.confirm_below_ms`` (the search's best so
    far) is taken again at once, under the same lock, and the slower of the two kept, so an
    unconfirmed lead is recorded as its other timing. For jobs that do not carry the
    holder (:func:`raced`). Returns the timing to record and both medians (None when there
    was no lead)."""
    if job.confirm_below_ms is None or timing.cut_short or \
            timing.median_ms >= job.confirm_below_ms:
        return timing, None
    again = runner.time(built, inputs, 1, job.repeat, None)
    kept = again if again.median_ms > timing.median_ms else timing
    return kept, [round(timing.median_ms, 5), round(again.median_ms, 5)]


def holder_built(job: Any, runner: Any, case: Any, cache: dict, lock: Any) -> Any:
    """The holder (``job.holder``, an emitted call) built the way the job's own kernel is
    and run once on ``case``, kept in the worker's ``cache`` until the search's best
    changes; or why it cannot be raced (a string). As for a candidate, kir's compile runs
    outside the GPU lock and the first run under its shared side (``lock``): compiled under
    it, every worker's copy of a slow holder kept the timings of all of them waiting."""
    from kir.backends.mlx_runner import source_hash

    key = source_hash(job.holder)
    kept = cache.get("holder")
    if kept is not None and kept[0] == key:
        return kept[1]
    cache.pop("holder", None)  # the old holder's GPU buffers go before the new one's come
    try:
        built = runner.build_ahead(job.holder) if job.compile_ahead else \
            runner.build(job.holder)
        with lock.shared():
            runner.run(built, case)
    except Exception as exc:  # noqa: BLE001 - judged already; the candidate is timed twice
        built = f"{type(exc).__name__}: {exc}"
    cache["holder"] = (key, built)
    return built


def raced(job: Any, runner: Any, built: Any, holder: Any, inputs: dict[str, Any],
          timing: Any) -> tuple[Any, dict[str, Any]]:
    """The candidate (``built``) and the holder timed in turns, :data:`RACE_ROUNDS` rounds;
    call it holding the GPU alone. Returns ``timing`` rescaled to the larger of the
    candidate's median over the rounds and the holder's recorded time
    (``job.confirm_below_ms``) times the median of the per-round ratios, and the race's
    record (each round's two medians and that ratio)."""
    rounds = []
    for _ in range(RACE_ROUNDS):
        mine = runner.time(built, inputs, 1, job.repeat, None).median_ms
        theirs = runner.time(holder, inputs, 1, job.repeat, None).median_ms
        rounds.append((mine, theirs))
    ratio = statistics.median(mine / theirs for mine, theirs in rounds)
    own = statistics.median(mine for mine, _ in rounds)
    scale = max(own, job.confirm_below_ms * ratio) / timing.median_ms
    rescaled = replace(timing, median_ms=timing.median_ms * scale,
                       min_ms=timing.min_ms * scale, max_ms=timing.max_ms * scale)
    return rescaled, {"rounds_ms": [(round(a, 5), round(b, 5)) for a, b in rounds],
                      "ratio": round(ratio, 5)}
