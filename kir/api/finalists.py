"""After a GPU search: time its fastest few candidates again, alone, and keep the fastest.

During a search the GPU workers compile the next candidates (NVRTC, a second of a core each)
while one candidate is timed, and a short kernel's time through MLX includes the host's
launch and synchronization, which that load disturbs: on the H200, kernels of about 0.25 ms
measured 10–25% slower, and in a different order, than the same kernels timed on a quiet
machine (BENCHMARKS.md, "quiet re-timing"). MLX's built-in is timed after the search, alone;
the kernel kir reports must be timed the same way, or the comparison favours one side by
chance. So the best ``count`` distinct candidates of the history are timed again one after
another with nothing else running (more runs than in the search; the evaluator first lets
the candidates a time-limited search left in flight finish: ``MLXEvaluator.quiesce``) and
the fastest of them, at its quiet time, is the result. The search's history keeps its
in-search times.

The unrewritten kernel is timed again alone too, always: the speed-up a user reads compares
two quiet times (on the H200 a 4096 x 4096 softmax search measured its input at 0.0969 ms
between compiles and reported a finalist of 0.1117 ms alone as "x0.867"), and when the input
alone beats every finalist the input is the result — a search never hands back a kernel
slower than the one it was given.

The finalists and the input are timed in turns, :data:`ROUNDS` rounds, in one GPU worker
(``evaluator.retime(..., rivals=..., rounds=...)``), and each is ranked and reported by its
median over the rounds. Timed one after another, once each, a 0.2-ms finalist's median of 20
moved by up to 25% from one minute to the next on an idle H200, so the fastest of four such
timings was the luckiest; the user's reported time and speed-up read 10-15% better than the
same kernels timed in turns beside MLX's built-in (BENCHMARKS.md round 23).
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Callable, Sequence

from kir.errors import KirError
from kir.rules import apply_trace, parse_step
from kir.search.genome import genome_text
from kir.search.records import rule_of

FINALISTS = 3  # candidates timed again: the winner and the next two
ROUNDS = 3  # turns over the finalists and the input
# Candidates of another make timed with them: the fastest, within DIVERSE_MARGIN of the best,
# that use a rule none of the finalists so far uses (a row kept in registers beside three
# variants of it staged in shared memory). In-search timings under the host's load can rank
# structures wrongly, not only variants: on the H200 an 8192^2 softmax's register-cached
# kernels timed 4% behind the staged ones in the search and 3-7% ahead of them in turns
# (BENCHMARKS.md "Round 24"); the top three by the search's times were all staged.
DIVERSE = 2
DIVERSE_MARGIN = 0.10
# Hints (the search's first genomes: whole structures of known practice) of another make,
# timed with them whatever their time in the search: the hints are judged first, while
# every GPU worker compiles, and on the H200 an 8192^2 softmax's register-cached hints read
# 0.30-0.31 ms there (the input itself 0.31 ms, 0.244 alone) and were never judged again.
HINTS = 2


def retime_finalists(result, base, registry, ctx, evaluator,
                     note: Callable[[str], None], count: int = FINALISTS,
                     hints: Sequence[tuple[str, ...]] = ()):
    """``result`` with its best replaced by the fastest of its ``count`` best distinct
    candidates (with those of another make, :data:`DIVERSE` from the search and
    :data:`HINTS` of ``hints``, the search's hint genomes as text) timed again alone
    (``evaluator.retime``); unchanged for an evaluator without it (the cost model, a
    cluster), or when no finalist could be timed again."""
    retime = getattr(evaluator, "retime", None)
    if not callable(retime) or result.best_ms is None or result.modelled:
        return result
    ranked = sorted((r for r in result.history if r.status == "ok" and r.time_ms is not None),
                    key=lambda r: r.time_ms)
    # The current best first (it may come from the tuning database, not this history).
    finalists = [(result.best_ms, genome_text(result.best_steps))]
    seen = {result.best_kernel.fingerprint()}
    for record in ranked:
        if len(finalists) == count:
            break
        if record.fingerprint not in seen:
            seen.add(record.fingerprint)
            finalists.append((record.time_ms, record.genome))
    near = [r for r in ranked if r.time_ms <= result.best_ms * (1 + DIVERSE_MARGIN)]
    finalists += _of_another_make(near, finalists, seen, DIVERSE)
    hinted = {tuple(h) for h in hints}
    finalists += _of_another_make([r for r in ranked if tuple(r.genome) in hinted],
                                  finalists, seen, HINTS)
    if result.baseline_ms is not None and all(genome for _, genome in finalists):
        finalists.append((result.baseline_ms, ()))
    replays = []
    for searched_ms, genome in finalists:
        try:
            steps = [parse_step(text, registry) for text in genome]
            replays.append((searched_ms, apply_trace(base, steps, registry, ctx)))
        except KirError:
            continue
    timed = _in_turns(replays, retime)
    if not timed:
        return result
    quiet_ms, _, replay = min(timed, key=lambda t: t[0])
    listing = ", ".join(f"{searched:.4g} -> {ms:.4g} ms"
                        + ("" if each.applied else " (unrewritten)")
                        for ms, searched, each in timed)
    note(f"finalists timed again alone, in turns (in the search -> alone, median of "
         f"{ROUNDS} rounds): {listing}; the fastest alone is the result")
    baseline_ms = next((ms for ms, _, each in timed if not each.applied),
                       result.baseline_ms)
    return dataclasses.replace(result, best_steps=tuple(replay.applied),
                               best_kernel=replay.kernel, best_ms=quiet_ms,
                               baseline_ms=baseline_ms)


def _of_another_make(candidates, finalists, seen: set, limit: int) -> list[tuple]:
    """Up to ``limit`` more finalists from ``candidates`` (ok records, fastest first), each
    using a rule none of the finalists before it uses."""
    rules = set().union(*(_rule_names(genome) for _, genome in finalists))
    extra: list[tuple] = []
    for record in candidates:
        if len(extra) == limit:
            break
        names = _rule_names(record.genome)
        if record.fingerprint in seen or names <= rules:
            continue
        seen.add(record.fingerprint)
        rules |= names
        extra.append((record.time_ms, record.genome))
    return extra


def _rule_names(genome) -> set[str]:
    return {rule_of(str(text)) for text in genome}


def _in_turns(replays, retime) -> list[tuple[float, float, object]]:
    """(median over the rounds alone, time in the search, replay) of each finalist the GPU
    could time in turns with the others. The first finalist carries the others as rivals;
    when it cannot be timed at all (its final check or compile failed), the rest are timed
    without it."""
    while replays:
        (_, first), rivals = replays[0], replays[1:]
        verdict = retime(first.kernel, rivals=[replay.kernel for _, replay in rivals],
                         rounds=ROUNDS)
        medians = _medians(verdict)
        if medians:
            return [(ms, searched_ms, replay)
                    for ms, (searched_ms, replay) in zip(medians, replays) if ms is not None]
        replays = rivals
    return []


def faster_in_turns(kernel, challenger, retime) -> float | None:
    """``challenger``'s median alone when, timed in turns with ``kernel`` (:data:`ROUNDS`
    rounds, one GPU worker), it is the faster of the two; None when it is not, or when the
    two could not both be timed."""
    medians = _medians(retime(kernel, rivals=[challenger], rounds=ROUNDS))
    if len(medians) != 2 or None in medians:
        return None
    own, other = medians
    return other if other < own else None


def _medians(verdict) -> list[float | None]:
    """Per kernel of a timing in turns (the first kernel first), its median over the rounds,
    None for a rival that could not be timed; [] when the first kernel could not be."""
    if not verdict.ok:
        return []
    turns = verdict.details.get("turns_ms") or [[verdict.time_ms]]
    return [statistics.median(t) if isinstance(t, list) and t else None for t in turns]
