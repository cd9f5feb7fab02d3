"""The rule layer: the rule interface, steps and traces (:mod:`kir.rules.api`, re-exported
here) and the pattern language of ``.rules`` files. The built-in rules live in
:mod:`kir.rewrites`; :mod:`kir.driver.registry` gathers them with plug-ins and a user's own."""

from kir.rules.api import (  # noqa: F401 - the package's public names
    Applied,
    BaseRule,
    NotApplicable,
    ParamSpace,
    Rule,
    RuleContext,
    Step,
    apply_step,
    apply_trace,
    context_for,
    load_trace,
    parse_step,
    rule_summary,
    save_trace,
)

__all__ = [
    'ParamSpace', 'NotApplicable', 'RuleContext', 'context_for', 'Rule', 'rule_summary',
    'Step', 'parse_step', 'Applied', 'apply_step', 'apply_trace', 'save_trace', 'load_trace',
    'BaseRule',
]
