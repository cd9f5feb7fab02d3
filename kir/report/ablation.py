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
    return evaluate_all_cached([(kernel, genome)], evaluator, db, key)[0]


def evaluate_all_cached(candidates: Sequence[tuple[Kernel, Sequence[Step]]],
                        evaluator: Evaluator, db: TuningDB | None, key: TuningKey | None
                        ) -> list[tuple[Evaluation, bool]]:
    """:func:`evaluate_cached` for several (kernel, genome) pairs, in order. The ones the
    database does not know go to the evaluator together (``evaluate_many`` where it has
    it: a GPU evaluator compiles them side by side on its workers, which one at a time took
    a second or more each) and each kernel is judged once however often it appears."""
    out: list[tuple[Evaluation, bool] | None] = [None] * len(candidates)
    todo: dict[str, list[int]] = {}  # fingerprint -> positions needing the evaluator
    for i, (kernel, _) in enumerate(candidates):
        fp = kernel.fingerprint()
        known = db.lookup(key, fp) if db is not None and key is not None else None
        if known is not None:
            out[i] = (known, True)
        else:
            todo.setdefault(fp, []).append(i)
    firsts = [positions[0] for positions in todo.values()]
    verdicts = _evaluate([candidates[i][0] for i in firsts], evaluator)
    for first, evaluation in zip(firsts, verdicts):
        kernel, genome = candidates[first]
        if db is not None and key is not None:
            db.record(key, kernel.fingerprint(), [str(s) for s in genome], evaluation)
        for i in todo[kernel.fingerprint()]:
            out[i] = (evaluation, False)
    return out  # type: ignore[return-value]


def _evaluate(kernels: Sequence[Kernel], evaluator: Evaluator) -> list[Evaluation]:
    """The evaluator's verdicts on ``kernels``, in order; as in the search, an exception
    rejects that candidate only (a batch that raises is finished one at a time)."""
    verdicts: list[Evaluation] = []
    many = getattr(evaluator, "evaluate_many", None)
    if callable(many) and len(kernels) > 1:
        try:
            for evaluation in many(list(kernels)):
                verdicts.append(evaluation)
        except Exception:  # noqa: BLE001 - the rest go through evaluate, one by one
            pass
    for kernel in kernels[len(verdicts):]:
        try:
            verdicts.append(evaluator.evaluate(kernel))
        except Exception as exc:  # noqa: BLE001 - a crash rejects the candidate only
            verdicts.append(Evaluation.rejected(
                Status.CRASH, f"evaluating raised {type(exc).__name__}: {exc}"))
    return verdicts


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
    with ``best_ms``. The replays are evaluated as one batch (:func:`evaluate_all_cached`)."""
    replays: list[tuple[Kernel, Sequence[Step]] | Evaluation] = []
    for i in range(len(steps)):
        rest = list(steps[:i]) + list(steps[i + 1:])
        try:
            applied = apply_trace(base, rest, registry, ctx)
            replays.append((applied.kernel, applied.applied))
        except Exception as exc:  # noqa: BLE001 - a rule's crash on replay is a finding too
            replays.append(Evaluation.rejected(Status.CRASH, str(exc)))
    judged = iter(evaluate_all_cached([r for r in replays if not isinstance(r, Evaluation)],
                                      evaluator, db, key))
    rows = []
    for step, replay in zip(steps, replays):
        evaluation, cached = (replay, False) if isinstance(replay, Evaluation) else next(judged)
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
