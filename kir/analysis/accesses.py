"""Collecting the accesses of a loop region for :mod:`kir.analysis.deps`.

A :class:`Region` lists the statements of one loop (pre-order), every memory access with its
index polynomial, the enclosing region loops and the conditional context it runs under, the
scalar reads and writes, and the ranges of the loop variables and thread indices.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Mapping

from kir.analysis.affine import Poly, Range, rename_atoms, substitute_values, to_poly
from kir.analysis.walk import (
    assigned_vars,
    canonical,
    find_loop,
    has_own_exit,
    own_exprs,
    single_defs,
)
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Stmt,
    Store,
    Var,
    While,
)
from kir.ir.types import PointerType, VectorType


@dataclass
class Access:
    """One read and/or write of a buffer element (or of a scalar, ``buffer='$name'``)."""

    node: int
    pos: int
    buffer: str
    index: Poly | None
    width: int
    write: bool
    read: bool
    loops: tuple[For, ...]
    chain: tuple[tuple[str, int], ...]


@dataclass
class Region:
    loop: For
    nodes: list[Stmt] = field(default_factory=list)
    chains: list[tuple[tuple[str, int], ...]] = field(default_factory=list)  # per node
    accesses: list[Access] = field(default_factory=list)
    scalars: dict[str, tuple[list[Access], list[Access]]] = field(default_factory=dict)
    decl_loops: dict[str, tuple[For, ...]] = field(default_factory=dict)
    ranges: dict[str, Range] = field(default_factory=dict)
    bounds: dict[str, tuple[Poly | None, Poly | None, int, bool] | None] = \
        field(default_factory=dict)
    thread_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    spaces: dict[str, str] = field(default_factory=dict)
    allocs: set[str] = field(default_factory=set)
    outside_uses: dict[str, int] = field(default_factory=dict)
    reads_outside: dict[str, int] = field(default_factory=dict)  # reads not in `accesses`
    fors: dict[int, For] = field(default_factory=dict)

    def var_of(self, loop: For) -> str:
        return loop.var

    def space(self, buffer: str) -> str:
        return self.spaces.get(buffer, "global")


def collect(kernel: Kernel, label: str, assume: Mapping[str, int],
            within: str | None = None) -> Region:
    """The :class:`Region` of loop ``label``; with ``within``, only accesses inside that
    nested loop are kept. Raises ValueError for an unknown label."""
    loop = find_loop(kernel, label)
    if loop is None:
        raise ValueError(f"no loop {label}")
    region = Region(loop)
    _spaces(kernel, region)
    lookup = _lookup(kernel, loop)
    values: dict[str, int] = {k: int(v) for k, v in assume.items()
                              if isinstance(v, (int,)) and not isinstance(v, bool)}
    for axis, dim in zip("xyz", kernel.launch.block):
        values[f"%block_dim.{axis}"] = dim
        if dim == 1:
            values[f"%thread.{axis}"] = 0
        else:
            region.thread_ranges[f"%thread.{axis}"] = (0, dim - 1)
    values["%warp_size"] = 32

    def poly(expr: Expr) -> Poly | None:
        p = to_poly(expr, lookup)
        return None if p is None else substitute_values(p, values)

    _walk(region, loop, poly, within)
    for name in region.allocs | set(region.spaces):
        total = sum(1 for n in kernel.body.walk()
                    if isinstance(n, (Load, Store, Atomic)) and n.buffer == name)
        inside = sum(1 for n in loop.walk()
                     if isinstance(n, (Load, Store, Atomic)) and n.buffer == name)
        region.outside_uses[name] = total - inside
        reads = sum(1 for n in kernel.body.walk()
                    if isinstance(n, (Load, Atomic)) and n.buffer == name)
        region.reads_outside[name] = reads - sum(
            1 for a in region.accesses if a.buffer == name and a.read)
    return region


def _spaces(kernel: Kernel, region: Region) -> None:
    for p in kernel.params:
        if isinstance(p.type, PointerType):
            region.spaces[p.name] = p.type.space
    for n in kernel.body.walk():
        if isinstance(n, Alloc):
            region.spaces[n.name] = n.space
            region.allocs.add(n.name)


def _lookup(kernel: Kernel, loop: For):
    inits = single_defs(kernel)
    iteration = {n.var for n in loop.walk() if isinstance(n, For)}
    assigned = assigned_vars(loop)
    memo: dict[str, Poly | None] = {}
    busy: set[str] = set()

    def lookup(name: str) -> Poly | None:
        if name in iteration:
            return {(name,): 1}
        if name in memo:
            return memo[name]
        result: Poly | None
        if name in inits and name not in busy:
            busy.add(name)
            result = to_poly(inits[name], lookup)
            busy.discard(name)
            if result is None and name not in assigned:
                result = {(name,): 1}  # invariant but not affine: an opaque symbol
        elif name in assigned:
            result = None
        else:
            result = {(name,): 1}
        memo[name] = result
        return result
    return lookup


def _walk(region: Region, loop: For, poly, within: str | None) -> None:
    iteration = {n.var for n in loop.walk() if isinstance(n, For)}
    written = assigned_vars(loop) - iteration
    pos = itertools.count()
    # (stmt, region loops enclosing it, chain of enclosing contexts, inside `within`)
    stack: list[tuple[Stmt, tuple[For, ...], tuple, bool]] = [(loop, (), (), within is None)]
    while stack:
        stmt, loops, chain, keep = stack.pop()
        if type(stmt).__name__ == "Block":
            for s in reversed(stmt.stmts):  # type: ignore[attr-defined]
                stack.append((s, loops, chain, keep))
            continue
        node = len(region.nodes)
        region.nodes.append(stmt)
        region.chains.append(chain)
        inner_loops = loops
        if isinstance(stmt, For):
            keep = keep or stmt.label == within
            region.fors[id(stmt)] = stmt
            inner_loops = loops + (stmt,)
            _record_bounds(region, stmt, poly)
        here = inner_loops if isinstance(stmt, For) else loops
        if keep:
            _record(region, stmt, node, pos, here, chain, poly, written)
        if isinstance(stmt, For):
            stack.append((stmt.body, inner_loops, chain + (("for", id(stmt)),), keep))
        elif isinstance(stmt, If):
            if stmt.orelse is not None:
                stack.append((stmt.orelse, loops, chain + (("else", id(stmt)),), keep))
            stack.append((stmt.then, loops, chain + (("then", id(stmt)),), keep))
        elif isinstance(stmt, While):
            stack.append((stmt.body, loops, chain + (("while", id(stmt)),), keep))


def _record(region: Region, stmt: Stmt, node: int, pos, loops, chain, poly,
            written: set[str]) -> None:
    for expr in own_exprs(stmt):
        for n in expr.walk():
            if isinstance(n, Load):
                width = n.type.count if isinstance(n.type, VectorType) else 1
                region.accesses.append(Access(node, next(pos), n.buffer, poly(n.index),
                                              width, False, True, loops, chain))
            elif isinstance(n, Var) and n.name in written:
                _scalar(region, n.name, node, next(pos), loops, chain, write=False)
    if isinstance(stmt, (Store, Atomic)):
        vtype = getattr(stmt.value, "type", None)
        width = vtype.count if isinstance(vtype, VectorType) else 1
        region.accesses.append(Access(node, next(pos), stmt.buffer, poly(stmt.index), width,
                                      True, isinstance(stmt, Atomic), loops, chain))
    target = stmt.name if isinstance(stmt, (Declare, Assign)) else \
        stmt.result if isinstance(stmt, Atomic) else None
    if target is not None and target in written:
        _scalar(region, target, node, next(pos), loops, chain, write=True)
        if isinstance(stmt, Declare):
            region.decl_loops[target] = loops


def _scalar(region: Region, name: str, node: int, pos: int, loops, chain, write: bool):
    writers, readers = region.scalars.setdefault(name, ([], []))
    (writers if write else readers).append(
        Access(node, pos, "$" + name, None, 1, write, not write, loops, chain))


def _record_bounds(region: Region, loop: For, poly) -> None:
    c = canonical(loop)
    if c is None:
        region.bounds[loop.label] = None
        region.ranges[loop.label] = None
        return
    start, stop = poly(c.start), poly(c.stop)
    region.bounds[loop.label] = (start, stop, c.step, c.inclusive)
    lo = _interval(start, region)
    hi = _interval(stop, region)
    if lo is None or hi is None:
        region.ranges[loop.label] = None
        return
    region.ranges[loop.label] = (lo[0], hi[1] - (0 if c.inclusive else 1))


def _interval(p: Poly | None, region: Region) -> tuple[int, int] | None:
    """Bounds of a polynomial over the thread indices and the region loops seen so far."""
    if p is None:
        return None
    ranges: dict[str, tuple[int, int]] = dict(region.thread_ranges)
    for label, rng in region.ranges.items():
        f = next((f for f in region.fors.values() if f.label == label), None)
        if f is not None and rng is not None:
            ranges[f.var] = rng
    lo_sum = hi_sum = 0
    for mono, coef in p.items():
        lo, hi = coef, coef
        for atom in mono:
            if atom not in ranges:
                return None
            a, b = ranges[atom]
            products = [lo * a, lo * b, hi * a, hi * b]
            lo, hi = min(products), max(products)
        lo_sum, hi_sum = lo_sum + lo, hi_sum + hi
    return lo_sum, hi_sum


def _sibling_write(region: Region, w: Access, j: int) -> bool:
    """Whether the other branch of the if at ``w.chain[j]`` writes the same element, so
    the element is written whichever way the condition goes."""
    kind, ident = w.chain[j]
    flipped = ("else" if kind == "then" else "then", ident)
    want = w.chain[:j] + (flipped,) + w.chain[j + 1:]
    return any(a.write and a.buffer == w.buffer and a.index == w.index and a.width == w.width
               and a.chain == want for a in region.accesses)


def covered(region: Region, w: Access, r: Access, threads: bool = False) -> bool:
    """Whether write ``w`` writes, earlier in the same iteration, the element read by ``r``:
    same context up to ``w``'s own loops, which must run full ranges equal to ``r``'s. With
    ``threads``, the writes of all threads of the block together count (the caller must
    make sure a barrier separates them): each thread index then acts as one more loop of
    ``w``, matched to a loop of ``r`` with step 1 over the same range.)"""
    if w.index is None or r.index is None or w.width != r.width:
        return False
    k = 0
    while k < min(len(w.chain), len(r.chain)) and w.chain[k] == r.chain[k]:
        k += 1
    for j in range(k, len(w.chain)):
        kind, ident = w.chain[j]
        if kind in ("then", "else") and not _sibling_write(region, w, j):
            return False
        if kind == "while":
            return False
    w_loops = [region.fors[i] for kind, i in w.chain[k:] if kind == "for"]
    r_loops = [region.fors[i] for kind, i in r.chain[k:] if kind == "for"]
    if any(has_own_exit(f) or region.bounds.get(f.label) is None for f in w_loops):
        return False
    axes = [a for a in region.thread_ranges if threads and (a,) in w.index]
    for chosen in itertools.permutations(r_loops, len(w_loops) + len(axes)):
        if not all(region.bounds.get(rf.label) == region.bounds[wf.label]
                   for wf, rf in zip(w_loops, chosen)):
            continue
        if not all(region.ranges.get(rf.label) == region.thread_ranges[a]
                   and (region.bounds.get(rf.label) or (0, 0, 0))[2] == 1
                   for a, rf in zip(axes, chosen[len(w_loops):])):
            continue
        mapping = {wf.var: rf.var for wf, rf in zip(w_loops, chosen)}
        mapping.update({a: rf.var for a, rf in zip(axes, chosen[len(w_loops):])})
        if rename_atoms(w.index, mapping) == r.index:
            return True
    return False
