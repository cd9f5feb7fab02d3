"""Rule tests as text files, in the style of LLVM's and xDSL's FileCheck: IR in, IR out.

A case file holds sections separated by a ``# -----`` line. Each section is::

    # RUN: tile-loop{loop=L1,factor=4}          (one or more steps, applied in order)
    # EQUIV: x[64] y[64] n=60                    (optional: also compare on the interpreter)
    kernel @t(...) grid=(...) block=(...) shared_bytes=0 {
      ...                                        (the input kernel as kir IR text, or
    }                                             # SOURCE: FILE.cu to load a CUDA file with
                                                  its spec, relative to the case file)
    # CHECK:      for L1 i_tile: i32 = 0; i_tile < 16; i_tile = i_tile + 4 {
    # CHECK-NEXT:   for L2 i: i32 = i_tile; i < i_tile + 4; i = i + 1 {
    # CHECK-NOT:  min(

or, for a step that must be refused, a ``# REFUSE: <part of the reason>`` line instead of the
CHECK lines. CHECK patterns are matched against the printed result (without source
locations): CHECK finds its text on a line after the previous match, CHECK-NEXT on the very
next line, CHECK-NOT forbids its text between the previous match and the next one (or the
end). ``{{regex}}`` inside a pattern is a regular expression; the rest is literal.

EQUIV runs the input and the result on the interpreter with the same random inputs (buffers
of the given element counts, scalars of the given values) and compares every buffer, within
``rtol=1e-4 atol=1e-5`` unless the line gives its own (a rule that trades precision, such as
``tf32-matrix``: ``# EQUIV: A[256] C[64] rtol=1e-2 atol=2e-2``).
``# SCALARS: n=60`` gives the rules the values a spec would bind to scalar arguments
(:attr:`kir.rules.RuleContext.scalars`): specialize-param needs one, and dependence tests
use them as facts.

:func:`run_case_file` checks a whole file against a registry; ``kir rules test FILE.kir`` and
kir's own ``tests/rules/test_cases.py`` both use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

import numpy as np

from kir.errors import KirError, Loc
from kir.ir import Kernel
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, Rule, RuleContext, apply_step, parse_step

SEPARATOR = re.compile(r"^#\s*-{3,}\s*$")
DIRECTIVE = re.compile(
    r"^#\s*(RUN|CHECK|CHECK-NEXT|CHECK-NOT|REFUSE|EQUIV|SCALARS|SOURCE):\s?(.*)$")


@dataclass
class Case:
    """One section of a case file."""

    file: str
    line: int  # where the section starts (1-based)
    steps: list[tuple[int, str]] = field(default_factory=list)  # (line, step text)
    checks: list[tuple[int, str, str]] = field(default_factory=list)  # (line, kind, pattern)
    refuse: tuple[int, str] | None = None
    equiv: tuple[int, str] | None = None
    scalars: tuple[int, str] | None = None  # (line, "n=60 a=0.5"): the rules' RuleContext
    source: str | None = None  # a CUDA file (with its spec) instead of inline IR
    ir_lines: list[str] = field(default_factory=list)
    ir_start: int = 0

    @property
    def label(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


@dataclass(frozen=True)
class Outcome:
    """A case's verdict: ``ok``, or the first failure with the line it is about."""

    case: Case
    ok: bool
    message: str = ""
    line: int = 0

    def __str__(self) -> str:
        where = f"{self.case.file}:{self.line or self.case.line}"
        return f"{where}: {'ok' if self.ok else 'FAILED: ' + self.message}"


def parse_cases(text: str, file: str = "<cases>") -> list[Case]:
    """Split a case file into sections; a section without RUN lines is an error."""
    cases: list[Case] = []
    current = Case(file, 1)
    for number, line in enumerate(text.splitlines(), start=1):
        if SEPARATOR.match(line):
            cases.append(current)
            current = Case(file, number + 1)
            continue
        found = DIRECTIVE.match(line.strip())
        if found:
            kind, body = found.group(1), found.group(2).strip()
            if kind == "RUN":
                current.steps.append((number, body))
            elif kind == "REFUSE":
                current.refuse = (number, body)
            elif kind == "EQUIV":
                current.equiv = (number, body)
            elif kind == "SCALARS":
                current.scalars = (number, body)
            elif kind == "SOURCE":
                current.source = body
            else:
                current.checks.append((number, kind, body))
        elif line.lstrip().startswith("#") and not current.ir_lines:
            continue  # a comment before the kernel
        else:
            if not current.ir_lines:
                current.ir_start = number
            current.ir_lines.append(line)
    cases.append(current)
    cases = [c for c in cases if c.steps or c.ir_lines or c.checks or c.refuse]
    for case in cases:
        if not case.steps:
            raise KirError("a case needs at least one `# RUN: rule{...}` line",
                           Loc(file, case.line, 1))
        if not any(line.strip() for line in case.ir_lines) and not case.source:
            raise KirError("a case needs an input kernel (kir IR text, or # SOURCE: FILE.cu)",
                           Loc(file, case.line, 1))
        if case.refuse and case.checks:
            raise KirError("a case either REFUSEs or CHECKs, not both",
                           Loc(file, case.refuse[0], 1))
        if not case.refuse and not case.checks:
            raise KirError("a case needs CHECK lines or a REFUSE line", Loc(file, case.line, 1))
    return cases


def _pattern(text: str) -> re.Pattern[str]:
    parts = re.split(r"\{\{(.*?)\}\}", text)
    return re.compile("".join(p if i % 2 else re.escape(p) for i, p in enumerate(parts)))


def match_checks(output: str, checks: list[tuple[int, str, str]]) -> tuple[str, int] | None:
    """Match CHECK / CHECK-NEXT / CHECK-NOT lines against ``output``; None when all hold,
    else (what failed, the check's line)."""
    lines = output.splitlines()
    position = -1  # index of the line the previous positive check matched
    pending_not: list[tuple[int, str]] = []
    for number, kind, pattern in checks:
        regex = _pattern(pattern)
        if kind == "CHECK-NOT":
            pending_not.append((number, pattern))
            continue
        if kind == "CHECK-NEXT":
            found = position + 1 if position + 1 < len(lines) and \
                regex.search(lines[position + 1]) else None
            if found is None:
                got = lines[position + 1] if position + 1 < len(lines) else "(end of output)"
                return f"CHECK-NEXT: {pattern!r} is not on the next line (it is {got!r})", number
        else:
            found = next((i for i in range(position + 1, len(lines))
                          if regex.search(lines[i])), None)
            if found is None:
                return f"CHECK: {pattern!r} not found after line {position + 1} of the " \
                       "output", number
        for not_line, not_pattern in pending_not:
            hit = next((i for i in range(position + 1, found)
                        if _pattern(not_pattern).search(lines[i])), None)
            if hit is not None:
                return f"CHECK-NOT: {not_pattern!r} found at output line {hit + 1}: " \
                       f"{lines[hit]!r}", not_line
        pending_not = []
        position = found
    for not_line, not_pattern in pending_not:
        hit = next((i for i in range(position + 1, len(lines))
                    if _pattern(not_pattern).search(lines[i])), None)
        if hit is not None:
            return f"CHECK-NOT: {not_pattern!r} found at output line {hit + 1}: " \
                   f"{lines[hit]!r}", not_line
    return None


def run_case(case: Case, registry: Mapping[str, Rule],
             ctx: RuleContext | None = None) -> Outcome:
    """Apply the case's steps to its kernel and check the result (or the refusal)."""
    if case.source:
        from kir.driver.load import load_kernel
        from kir.rules import context_for

        loaded = load_kernel(Path(case.file).parent / case.source)
        kernel, ctx = loaded.kernel, ctx or context_for(loaded)
    else:
        text = "\n".join([""] * (case.ir_start - 1) + case.ir_lines) + "\n"
        kernel = parse_kernel(text, case.file, locate_unmarked=True)
    ctx = ctx or RuleContext()
    if case.scalars is not None:
        try:
            values = dict(_scalar_item(word) for word in case.scalars[1].split())
        except KirError as exc:
            return Outcome(case, False, exc.message, case.scalars[0])
        ctx = replace(ctx, scalars={**ctx.scalars, **values})
    original = kernel
    for number, step_text in case.steps:
        try:
            step = parse_step(step_text, registry)
        except KirError as exc:
            return Outcome(case, False, exc.message, number)
        try:
            result = apply_step(kernel, step, registry, ctx)
        except KirError as exc:  # the rule's own failure (kir.rules.RuleError): this case's
            return Outcome(case, False, str(exc), number)
        if isinstance(result, NotApplicable):
            if case.refuse is not None and number == case.steps[-1][0]:
                wanted = case.refuse[1]
                if wanted.lower() in result.reason.lower():
                    return Outcome(case, True)
                return Outcome(case, False, f"refused with {result.reason!r}, not with "
                                            f"{wanted!r}", case.refuse[0])
            return Outcome(case, False, f"step {step} was refused: {result.reason}", number)
        kernel = result
    if case.refuse is not None:
        return Outcome(case, False, "the last step applied, but the case expects it refused",
                       case.refuse[0])
    failure = match_checks(print_kernel(kernel, locations=False), case.checks)
    if failure is not None:
        return Outcome(case, False, failure[0] + "\n--- output ---\n"
                       + print_kernel(kernel, locations=False), failure[1])
    if case.equiv is not None:
        try:
            problem = equivalent(original, kernel, case.equiv[1])
        except KirError as exc:  # a malformed EQUIV line: reported at it
            problem = exc.message
        if problem:
            return Outcome(case, False, problem, case.equiv[0])
    return Outcome(case, True)


def equivalent(before: Kernel, after: Kernel, spec: str, seeds: tuple[int, ...] = (0, 1)) -> str:
    """Run both kernels on the interpreter with the same inputs (``x[64] y[64] n=60``: buffer
    element counts and scalar values) and compare every buffer; "" when they agree."""
    from kir.interp import run_kernel

    items = dict(_equiv_item(word) for word in spec.split())
    rtol, atol = float(items.pop("rtol", 1e-4)), float(items.pop("atol", 1e-5))
    for seed in seeds:
        rng = np.random.default_rng(seed)
        args: dict = {}
        for param in before.params:
            if param.name not in items:
                return f"EQUIV gives no value for parameter {param.name!r}"
            value = items[param.name]
            if param.is_buffer:
                dtype = param.type.elem.numpy if hasattr(param.type.elem, "numpy") \
                    else param.type.elem.elem.numpy
                args[param.name] = rng.uniform(-1, 1, size=value).astype(dtype) \
                    if np.issubdtype(dtype, np.floating) else \
                    rng.integers(0, 8, size=value).astype(dtype)
            else:
                args[param.name] = value
        want = run_kernel(before, dict(args))
        got = run_kernel(after, dict(args))
        for name, array in want.items():
            if not np.allclose(got[name], array, rtol=rtol, atol=atol, equal_nan=True):
                return f"EQUIV: buffer {name!r} differs after the steps (seed {seed})"
    return ""


def _equiv_item(word: str) -> tuple[str, int | float]:
    found = re.fullmatch(r"(\w+)\[(\d+)\]", word)
    if found:
        return found.group(1), int(found.group(2))
    name, sep, value = word.partition("=")
    if not sep:
        raise KirError(f"EQUIV item {word!r}: write NAME[COUNT] for a buffer, NAME=VALUE for "
                       "a scalar")
    try:
        return name, float(value) if "." in value or "e" in value else int(value)
    except ValueError:
        raise KirError(f"EQUIV item {word!r}: {value!r} is not a number") from None


def _scalar_item(word: str) -> tuple[str, int | float]:
    name, sep, value = word.partition("=")
    if not sep or not name.isidentifier():
        raise KirError(f"SCALARS item {word!r}: write NAME=VALUE")
    try:
        return _equiv_item(word)
    except KirError:
        raise KirError(f"SCALARS item {word!r}: {value!r} is not a number") from None


def run_case_file(path: str | Path, registry: Mapping[str, Rule]) -> list[Outcome]:
    """Every case of the file at ``path``, checked."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise KirError(f"cannot read case file {path}: {exc}") from None
    return [run_case(case, registry) for case in parse_cases(text, str(path))]
