"""What the vectorizing rules (vectorize-access, vectorize-strided) share: a loop site, a width
parameter, an index taken apart as ``base + x``, and the one check that depends on the width.

A rule of the family proves the loop's shape once, at any width, in ``plan_vector_loop``; its
plan lists every access's base. Whether those bases are multiples of the chosen width under
the spec's scalar values is the only thing left for ``apply`` (the parameter and the context
decide it), before the rule's rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from kir import analysis
from kir.analysis.affine import Poly, difference, substitute_values
from kir.ir import For, Kernel
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


def spec_ints(scalars: Mapping[str, object], exclude: set[str] | frozenset = frozenset()
              ) -> dict[str, int]:
    """The spec's integer scalar values, but those named in ``exclude``."""
    return {k: int(v) for k, v in scalars.items()
            if isinstance(v, int) and not isinstance(v, bool) and k not in exclude}


def is_multiple(poly: Poly, width: int, values: Mapping[str, int]) -> bool:
    """Whether ``poly`` is a multiple of ``width`` once ``values`` are substituted (every
    coefficient is: the atoms left stand for any integer)."""
    return not any(coef % width for coef in substitute_values(poly, values).values())


class VectorLoopRule(LoopRule):
    """Base of the vectorizing rules: sites are loops, ``width`` the parameter.

    A subclass provides ``plan_vector_loop`` (its legality analysis, at any width),
    ``misaligned`` (why the plan's bases do not fit the chosen width under the spec's
    scalars, or None) and ``vectorize`` (the rewrite).
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

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        problem = self.misaligned(match.plan, params.width, ctx.scalars)
        if problem is not None:
            return problem
        return self.vectorize(kernel, match.plan, params.width)
