"""retile: choose a tile size of the kernel (a template parameter or a launch size the spec
names) as part of the search, like a Triton config."""

from __future__ import annotations

from dataclasses import dataclass

from kir.errors import KirError
from kir.ir import Kernel
from kir.ir.verify import verify
from kir.rules import BaseRule, Match, NotApplicable, RuleContext, choice

MAX_THREADS = 1024  # threads per block on every GPU kir targets


class Retile(BaseRule):
    """Lower the kernel again with another value for one of its tile sizes.

    CUDA practice: the block tile (TILE x TILE threads and shared tiles) of a tiled kernel is
    chosen per GPU and problem size (CUDA Best Practices Guide, "Execution Configuration";
    Triton's ``triton.Config`` autotuning, CUTLASS's tile shapes): a 16 x 16 tile that suits
    one GPU leaves another's shared memory and registers idle. The sites are the spec sizes
    that shape only the launch's threads, its shared memory or a template (never a buffer's
    shape or a scalar argument's value, so the problem stays the same); the kernel is lowered
    again from its CUDA source with the new value, and the launch grid is written with it.

    A re-tile replaces the whole kernel, so it must be a trace's first step (it is refused on
    a kernel other rules have already changed); the rules after it tune the re-tiled kernel.
    Legality: the new kernel is what the user's own source computes with that tile size; the
    target's limits (threads, shared memory) are checked here and every candidate is
    validated against the reference anyway.
    """

    name = "retile"
    site_key = "size"

    @dataclass(frozen=True)
    class Params:
        value: int = choice(32, 16, 8, 64, 128)

    def candidates(self, kernel: Kernel) -> list[str]:
        return []

    def candidates_in(self, kernel: Kernel, ctx: RuleContext | None) -> list[str]:
        if ctx is None or ctx.retiled is None or ctx.base is None:
            return []
        if kernel is not ctx.base and kernel != ctx.base:
            return []  # only the unrewritten kernel is re-tiled
        return list(ctx.tile_sizes)

    def plan_in(self, kernel: Kernel, site: str, ctx: RuleContext | None):
        return ctx.tile_sizes[site]

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        if params.value == match.plan:
            return NotApplicable(f"{match.site} is {params.value} already")
        try:
            new = ctx.retiled({match.site: params.value})
            verify(new, ctx.target)
        except KirError as exc:
            return NotApplicable(f"{match.site}={params.value}: {exc.message}")
        if new.launch.threads_per_block > MAX_THREADS:  # no target given: any GPU's limit
            return NotApplicable(f"{match.site}={params.value} makes a block of "
                                 f"{new.launch.threads_per_block} threads")
        return new


RULES = [Retile()]
