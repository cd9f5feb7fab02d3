"""The rewrite-rule interface, steps and traces.

A rule is a CUDA optimization pattern over kir IR. It names the places it can act
(``sites``: loop labels, buffer names, parameter names, occurrence numbers), declares a
typed parameter space, and ``apply`` returns a new kernel or :class:`NotApplicable` with the
reason. Rules never mutate their input (IR nodes are immutable anyway) and are deterministic.

A *step* is one application, printed and parsed as ``tile-loop{loop=L2,factor=4}``: the rule
name, then its site under the rule's ``site_key`` and its parameters. A *trace* is a list of
steps; it saves to JSON and replays (:func:`apply_trace`). The search's genome is a trace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol, Sequence, runtime_checkable

from kir.errors import KirError
from kir.ir import Kernel
from kir.target import Target


@dataclass(frozen=True)
class ParamSpace:
    """A rule parameter and the values the search may give it (the first is the default)."""

    name: str
    choices: tuple[int | str | bool, ...]

    def parse(self, text: str) -> int | str | bool:
        """Parse a value written in a step string, checking it is one of the choices."""
        for choice in self.choices:
            if str(choice).lower() == text.lower():
                return choice
        allowed = ", ".join(str(c) for c in self.choices)
        raise KirError(f"bad value {text!r} for parameter {self.name!r}",
                       hint=f"choose one of {allowed}")


@dataclass(frozen=True)
class NotApplicable:
    """Why a rule did not apply at a site (a value, not an exception: the search expects it)."""

    reason: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class RuleContext:
    """What a rule may know besides the kernel: the spec's bound sizes and scalar argument
    values (for specialization), and the target it is rewriting for."""

    sizes: Mapping[str, int] = field(default_factory=dict)
    scalars: Mapping[str, int | float] = field(default_factory=dict)
    target: Target | None = None  # a kir.backends.TARGETS entry; None: any target
    # The spec's expression for each scalar argument (``Tr = "ceil(N / T)"``): a rule that
    # turns a loop bound into a grid size writes the expression, so the kernel stays valid
    # at other sizes instead of being specialized to ``scalars``.
    scalar_exprs: Mapping[str, str] = field(default_factory=dict)


def context_for(loaded, target: Target | None = None) -> "RuleContext":
    """The rule context for a loaded kernel (a :class:`kir.driver.load.Loaded`): its bound sizes,
    scalar values and their expressions, and the target (a :class:`kir.target.Target` from
    :data:`kir.backends.TARGETS`). ``kir apply``, ``kir compile`` and the search all use it, so
    a saved trace replays to the same kernel."""
    bound = loaded.bound
    if bound is None:
        return RuleContext(target=target)
    args = bound.spec.args
    scalars = {n: bound.scalar(n) for n, a in args.items() if a.is_scalar}
    exprs = {n: a.value for n, a in args.items() if a.is_scalar and a.value}
    return RuleContext(sizes=dict(bound.sizes), scalars=scalars, target=target,
                       scalar_exprs=exprs)


@runtime_checkable
class Rule(Protocol):
    """What every rule provides. ``name`` is a kebab-case verb; the class docstring names the
    CUDA practice the rule encodes and its source."""

    name: str
    site_key: str
    params: tuple[ParamSpace, ...]

    @property
    def summary(self) -> str: ...

    def sites(self, kernel: Kernel) -> list[str]: ...

    def apply(self, kernel: Kernel, site: str, params: Mapping[str, object],
              ctx: RuleContext) -> Kernel | NotApplicable: ...


def rule_summary(rule: object) -> str:
    """The first line of a rule's docstring."""
    doc = (type(rule).__doc__ or getattr(rule, "doc", "") or "").strip()
    return doc.splitlines()[0] if doc else ""


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
    """Apply one step; a site the kernel no longer has is NotApplicable, not an error."""
    rule = registry.get(step.rule)
    if rule is None:
        return NotApplicable(f"unknown rule {step.rule}")
    if step.site not in rule.sites(kernel):
        return NotApplicable(f"no site {step.site_key}={step.site}")
    return rule.apply(kernel, step.site, step.param_dict, ctx)


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


class BaseRule:
    """Convenience base for Python rules: class attributes ``name``, ``site_key`` and
    ``params``; ``summary`` from the docstring. Subclasses implement ``sites`` and ``apply``."""

    name: str = ""
    site_key: str = "loop"
    params: tuple[ParamSpace, ...] = ()

    @property
    def summary(self) -> str:
        return rule_summary(self)

    def sites(self, kernel: Kernel) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, kernel: Kernel, site: str, params: Mapping[str, object],
              ctx: RuleContext) -> Kernel | NotApplicable:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<rule {self.name}>"
