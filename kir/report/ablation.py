"""The transfer table: for each step of the winning trace, the time without it.

Taking a step out and replaying the rest (steps that no longer match are skipped, as in any
replay) shows what that piece of CUDA practice is worth on this target. These evaluations go
through the same evaluator and the same tuning database as the search, so a second report is
free and the numbers are comparable with the search's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

from kir.ir import Kernel
from kir.rules import Rule, RuleContext, Step, apply_trace
from kir.search.db import TuningDB, TuningKey
from kir.search.engine import EvalRecord
from kir.search.evaluator import Evaluation, Evaluator, Status
from kir.search.records import rule_of

NEUTRAL = 0.02  # effects within 2% are noise for a timer and meaningless for a model


@dataclass(frozen=True)
class AblationRow:
    """One winning step and the kernel without it. ``effect`` is time-without over best time
    (above 1: the step paid off); None when the kernel without it was not valid."""

    step: str
    status: str
    time_without_ms: float | None
    effect: float | None
    verdict: str
    cached: bool = False


def evaluate_cached(kernel: Kernel, genome: Sequence[Step], evaluator: Evaluator,
                    db: TuningDB | None, key: TuningKey | None) -> tuple[Evaluation, bool]:
    """The evaluation of ``kernel`` from the database when it knows it, else from the
    evaluator (then recorded). Returns it and whether it came from the database."""
    fp = kernel.fingerprint()
    if db is not None and key is not None:
        known = db.lookup(key, fp)
        if known is not None:
            return known, True
    try:
        evaluation = evaluator.evaluate(kernel)
    except Exception as exc:  # noqa: BLE001 - as in the search: a crash rejects the candidate
        evaluation = Evaluation.rejected(Status.CRASH, f"evaluating raised {type(exc).__name__}: {exc}")
    if db is not None and key is not None:
        db.record(key, fp, [str(s) for s in genome], evaluation)
    return evaluation, False


def verdict(effect: float | None, status: str) -> str:
    """paid off / neutral (<2%) / hurt, from the speed-up factor a step contributes."""
    if effect is None:
        return f"needed (without it: {status})"
    if effect > 1 + NEUTRAL:
        return "paid off"
    if effect < 1 - NEUTRAL:
        return "hurt"
    return "neutral (<2%)"


def ablate(base: Kernel, steps: Sequence[Step], best_ms: float, registry: Mapping[str, Rule],
           ctx: RuleContext, evaluator: Evaluator, db: TuningDB | None = None,
           key: TuningKey | None = None) -> list[AblationRow]:
    """For each step of the winning trace ``steps``: replay the others, evaluate, and compare
    with ``best_ms``."""
    rows = []
    for i, step in enumerate(steps):
        rest = list(steps[:i]) + list(steps[i + 1:])
        try:
            applied = apply_trace(base, rest, registry, ctx)
            evaluation, cached = evaluate_cached(applied.kernel, applied.applied, evaluator,
                                                 db, key)
        except Exception as exc:  # noqa: BLE001 - a rule's crash on replay is a finding too
            evaluation, cached = Evaluation.rejected(Status.CRASH, str(exc)), False
        effect = evaluation.time_ms / best_ms if evaluation.ok and best_ms else None
        rows.append(AblationRow(str(step), evaluation.status, evaluation.time_ms, effect,
                                verdict(effect, evaluation.status), cached))
    return rows


def rule_outcomes(history: Sequence[EvalRecord], baseline_ms: float | None,
                  winner: Sequence[str]) -> dict[str, Counter]:
    """For each rule the search tried and that is not in the winning trace: how the
    candidates holding it fared, counted by status ("slower" for valid candidates no faster
    than the unrewritten kernel, "faster" for the others)."""
    won = {rule_of(text) for text in winner}
    table: dict[str, Counter] = defaultdict(Counter)
    for record in history:
        for rule in {rule_of(text) for text in record.genome} - won:
            if record.status != "ok":
                table[rule][record.status] += 1
            elif baseline_ms is not None and record.time_ms is not None \
                    and record.time_ms < baseline_ms:
                table[rule]["faster"] += 1
            else:
                table[rule]["slower"] += 1
    return dict(sorted(table.items()))
