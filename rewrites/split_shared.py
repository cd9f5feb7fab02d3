"""split-shared: carve a dynamic ``extern __shared__`` array into separate static tiles."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from kir import analysis
from kir.analysis import single_defs
from kir.analysis.bounds import interval, loop_env
from kir.analysis.parallel import eval_int
from kir.ir import (
    Alloc,
    Atomic,
    Binary,
    Block,
    Const,
    Declare,
    Expr,
    Kernel,
    Load,
    Node,
    Store,
    Var,
    transform,
)
from kir.ir.types import VectorType
from kir.rules import BaseRule, Match, NoParams, NotApplicable, RuleContext


class SplitShared(BaseRule):
    """Split a dynamic shared array carved by constant offsets into one static array per tile.

    CUDA practice: kernels that size their shared memory at launch declare one
    ``extern __shared__ float sram[]`` and carve tiles out of it by pointer offsets
    (FlashAttention-1's ``Qi = sram``, ``Kj = sram + tile``, ``Vj = sram + 2 * tile``,
    ``S = sram + 3 * tile``; CUDA C++ Programming Guide, "Shared Memory" / ``extern`` arrays).
    Separate ``__shared__`` arrays (Metal ``threadgroup`` arrays) say the same thing with
    sizes the compiler and the tile rules (pad-shared, transpose-shared, double-buffer) can
    see. In kir the tile pointers are integer offset locals, every access ``sram[off + rest]``.

    Legality checked: every access of the array is ``sram[off + rest]`` with ``off`` a local
    defined once whose value is a constant under the spec's scalars; tiles run from one
    offset to the next (the last to the end of the array); every ``rest`` is proved, by
    interval arithmetic over loop bounds, thread indices and the spec's values, to stay in
    its tile (vector accesses included). The new sizes hold for the spec's sizes the rule
    was applied with (the kernel is specialized to them, as a search does per size set).
    """

    name = "split-shared"
    site_key = "buffer"

    def candidates(self, kernel: Kernel) -> list[str]:
        return [n.name for n in kernel.body.walk()
                if isinstance(n, Alloc) and n.space == "shared" and n.dynamic]

    def plan(self, kernel: Kernel, site: str) -> _Plan:
        alloc = next(n for n in kernel.body.walk() if isinstance(n, Alloc)
                     and n.name == site and n.space == "shared" and n.dynamic)
        defs = single_defs(kernel)
        accesses = [n for n in kernel.body.walk()
                    if isinstance(n, (Load, Store, Atomic)) and n.buffer == site]
        bases = [None if split is None else split[0]
                 for split in (_split_index(n.index, defs) for n in accesses)]
        return _Plan(alloc, defs, bases)

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        site, plan = match.site, match.plan
        alloc, defs = plan.alloc, plan.defs
        # The offsets and the tiles' bounds are known at the spec's values (the context).
        values = dict(ctx.sizes)
        values.update(ctx.scalars)
        if not plan.bases:
            return NotApplicable(f"{site} is never accessed")
        offsets: dict[str, int] = {}
        for name in plan.bases:
            if name is None:
                return NotApplicable(f"an access of {site} has no tile-offset local as its base")
            value = eval_int(defs[name], values, defs)
            if value is None:
                return NotApplicable(f"the offset {name} is not a constant under the spec")
            offsets[name] = value
        starts = sorted(set(offsets.values()))
        ends = starts[1:] + [alloc.size]
        if starts[0] < 0 or any(e <= s for s, e in zip(starts, ends)):
            return NotApplicable(f"the tiles of {site} do not fit in its {alloc.size} elements")
        size_of = dict(zip(starts, (e - s for s, e in zip(starts, ends))))
        reason = _check_bounds(kernel, site, offsets, size_of, values, defs)
        if reason:
            return NotApplicable(reason)
        return _rewrite(kernel, alloc, offsets, size_of, defs)


@dataclass(frozen=True)
class _Plan:
    """The dynamic shared array, the kernel's single-definition locals, and the tile-offset
    local each access of the array starts from (None: the access has none), in program
    order. A refusal for want of accesses or offset locals comes when applying, in that
    order with the checks that need the spec's values, so that the rule lists the same sites
    as before protocol v2 (issue 11 tightens that separately)."""

    alloc: Alloc
    defs: Mapping[str, Expr]
    bases: list[str | None]


def _split_index(index: Expr, defs: Mapping[str, Expr]) -> tuple[str, Expr | None] | None:
    """``off + rest`` -> (off, rest or None), ``off`` a single-definition local."""
    terms = analysis.sum_terms(index)
    bases = [k for k, t in enumerate(terms) if isinstance(t, Var) and t.name in defs
             and isinstance(defs[t.name], Expr) and _is_offset_def(defs[t.name])]
    if len(bases) != 1:
        return None
    k = bases[0]
    rest_terms = terms[:k] + terms[k + 1:]
    rest: Expr | None = None
    for t in rest_terms:
        rest = t if rest is None else Binary("+", rest, t, t.type)
    return terms[k].name, rest  # type: ignore[attr-defined]


def _is_offset_def(init: Expr) -> bool:
    """Offsets are built from constants and scalars (no loads, no hardware indices)."""
    return not any(isinstance(n, (Load,)) or type(n).__name__ == "Special" for n in init.walk())


def _check_bounds(kernel: Kernel, site: str, offsets: dict[str, int], size_of: dict[int, int],
                  values: Mapping[str, int | float], defs) -> str | None:
    for stmt, env in loop_env(kernel, values):
        if isinstance(stmt, (Store, Atomic)) and stmt.buffer == site:
            vtype = stmt.value.type
            width = vtype.count if isinstance(vtype, VectorType) else 1
            why = _fits(kernel, stmt.index, width, env, offsets, size_of, values, defs)
            if why:
                return why
        for e in analysis.own_exprs(stmt):
            for n in e.walk():
                if isinstance(n, Load) and n.buffer == site:
                    width = n.type.count if isinstance(n.type, VectorType) else 1
                    why = _fits(kernel, n.index, width, env, offsets, size_of, values, defs)
                    if why:
                        return why
    return None


def _fits(kernel, index, width, env, offsets, size_of, values, defs) -> str | None:
    name, rest = _split_index(index, defs)  # type: ignore[misc]
    size = size_of[offsets[name]]
    span = (0, 0) if rest is None else interval(rest, kernel, env, values, defs)
    if span is None:
        return f"cannot bound an index into tile {name}"
    if span[0] < 0 or span[1] + width > size:
        return f"an index into tile {name} may leave it ({span[0]}..{span[1]} of {size})"
    return None


def _rewrite(kernel: Kernel, alloc: Alloc, offsets: dict[str, int],
             size_of: dict[int, int], defs: Mapping[str, Expr]) -> Kernel:
    # One array per distinct offset, named after the first offset local that has it.
    array_of: dict[int, str] = {}
    taken: set[str] = set()
    for name in sorted(offsets, key=lambda n: (offsets[n], n)):
        if offsets[name] not in array_of:
            array_of[offsets[name]] = analysis.fresh_name(kernel, f"{alloc.name}_{name}", taken)
            taken.add(array_of[offsets[name]])
    new_allocs = [Alloc(array_of[s], alloc.elem, size_of[s], "shared", False, loc=alloc.loc)
                  for s in sorted(array_of)]

    def visit(n: Node) -> Node | None:
        if isinstance(n, (Load, Store, Atomic)) and n.buffer == alloc.name:
            name, rest = _split_index(n.index, defs)  # type: ignore[misc]
            index = rest if rest is not None else Const(0, n.index.type)  # type: ignore
            return dataclasses.replace(n, buffer=array_of[offsets[name]], index=index)
        return None
    body = transform(kernel.body, visit)
    assert isinstance(body, Block)
    # The offset locals are dead once no access uses them.
    used = analysis.used_vars(body)

    def drop(s):
        if s is alloc:
            return new_allocs
        if isinstance(s, Declare) and s.name in offsets and s.name not in used:
            return []
        return None
    stmts: list = []
    for s in body.stmts:
        r = drop(s)
        stmts.extend([s] if r is None else r)
    body = dataclasses.replace(body, stmts=tuple(stmts))
    launch = dataclasses.replace(kernel.launch, shared_bytes=0)
    return dataclasses.replace(kernel, body=body, launch=launch)


RULES = [SplitShared()]
