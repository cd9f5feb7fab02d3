"""The search report: best-so-far curve, the winning trace with per-step IR diffs, the
transfer table (what each winning step is worth, measured by taking it out) and the rules the
search tried and rejected. Written as ``report.md`` plus ``progress.png`` (or ``progress.csv``
when matplotlib is absent)."""

from kir.report.ablation import AblationRow, ablate, evaluate_cached, rule_outcomes
from kir.report.markdown import write_report

__all__ = ["AblationRow", "ablate", "evaluate_cached", "rule_outcomes", "write_report"]
