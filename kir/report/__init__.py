"""The search report: best-so-far curve, the winning trace with per-step IR diffs, the
transfer table (what each winning step is worth, measured by taking it out) and the rules the
search tried and rejected. Written as ``report.md`` with ``progress.svg`` (drawn without any
dependency), ``progress.csv``, and ``progress.png`` when matplotlib is installed."""

from kir.report.ablation import AblationRow, ablate, evaluate_cached, rule_outcomes
from kir.report.markdown import write_report

__all__ = ["AblationRow", "ablate", "evaluate_cached", "rule_outcomes", "write_report"]
