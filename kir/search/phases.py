"""Where a search's seconds went, phase by phase.

The engine times its own phases (applying rules and fingerprinting what they make, the
tuning database); an evaluator may offer ``phases()`` returning a :class:`Phases` of its own
(waiting for validation on the interpreter, emitting, compiling, checking and timing on a
GPU, or modelling). The engine reads the evaluator's at the start and the end of a search and
keeps the difference, so an evaluator shared by several searches gives each its own share.

Seconds spent in worker processes that run side by side (a pool of GPU workers) overlap each
other and the wall clock: ``overlapping`` says so, and then the phases add up to more than
the wall time. ``process_cpu_s`` is the CPU time of the search's own process (all its
threads) over the search: near the wall time, that process — which breeds, applies and
fingerprints every candidate — is what bounds the search, not its workers (on the H200 an
attention search's took 48 ms a candidate while its workers took the cores, BENCHMARKS.md
round 22). A user reads the one-line summary (:func:`time_line`) after ``kir compile
--search`` and the table (:func:`phase_table`) in the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

APPLY = "apply"
DATABASE = "database"
EVALUATIONS = "evaluations"


@dataclass(frozen=True)
class Phases:
    """Seconds by phase (in the order a candidate goes through them), counts of what is worth
    counting (source duplicates, timings cut short), and whether the seconds overlap."""

    seconds: Mapping[str, float] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    overlapping: bool = False
    process_cpu_s: float = 0.0

    def __add__(self, other: Phases) -> Phases:
        seconds = dict(self.seconds)
        for name, value in other.seconds.items():
            seconds[name] = seconds.get(name, 0.0) + value
        counts = dict(self.counts)
        for name, value in other.counts.items():
            counts[name] = counts.get(name, 0) + value
        return Phases(seconds, counts, self.overlapping or other.overlapping,
                      self.process_cpu_s + other.process_cpu_s)

    def since(self, earlier: Phases) -> Phases:
        """What was added after ``earlier`` (a reading of the same evaluator)."""
        return Phases({k: v - earlier.seconds.get(k, 0.0) for k, v in self.seconds.items()},
                      {k: v - earlier.counts.get(k, 0) for k, v in self.counts.items()},
                      self.overlapping, self.process_cpu_s - earlier.process_cpu_s)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: seconds rounded to milliseconds."""
        return {"seconds": {k: round(v, 3) for k, v in self.seconds.items()},
                "counts": dict(self.counts), "overlapping": self.overlapping,
                "process_cpu_s": round(self.process_cpu_s, 3)}


def evaluator_phases(evaluator: object) -> Phases:
    """The evaluator's :class:`Phases` so far, or none when it offers no ``phases()``."""
    read = getattr(evaluator, "phases", None)
    if not callable(read):
        return Phases()
    phases = read()
    return phases if isinstance(phases, Phases) else Phases()


def rate(count: int, wall_s: float) -> str:
    """``0.90/s``."""
    return f"{count / wall_s:.2f}/s" if wall_s > 0 else "-"


def time_line(phases: Phases, wall_s: float) -> str:
    """``time: 46.8 s wall, search process 21.3 s CPU; apply 1.2 s, ..., time 6.0 s
    (worker seconds overlap); 42 evaluations, 0.90/s; 3 source duplicates``."""
    spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.seconds.items())
    if phases.overlapping:
        spent += " (worker seconds overlap)"
    evaluations = phases.counts.get(EVALUATIONS, 0)
    own = f", search process {phases.process_cpu_s:.1f} s CPU" if phases.process_cpu_s else ""
    line = f"time: {wall_s:.1f} s wall{own}; {spent}; {evaluations} evaluations, " \
           f"{rate(evaluations, wall_s)}"
    others = [f"{count} {name}" for name, count in phases.counts.items() if name != EVALUATIONS]
    return line + ("; " + ", ".join(others) if others else "")


def verdict_line(history: Sequence[Any], result_fingerprint: str | None = None) -> str | None:
    """``verdicts: first at 4.1 s; best at 38.2 s (evaluation 57 of 80); within 5% of it
    at 20.3 s (evaluation 31)`` from a search's history (records with ``at_s``, ``status``,
    ``time_ms``, ``best_ms``, ``fingerprint``); None when no record has a time. How soon a
    search gives its first answer and how soon it settles: what a user weighing ``--time``
    needs.

    "best" and "within 5%" go by the times taken during the search, beside compiles; the
    result a GPU search returns is the fastest of its finalists timed again alone
    (kir.api.finalists), often another kernel of about the same speed. With
    ``result_fingerprint`` (the result's kernel) and when that kernel is not the search's
    best, the line also says when the search first judged the result: ``; the result (the
    fastest timed again alone) first judged at 2.1 s (evaluation 12)``."""
    timed = [r for r in history if getattr(r, "at_s", None) is not None]
    if not timed:
        return None
    line = f"verdicts: first at {timed[0].at_s:.1f} s"
    final = timed[-1].best_ms
    if final is None:
        return line + "; none valid"
    best = next(r for r in timed if r.status == "ok" and r.time_ms == final)
    near = next(r for r in timed if r.best_ms is not None and r.best_ms <= final * 1.05)
    line += f"; best at {best.at_s:.1f} s (evaluation {best.index + 1} of {len(history)})"
    if near is not best:
        line += f"; within 5% of it at {near.at_s:.1f} s (evaluation {near.index + 1})"
    if result_fingerprint and result_fingerprint != best.fingerprint:
        found = next((r for r in timed if r.fingerprint == result_fingerprint), None)
        if found is not None:
            line += (f"; the result (the fastest timed again alone) first judged at "
                     f"{found.at_s:.1f} s (evaluation {found.index + 1})")
    return line


def phase_table(phases: Phases, wall_s: float) -> list[str]:
    """The same as :func:`time_line`, as a markdown table."""
    lines = ["| phase | seconds |", "| --- | --- |", f"| wall clock | {wall_s:.1f} |"]
    if phases.process_cpu_s:
        lines.append(f"| search process (CPU) | {phases.process_cpu_s:.1f} |")
    lines += [f"| {name} | {seconds:.1f} |" for name, seconds in phases.seconds.items()]
    lines += ["", "| count | |", "| --- | --- |"]
    lines += [f"| {name} | {count} |" for name, count in phases.counts.items()]
    evaluations = phases.counts.get(EVALUATIONS, 0)
    lines.append(f"| evaluations per second | {rate(evaluations, wall_s)} |")
    if phases.overlapping:
        lines += ["", "Worker processes ran side by side: their seconds overlap each other "
                      "and the wall clock, so the phases add up to more than it."]
    return lines
