"""specialize-param: a scalar kernel argument becomes a compile-time constant."""

from __future__ import annotations

import dataclasses

import numpy as np

from kir.analysis import used_vars
from kir.ir import Const, Kernel, Node, Param, Var, transform
from kir.ir.fold import fold
from kir.ir.types import ScalarType
from kir.rules import BaseRule, Match, NoParams, NotApplicable, RuleContext


class SpecializeParam(BaseRule):
    """Replace every read of a scalar parameter with the spec's value, then fold constants.

    CUDA practice: template / ``constexpr`` specialization (``template <int D>``), which lets
    the compiler see trip counts and strides (CUDA C++ Programming Guide, "Templates"; the
    Best Practices Guide recommends compile-time loop bounds so ``#pragma unroll`` can fully
    unroll). The parameter stays in the signature (runners keep passing it) but is unused.
    Legality: exact for the specialized value; the kernel is then only valid for specs giving
    that same value, and its launch says ``specialized`` so validation checks it at those
    sizes only (a later rule may read the parameter again — coarsen-threads' run-time guard
    does — so "no longer reads it" is not a reliable sign).
    """

    name = "specialize-param"
    site_key = "param"

    def candidates(self, kernel: Kernel) -> list[str]:
        """The scalar parameters the body reads (bf16 has no exact literal)."""
        used = used_vars(kernel.body)
        return [p.name for p in kernel.params
                if isinstance(p.type, ScalarType) and p.type.name != "bf16" and p.name in used]

    def plan(self, kernel: Kernel, site: str) -> Param:
        """The parameter; whether the spec gives it a value is known only in ``apply``."""
        param = kernel.param(site)
        assert param is not None  # every candidate is a parameter
        return param

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        param, site = match.plan, match.site
        if site not in ctx.scalars:
            return NotApplicable(f"the spec gives no value for {site}")
        t = param.type
        raw = ctx.scalars[site]
        if t.name == "bool":
            value: int | float | bool = bool(raw)
        elif t.is_int:
            if float(raw) != int(raw):
                return NotApplicable(f"{site}={raw} is not an integer")
            value = int(np.asarray(int(raw) % (1 << t.bits)).astype(np.uint64).astype(
                t.numpy)[()])
        else:
            value = float(np.asarray(raw, dtype=np.float64).astype(t.numpy)[()])
        literal = Const(value, t)

        def visit(n: Node) -> Node | None:
            return literal if isinstance(n, Var) and n.name == site else None
        body = fold(transform(kernel.body, visit))
        launch = dataclasses.replace(kernel.launch, specialized=True)
        return dataclasses.replace(kernel, body=body, launch=launch)  # type: ignore[arg-type]


RULES = [SpecializeParam()]
