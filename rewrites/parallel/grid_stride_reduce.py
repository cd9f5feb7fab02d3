"""grid-stride-reduce: a fixed number of blocks, each summing many former blocks' values
per thread before one block combine and one atomic add."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir import analysis
from kir.errors import KirError
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Load,
    Return,
    Shuffle,
    Special,
    Stmt,
    Store,
    Var,
    WarpReduce,
    transform,
)
from kir.ir.types import BOOL, I32, U32, ScalarType
from kir.rules import BaseRule, Match, NotApplicable, RuleContext, choice
from kir.spec.sizeexpr import eval_size_expr
from kir.rewrites.parallel.block_combine import NotLinear, linear_combine
from kir.rewrites.parallel.old_grid import old_grid


@dataclass(frozen=True)
class _Split:
    """The kernel cut where each thread's own work ends: top-level arrays, the declarations
    that do not depend on the block (kept before the loop), the per-block production of
    each thread's values, the block combine after it, and the seeds (the produced scalars
    the combine reads)."""

    allocs: tuple[Alloc, ...]
    invariant: tuple[Stmt, ...]
    produce: tuple[Stmt, ...]
    combine: tuple[Stmt, ...]
    seeds: tuple[Declare, ...]


class GridStrideReduce(BaseRule):
    """Launch a fixed number of blocks; each thread sums its values over a grid-stride loop
    of the former blocks, then the block combines and adds its result once.

    CUDA practice: the two-stage reduction (Harris, "Optimizing Parallel Reduction in CUDA",
    kernel 7: "algorithm cascading" with a grid-stride loop; CUB's ``DeviceReduce`` and MLX's
    own ``sum`` launch a bounded grid): with one block per few hundred elements, a reduction
    kernel finishes with one atomic add per block on one address, and those serialize (on
    MLX's CUDA back end, whose arrays are managed memory, at about 1.5 us each: 2^24 floats
    in blocks of 512 take 47 ms). With ``blocks`` blocks the adds are ``blocks`` at most, and
    each thread's first phase becomes a loop over ``vb = block.x, block.x + blocks, ...`` below
    the old block count, accumulating what it produced in registers. The kernel

        v = in[blockIdx.x * 512 + tid] + ...;  partial[tid] = v;  <tree>;  atomicAdd(out, ..)

    becomes ``acc = 0; for (vb = blockIdx.x; vb < old_grid; vb += blocks) { v = in[vb *
    512 + tid] + ...; acc += v; }  partial[tid] = acc;  <tree>;  atomicAdd(out, ..)``.

    Legality checked: the kernel splits into a first phase (top-level statements before the
    first barrier, shared-memory access, shuffle, warp reduction, atomic or store) and the
    block combine after it; the first phase writes no memory; the combine reads the first
    phase's values (the seeds: scalar locals declared at the top level) only through a linear
    map — sums, differences, scaling by seed-independent values, shuffles, warp sums, shared
    memory — under seed-independent control flow, and its only output is ``atomic add``s to
    global buffers that nothing else reads or writes (see :mod:`.block_combine`); it does not
    use the block index; no ``return`` anywhere. Then the sum of the combine over former
    blocks equals the combine of the per-thread sums. Floating-point sums are reassociated,
    as the atomic adds already are in any order. The old block count comes from the kernel's
    scalar parameters when the grid is written over them, else from the spec's sizes (the
    kernel is then specialized, as with ``coarsen-threads``).
    """

    name = "grid-stride-reduce"
    site_key = "dim"
    once_per_site = True  # a second application has one former block per block: nothing new

    @dataclass(frozen=True)
    class Params:
        blocks: int = choice(64, 32, 128, 256, 16, 8, 512, 1024)

    def candidates(self, kernel: Kernel) -> list[str]:
        if kernel.launch.grid[0].strip() == "1" or not any(
                isinstance(n, Atomic) and n.op == "add" for n in kernel.body.walk()):
            return []
        return ["x"]

    def plan(self, kernel: Kernel, site: str) -> _Split | NotApplicable:
        try:
            return _split(kernel)
        except NotLinear as why:
            return NotApplicable(str(why))

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        split: _Split = match.plan
        old = kernel.launch.grid[0]
        try:
            count = int(eval_size_expr(old, dict(ctx.sizes)))
        except KirError as exc:
            return NotApplicable(f"grid.x = {old!r} is not known: {exc}")
        if count <= params.blocks:
            return NotApplicable(f"grid.x has {count} blocks, not more than {params.blocks}")
        loc = next((s.loc for s in split.produce if s.loc is not None), None)
        vb = analysis.fresh_name(kernel, "block_x")
        taken = {vb}
        before = old_grid(kernel, "x", count, ctx, taken, loc)
        taken |= {s.name for s in before.prelude if isinstance(s, Declare)}
        grid_size = before.value

        def virtual_block(n):
            if isinstance(n, Special) and n.axis == "x" and n.kind == "block":
                return Cast(Var(vb, I32), U32)
            if isinstance(n, Special) and n.axis == "x" and n.kind == "grid_dim":
                return grid_size
            return None

        accumulators: dict[str, str] = {}
        for seed in split.seeds:
            accumulators[seed.name] = analysis.fresh_name(kernel, f"{seed.name}_sum", taken)
            taken.add(accumulators[seed.name])
        produce = [transform(s, virtual_block) for s in split.produce]
        produce += [Assign(acc, Binary("+", Var(acc, seed.type), Var(seed.name, seed.type),
                                       seed.type), loc=seed.loc)
                    for seed in split.seeds for acc in (accumulators[seed.name],)]
        # The stride is the block count asked for, a constant (unroll-loop can then unroll
        # the loop), which is the launched grid whenever the old one is larger; when it is
        # not, each block runs its own former block only, as blocks < stride.
        # A signed counter: unroll-loop leaves unsigned loops with a run-time bound alone
        # (their remainder bound could wrap); block counts are far below 2^31.
        loop = For(analysis.next_loop_label(kernel), vb, I32, Cast(Special("block", "x"), I32),
                   Binary("<", Var(vb, I32), Cast(grid_size, I32), BOOL),
                   Binary("+", Var(vb, I32), Const(params.blocks, I32), I32),
                   Block(tuple(produce)), loc=loc)
        zeros = [Declare(acc, seed.type, Const(0.0 if seed.type.is_float else 0, seed.type),
                         loc=seed.loc)
                 for seed in split.seeds for acc in (accumulators[seed.name],)]
        combine = list(split.combine)
        for seed, acc in accumulators.items():
            combine = [analysis.rename_var(s, seed, acc) for s in combine]
        body = (*split.allocs, *split.invariant, *before.prelude, *zeros, loop, *combine)
        grid = (f"min({params.blocks}, {old})", *kernel.launch.grid[1:])
        return dataclasses.replace(
            kernel, body=Block(body, loc=kernel.body.loc),
            launch=dataclasses.replace(kernel.launch, grid=grid,
                                       specialized=kernel.launch.specialized or before.specialized))


def _split(kernel: Kernel) -> _Split:
    """Cut the kernel into its first phase and its block combine (raises NotLinear)."""
    if any(isinstance(n, Return) for n in kernel.body.walk()):
        raise NotLinear("the kernel returns early")
    allocs = tuple(s for s in kernel.body.stmts if isinstance(s, Alloc))
    rest = [s for s in kernel.body.stmts if not isinstance(s, Alloc)]
    if any(isinstance(n, Alloc) for s in rest for n in s.walk()):
        raise NotLinear("an array is declared below the top level")
    shared = {a.name for a in allocs if a.space == "shared"}
    cut = next((k for k, s in enumerate(rest) if _combines(s, shared)), len(rest))
    produce, combine = rest[:cut], rest[cut:]
    if not produce or not combine:
        raise NotLinear("no per-thread phase before the block combines")
    if any(_block_or_grid_x(n) for s in combine for n in s.walk()):
        raise NotLinear("the block combine uses the block index or grid size")
    # Names the first phase gives a value after their declaration (assignments, loop
    # variables, atomic results): such a name may differ between former blocks.
    reassigned = {n.name for s in produce for n in s.walk() if isinstance(n, Assign)} | {
        n.var for s in produce for n in s.walk() if isinstance(n, For)}
    produced = analysis.declared_names(Block(tuple(produce)))
    invariant: list[Stmt] = []
    dependent: list[Stmt] = []
    invariant_names: set[str] = set()
    for s in produce:
        if isinstance(s, Declare) and s.name not in reassigned and \
                _block_invariant(s.init, invariant_names, produced):
            invariant.append(s)
            invariant_names.add(s.name)
        else:
            dependent.append(s)
    read_later = analysis.used_vars(Block(tuple(combine)))
    declared = {s.name: s for s in dependent if isinstance(s, Declare)}
    computed = analysis.declared_names(Block(tuple(dependent)))
    seeds = []
    for name in sorted(read_later - invariant_names):
        if name in computed:
            seed = declared.get(name)
            if seed is None or not isinstance(seed.type, ScalarType) or seed.type == BOOL:
                raise NotLinear(f"the block combine reads {name}, which the first phase "
                                "computes but not as a top-level number")
            seeds.append(seed)
    if not seeds:
        raise NotLinear("the block combine reads nothing the first phase computed")
    linear_combine(kernel, combine, {s.name for s in seeds},
                   {s.name: s for s in invariant if isinstance(s, Declare)})
    return _Split(allocs, tuple(invariant), tuple(dependent), tuple(combine), tuple(seeds))


def _combines(stmt: Stmt, shared: set[str]) -> bool:
    """Whether ``stmt`` starts the block combine: it synchronizes, exchanges values between
    threads (shuffles, warp reductions, shared memory) or writes memory."""
    return any(isinstance(n, (Barrier, Shuffle, WarpReduce, Atomic, Store))
               or (isinstance(n, Load) and n.buffer in shared) for n in stmt.walk())


def _block_or_grid_x(n) -> bool:
    """``block.x`` or ``grid_dim.x``: what differs between (or counts) the former blocks."""
    return isinstance(n, Special) and n.axis == "x" and n.kind in ("block", "grid_dim")


def _block_invariant(init: Expr | None, invariant: set[str], produced: set[str]) -> bool:
    """A declaration's value that is the same for every former block: no memory read, no
    block index or grid size, only kernel parameters and earlier such values (or no value:
    a helper's result variable, given one later)."""
    if init is None:
        return True
    for n in init.walk():
        if isinstance(n, Load):
            return False
        if _block_or_grid_x(n):
            return False
        if isinstance(n, Var) and n.name in produced and n.name not in invariant:
            return False
    return True


RULES = [GridStrideReduce()]
