"""Steps and traces: one rule application printed and parsed as ``tile-loop{loop=L2,factor=4}``
(the rule name, its site under the rule's ``site_key``, its parameters), and a list of steps
that saves to JSON and replays (:func:`apply_trace`). The search's genome is a trace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from kir.errors import KirError
from kir.ir import Kernel
from kir.rules.api import NotApplicable, Rule, RuleContext, as_rule

# ------------------------------------------------------------------------------------ steps

_STEP = re.compile(r"^\s*([a-z][a-z0-9-]*)\s*(?:\{([^{}]*)\})?\s*$")


@dataclass(frozen=True)
class Step:
    """One rule application: ``rule{site_key=site,param=value,...}``."""

    rule: str
    site: str
    params: tuple[tuple[str, int | str | bool], ...] = ()
    site_key: str = "site"

    def __str__(self) -> str:
        parts = [f"{self.site_key}={self.site}"] + [f"{k}={v}" for k, v in self.params]
        return f"{self.rule}{{{','.join(parts)}}}"

    @property
    def param_dict(self) -> dict[str, int | str | bool]:
        return dict(self.params)


def parse_step(text: str, registry: "Mapping[str, Rule]") -> Step:
    """Parse ``tile-loop{loop=L2,factor=4}`` against the registry (unknown rules, sites keys
    and parameter values are KirErrors)."""
    match = _STEP.match(text)
    if not match:
        raise KirError(f"malformed step {text!r}",
                       hint="write RULE{SITEKEY=SITE,PARAM=VALUE}, "
                            "e.g. tile-loop{loop=L2,factor=4}")
    name, body = match.group(1), match.group(2) or ""
    rule = registry.get(name)
    if rule is None:
        raise KirError(f"unknown rule {name!r} in step {text!r}", hint="`kir rules` lists them")
    items: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in body.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise KirError(f"malformed step {text!r}: {part!r} is not KEY=VALUE")
        items[key.strip()] = value.strip()
    site = items.pop(rule.site_key, None)
    if site is None:
        raise KirError(f"step {text!r} names no site", hint=f"add {rule.site_key}=...")
    spaces = {p.name: p for p in rule.params}
    unknown = set(items) - set(spaces)
    if unknown:
        raise KirError(f"rule {name} has no parameter {sorted(unknown)[0]!r}",
                       hint=f"its parameters: {', '.join(spaces) or 'none'}")
    params = tuple((p.name, p.parse(items[p.name]) if p.name in items else p.choices[0])
                   for p in rule.params)
    return Step(name, site, params, rule.site_key)


# ----------------------------------------------------------------------------------- traces


@dataclass(frozen=True)
class Applied:
    """The outcome of replaying a trace: the final kernel, the steps that changed it, and the
    steps skipped with their reasons."""

    kernel: Kernel
    applied: tuple[Step, ...]
    skipped: tuple[tuple[Step, str], ...]
    kernels: tuple[Kernel, ...] = ()  # the kernel after each applied step


def apply_step(kernel: Kernel, step: Step, registry: "Mapping[str, Rule]",
               ctx: RuleContext) -> Kernel | NotApplicable:
    """Apply one step: match the rule at the step's site only (its legality analysis runs
    once, and its plan goes to ``apply``); a site the kernel no longer has, or where the rule
    is not legal, is NotApplicable, not an error."""
    rule = as_rule(registry.get(step.rule))  # a first-protocol rule works through an adapter
    if rule is None:
        return NotApplicable(f"unknown rule {step.rule}")
    found = rule.match_at(kernel, step.site, ctx)
    if isinstance(found, NotApplicable):
        return found
    return rule.apply(kernel, found, rule.make_params(step.param_dict), ctx)


def apply_trace(kernel: Kernel, steps: Sequence[Step], registry: "Mapping[str, Rule]",
                ctx: RuleContext | None = None, *, strict: bool = False) -> Applied:
    """Apply ``steps`` in order, skipping those that no longer match (or raising KirError on
    the first such step when ``strict``)."""
    ctx = ctx or RuleContext()
    applied: list[Step] = []
    skipped: list[tuple[Step, str]] = []
    kernels: list[Kernel] = []
    for step in steps:
        result = apply_step(kernel, step, registry, ctx)
        if isinstance(result, NotApplicable):
            if strict:
                raise KirError(f"step {step} does not apply: {result.reason}")
            skipped.append((step, result.reason))
            continue
        kernel = result
        applied.append(step)
        kernels.append(kernel)
    return Applied(kernel, tuple(applied), tuple(skipped), tuple(kernels))


def save_trace(steps: Sequence[Step], path: str | Path, *, kernel: Kernel | None = None,
               extra: Mapping[str, object] | None = None) -> None:
    """Write a trace as JSON: ``{"kernel": name, "fingerprint": ..., "steps": [...]}``."""
    data: dict[str, object] = {"steps": [str(s) for s in steps]}
    if kernel is not None:
        data["kernel"] = kernel.name
        data["fingerprint"] = kernel.fingerprint()
    data.update(extra or {})
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def load_trace(path: str | Path, registry: "Mapping[str, Rule]") -> list[Step]:
    """Read a trace JSON file back into steps."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise KirError(f"no such trace file: {path}") from None
    except json.JSONDecodeError as exc:
        raise KirError(f"{path}:{exc.lineno}:{exc.colno}: malformed trace JSON: "
                       f"{exc.msg}") from None
    steps = data.get("steps") if isinstance(data, dict) else data
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise KirError(f"{path}: a trace is a JSON list of step strings, or an object with "
                       "\"steps\": [...]")
    return [parse_step(s, registry) for s in steps]
