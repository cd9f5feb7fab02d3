"""What the vectorizing rules (vectorize-access, vectorize-strided, vectorize-loads) share: a
loop site, a width parameter, an index taken apart as ``base + x``, and the one check that
depends on the width.

A rule of the family proves the loop's shape once, at any width, in ``plan_vector_loop``; its
plan lists every access's base. Whether those bases are multiples of the chosen width under
the spec's scalar values is the only thing left for ``apply`` (the parameter and the context
decide it, in ``fitted``), before the rule's rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from kir import analysis
from kir.analysis.affine import Poly, difference, substitute_values
from kir.ir import Binary, Const, Expr, For, Kernel, Select
from kir.ir.fold import fold_expr
from kir.ir.types import BOOL
from kir.rules import LoopRule, Match, NotApplicable, RuleContext, choice


def base_of(poly: Poly | None, var: str) -> Poly | None:
    """The base of an index ``base + var`` given as a polynomial (the polynomial without
    ``var``), or None when the index is not of that form."""
    if poly is None or poly.get((var,)) != 1:
        return None
    base = difference(poly, {(var,): 1})
    if any(var in mono for mono in base):
        return None
    return base


def unit_loop_problem(loop: For) -> NotApplicable | None:
    """Why ``loop`` is not ``for x = 0; x < n; x = x + 1`` with an i32 counter and a bound the
    body does not write (the element loops vectorize-access and vectorize-loads take), or
    None."""
    c = analysis.canonical(loop)
    if c is None or c.step != 1 or c.inclusive or c.start != Const(0, loop.type):
        return NotApplicable(f"{loop.label} is not `for x = 0; x < n; x = x + 1`")
    if loop.type.name != "i32":
        return NotApplicable("the loop counter is not i32")
    return None


def spec_ints(scalars: Mapping[str, object], exclude: set[str] | frozenset = frozenset()
              ) -> dict[str, int]:
    """The spec's integer scalar values, but those named in ``exclude``."""
    return {k: int(v) for k, v in scalars.items()
            if isinstance(v, int) and not isinstance(v, bool) and k not in exclude}


def is_multiple(poly: Poly, width: int, values: Mapping[str, int]) -> bool:
    """Whether ``poly`` is a multiple of ``width`` once ``values`` are substituted (every
    coefficient is: the atoms left stand for any integer)."""
    return not any(coef % width for coef in substitute_values(poly, values).values())


def may_be_multiple(poly: Poly, width: int, values: Mapping[str, int]) -> bool:
    """Whether ``poly`` can be a multiple of ``width`` once ``values`` are substituted: it
    is one, or each term left over that is not a multiple holds a value kir cannot know
    here (a row's start computed through casts, ``i32(u64(row) * u64(cols))``; a scalar
    the spec does not give), which only a run-time check can decide. A term of hardware
    indices alone (``%thread.x * 30``) decides it: some threads would be misaligned."""
    left = substitute_values(poly, values)
    if is_multiple(poly, width, values):
        return True
    odd = [mono for mono, coef in left.items() if coef % width]
    return all(any(not atom.startswith("%") for atom in mono) for mono in odd)


def vector_start(index: Expr, var: str) -> Expr:
    """Where an access ``index`` = base + ``var`` starts: the index at ``var`` = 0, folded."""
    return fold_expr(analysis.substitute(index, var, Const(0, index.type)))


def runtime_alignment(accesses, var: str, width: int) -> Expr | None:
    """The condition, checked once before the vector loop, that every access whose base is
    a multiple of ``width`` only at the spec's values (``x[row * cols + c]``: cols = 8192 is,
    8190 is not) is aligned at run time: ``(index with var = 0) % width == 0`` for each;
    None when every base is a multiple whatever the scalars. Without it the kernel would be
    right only at the spec's sizes, and a caller at others would load misaligned vectors."""
    checks: list[Expr] = []
    seen: set[Expr] = set()
    for _buffer, index, base in accesses:
        if is_multiple(base, width, {}):
            continue
        start = vector_start(index, var)
        if start in seen:
            continue
        seen.add(start)
        t = index.type
        checks.append(Binary("==", Binary("%", start, Const(width, t), t), Const(0, t), BOOL))
    return all_of(checks)


def all_of(conditions: Sequence[Expr]) -> Expr | None:
    """``conditions`` joined by ``&&`` in order (the vector loops' run-time checks); None
    when there are none."""
    if not conditions:
        return None
    cond = conditions[0]
    for more in conditions[1:]:
        cond = Binary("&&", cond, more, BOOL)
    return cond


def vector_end(covered: Expr, aligned: Expr | None) -> Expr:
    """Where the vector loop stops: ``covered`` (a multiple of the width), or 0 when the
    run-time alignment check fails, so the scalar remainder loop does all the work."""
    if aligned is None:
        return covered
    return Select(aligned, covered, Const(0, covered.type), covered.type)


class VectorLoopRule(LoopRule):
    """Base of the vectorizing rules: sites are loops, ``width`` the parameter.

    A subclass provides ``plan_vector_loop`` (its legality analysis, at any width),
    ``misaligned`` (why the plan's bases do not fit the chosen width under the spec's
    scalars, or None) and ``vectorize`` (the rewrite). A rule that vectorizes only the
    accesses that fit overrides ``fitted`` instead of ``misaligned``.
    """

    @dataclass(frozen=True)
    class Params:
        width: int = choice(4, 2)

    def plan_loop(self, kernel: Kernel, loop: For) -> Any:
        if analysis.has_matrix_stmts(loop.body):
            return NotApplicable(f"{loop.label} holds matrix-tile statements")
        return self.plan_vector_loop(kernel, loop)

    def plan_vector_loop(self, kernel: Kernel, loop: For) -> Any:  # pragma: no cover
        raise NotImplementedError

    def misaligned(self, plan: Any, width: int,
                   scalars: Mapping[str, int | float]) -> NotApplicable | None:
        raise NotImplementedError  # pragma: no cover - abstract

    def vectorize(self, kernel: Kernel, plan: Any, width: int) -> Kernel:  # pragma: no cover
        raise NotImplementedError

    def fitted(self, plan: Any, width: int, scalars: Mapping[str, int | float]) -> Any:
        """The plan the rewrite at ``width`` follows under the spec's scalars, or why there
        is none: the plan itself when ``misaligned`` finds nothing wrong."""
        problem = self.misaligned(plan, width, scalars)
        return plan if problem is None else problem

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        plan = self.fitted(match.plan, params.width, ctx.scalars)
        if isinstance(plan, NotApplicable):
            return plan
        return self.vectorize(kernel, plan, params.width)
