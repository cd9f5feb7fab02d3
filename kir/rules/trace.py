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

from kir.errors import AnalysisLimitError, KirError, Loc, source_line_of
from kir.ir import Kernel
from kir.rules.api import NotApplicable, Rule, RuleContext, as_rule
from kir.rules.guard import checked_result, failures_of, origin_of, run_guarded, ships_with_kir

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
    is not legal, is NotApplicable, not an error.

    The rule's code runs under the rule limits (:mod:`kir.rules.guard`): an exception, a
    result that is neither a kernel nor a refusal, or a run past the time limit is a
    :class:`~kir.rules.guard.RuleError` naming the rule and its file; a kernel over the IR
    size limit, or an analysis over its bound, is a refusal."""
    rule = as_rule(registry.get(step.rule))  # a first-protocol rule works through an adapter
    if rule is None:
        return NotApplicable(f"unknown rule {step.rule}")
    origin, failures = origin_of(registry, step.rule), failures_of(registry)
    doing = f"at {step}"

    def run() -> object:
        found = rule.match_at(kernel, step.site, ctx)
        if isinstance(found, NotApplicable):
            return found
        return rule.apply(kernel, found, rule.make_params(step.param_dict), ctx)
    try:
        result = run_guarded(rule, step.rule, origin, doing, run, failures)
    except AnalysisLimitError as exc:
        return NotApplicable(exc.message)
    return checked_result(result, rule, step.rule, origin, doing, failures,  # type: ignore
                          check_it=not ships_with_kir(registry, step.rule))


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


MAX_TRACE_BYTES = 4 * 1024 * 1024


def load_trace(path: str | Path, registry: "Mapping[str, Rule]") -> list[Step]:
    """Read a trace JSON file back into steps. Anything that is not one (a folder, binary,
    JSON nested past Python's recursion limit, a wrong shape) is a KirError naming the file,
    and where in it when that is known; a bad step names its place in the list."""
    path = Path(path)
    data = _read_json(path)
    steps = data.get("steps") if isinstance(data, dict) else data
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise KirError("a trace is a JSON list of step strings, or an object with "
                       "\"steps\": [...]", Loc(str(path), 1, 1),
                       hint="e.g. {\"steps\": [\"tile-loop{loop=L2,factor=4}\"]}")
    out = []
    for number, text in enumerate(steps, 1):
        try:
            out.append(parse_step(text, registry))
        except KirError as exc:
            raise KirError(f"step {number} of the trace: {exc.message}",
                           exc.loc or _step_loc(path, text), hint=exc.hint) from None
    return out


def _read_json(path: Path) -> object:
    try:
        if path.is_dir():
            raise KirError(f"{path} is a folder, not a trace file",
                           hint="name the .trace.json file (e.g. kir-out/NAME/best.trace.json)")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KirError(f"no such trace file: {path}") from None
    except OSError as exc:
        raise KirError(f"cannot read trace {path}: {exc.strerror}") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise KirError(f"trace of {len(raw)} bytes: at most {MAX_TRACE_BYTES} are read",
                       Loc(str(path), 1, 1))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise KirError(f"the trace is not UTF-8 text (byte 0x{raw[exc.start]:02x})",
                       Loc(str(path), line, col), hint="a trace is JSON text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KirError(f"malformed trace JSON: {exc.msg}", Loc(str(path), exc.lineno, exc.colno),
                       source_line=source_line_of(text, exc.lineno)) from None
    except RecursionError:
        raise KirError("the trace's JSON is nested too deeply to be a trace",
                       Loc(str(path), 1, 1)) from None


def _step_loc(path: Path, step_text: str) -> Loc:
    """Where a step string is written in its trace file (line 1 when not found)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return Loc(str(path), 1, 1)
    at = text.find(json.dumps(step_text))
    if at < 0:
        return Loc(str(path), 1, 1)
    line = text.count("\n", 0, at) + 1
    return Loc(str(path), line, at - (text.rfind("\n", 0, at) + 1) + 1)
