"""What a search tells its user when the spec's tolerance alone kept a faster kind of kernel
out: candidates built with a precision-trading rule (TF32 tensor cores, fast math) that all
failed validation on their outputs. A user with a strict default tolerance would otherwise
never learn that, say, MLX's own ``a @ b`` makes the error their spec refuses."""

from __future__ import annotations

from typing import Iterable

from kir.search.records import EvalRecord, rule_of

# Rules whose kernels differ from exact arithmetic by design; the spec's tolerance decides.
PRECISION_RULES = ("tf32-matrix", "tf32x3-matrix", "fast-math", "exp-to-exp2-fast")


def precision_refusals(history: Iterable[EvalRecord]) -> list[str]:
    """One line per precision-trading rule none of whose candidates passed and some of whose
    candidates failed only on their outputs (status "invalid"): how many, and the first
    such failure's reason."""
    lines = []
    records = list(history)
    for rule in PRECISION_RULES:
        using = [r for r in records if any(rule_of(step) == rule for step in r.genome)]
        refused = [r for r in using if r.status == "invalid"]
        if not refused or any(r.status == "ok" for r in using):
            continue
        lines.append(
            f"{len(refused)} candidate(s) using {rule} failed the spec's tolerance (first: "
            f"{refused[0].error.strip()[:160]}); {rule} trades precision for speed by design "
            "— if your program accepts that error, widen `tolerance` in the spec "
            "(docs/SPEC.md) and search again")
    return lines
