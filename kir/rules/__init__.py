"""The rule layer: the rule interface (:mod:`kir.rules.api`), steps and traces
(:mod:`kir.rules.trace`), both re-exported here, and the pattern language of ``.rules`` files
(:mod:`kir.rules.pattern`). The built-in rules live in :mod:`kir.rewrites`;
:mod:`kir.driver.registry` gathers them with plug-ins and a user's own."""

from kir.rules.api import (  # noqa: F401 - the package's public names
    ANALYSES,
    BaseRule,
    LegacyRule,
    LoopRule,
    Match,
    NoParams,
    NotApplicable,
    ParamSpace,
    Rule,
    RuleContext,
    as_rule,
    choice,
    context_for,
    param_spaces,
    rule_summary,
)
from kir.rules.guard import FailureLog, RuleError, rule_sites  # noqa: F401
from kir.rules.trace import (  # noqa: F401
    Applied,
    Step,
    apply_step,
    apply_trace,
    load_trace,
    parse_step,
    save_trace,
)

__all__ = [
    "ANALYSES", "Applied", "BaseRule", "FailureLog", "LegacyRule", "LoopRule", "Match",
    "NoParams", "NotApplicable", "ParamSpace", "Rule", "RuleContext", "RuleError", "Step",
    "apply_step", "apply_trace", "as_rule", "choice", "context_for", "load_trace",
    "param_spaces", "parse_step", "rule_sites", "rule_summary", "save_trace",
]
