"""tile-loop: strip-mine a counted loop into tiles of ``factor`` iterations."""

from __future__ import annotations

from dataclasses import dataclass

from kir.analysis import canonical, constant_trip_count, replace_loop
from kir.analysis.loop_edits import Namer
from kir.ir import Binary, Block, Call, Const, For, Kernel, Var
from kir.ir.types import BOOL
from kir.rules import LoopRule, Match, NotApplicable, RuleContext, choice


class TileLoop(LoopRule):
    """Strip-mine ``for i in [a, b) step s`` into tiles of ``factor`` iterations.

    CUDA practice: loop tiling / strip-mining, the first step of register and shared-memory
    blocking (Best Practices Guide, "Shared memory" tiled matrix multiply; Volkov & Demmel
    2008): ``for ii in [a, b) step s*f: for i in [ii, min(ii + s*f, b)) step s``. The outer
    (tile) loop keeps the label; the inner (point) loop gets a fresh one and stays counted,
    so it can be unrolled next. When the trip count is a known multiple of the factor the
    ``min`` is dropped. Legality: the order of iterations is unchanged, so it is always legal
    for canonical loops (constant positive step, bound not written in the body); overflow of
    ``ii + s*f`` past the type's maximum is not checked.
    """

    name = "tile-loop"

    @dataclass(frozen=True)
    class Params:
        factor: int = choice(8, 4, 16, 32)

    def plan_loop(self, kernel: Kernel, loop: For):
        c = canonical(loop)
        if c is None:
            return NotApplicable(f"{loop.label} is not a counted loop (v = a; v < b; v += const)")
        return c

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        c, site, factor = match.plan, match.site, params.factor
        loop = c.loop
        trips = constant_trip_count(loop)
        if trips is not None and trips <= factor:
            return NotApplicable(f"{site} runs {trips} iterations: no more than one tile")
        t = loop.type
        namer = Namer(kernel)
        outer_var = namer.name(f"{loop.var}_tile")
        ov = Var(outer_var, t)
        width = Const(c.step * factor, t)
        tile_end = Binary("+", ov, width, t)
        if trips is not None and trips % factor == 0:
            bound = tile_end
            op = "<"
        elif c.inclusive:
            bound = Call("min", (Binary("-", tile_end, Const(1, t), t), c.stop), t)
            op = "<="
        else:
            bound = Call("min", (tile_end, c.stop), t)
            op = "<"
        inner = For(namer.label(), loop.var, t, ov,
                    Binary(op, Var(loop.var, t), bound, BOOL), loop.update, loop.body,
                    loop.kind, loop.unroll, loop.loc)
        outer = For(loop.label, outer_var, t, c.start,
                    Binary(loop.cond.op, ov, c.stop, BOOL),  # type: ignore[attr-defined]
                    Binary("+", ov, width, t), Block((inner,), loop.body.loc),
                    loc=loop.loc)
        return replace_loop(kernel, site, outer)


RULES = [TileLoop()]
