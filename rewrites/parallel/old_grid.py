"""The block count a kernel was launched with, for rules that launch it with fewer blocks."""

from __future__ import annotations

from dataclasses import dataclass

from kir import analysis
from kir.errors import Loc
from kir.ir import Const, Declare, Expr, Kernel, Stmt, Var
from kir.ir.types import U32
from kir.rules import RuleContext
from kir.spec.size_to_ir import grid_to_ir


@dataclass(frozen=True)
class OldGrid:
    """The old grid size along one axis as the rewritten kernel reads it: an expression
    (``value``), the declaration computing it at the top of the kernel (``prelude``), and
    whether it is only the number at the spec's sizes (``specialized``: the kernel is then
    right at those sizes only)."""

    value: Expr
    prelude: tuple[Stmt, ...]
    specialized: bool


def old_grid(kernel: Kernel, site: str, count: int, ctx: RuleContext, taken: set[str],
             loc: Loc | None) -> OldGrid:
    """Grid size ``site`` of ``kernel`` (``count`` blocks at the spec's sizes) at run time,
    from the kernel's scalar parameters (:func:`kir.spec.size_to_ir.grid_to_ir`), in a new
    variable ``grid_<site>`` (a name not in ``taken``); else the number ``count``."""
    text = kernel.launch.grid["xyz".index(site)]
    runtime = grid_to_ir(kernel, text, ctx.scalar_exprs, U32, check=ctx.sizes)
    if runtime is None or isinstance(runtime, Const):
        return OldGrid(Const(count, U32), (), runtime is None)
    name = analysis.fresh_name(kernel, f"grid_{site}", taken)
    return OldGrid(Var(name, U32), (Declare(name, U32, runtime, loc=loc),), False)
