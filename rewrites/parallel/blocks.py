"""Block-level facts about one loop's iterations, for rules that move iterations to blocks.

When the iterations of a loop go to different thread blocks (``parallelize-loop``), two
things must hold that :func:`kir.analysis.deps.dependence_graph` alone does not say:

* a shared array may be *block-private* per iteration: every element the iteration reads was
  written earlier in the same iteration, by the same thread, or by the block as a whole with
  a barrier in between (the FlashAttention K/V tiles: thread ``tx`` loads row ``tx``, then
  ``__syncthreads()``, then every thread reads every row). Each block has its own shared
  memory, so such an array carries nothing between iterations and may be ignored;
* global memory touched by different threads of different iterations must not overlap: with
  barriers in the loop the original kernel orders those accesses, separate blocks do not.

Both use the index polynomials and the Banerjee/GCD test of :mod:`kir.analysis.deps`.
"""

from __future__ import annotations

from typing import Mapping

from kir.analysis import is_thread_dependent, thread_dependent_vars
from kir.analysis.accesses import Access, Region, _interval, _sibling_write, collect, covered
from kir.analysis.affine import difference, may_equal_zero
from kir.analysis.deps import _pair_setup, _singles
from kir.ir import Barrier, For, If, Kernel, Stmt, While

__all__ = ["block_covered", "block_private_buffers", "cross_iteration_conflicts"]


def _common_prefix(a: tuple, b: tuple) -> int:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def _uniform_chain(region: Region, w: Access, common: int, tainted: set[str]) -> bool:
    """Whether every thread of the block runs ``w`` whenever one runs the reader: the loops
    around ``w`` have thread-independent headers, and the ifs it shares with the reader have
    thread-independent conditions (its own ifs are checked by :func:`covered`, which asks
    for a write of the same element in the other branch)."""
    by_id: dict[int, Stmt] = {id(s): s for s in region.nodes}
    for j, (kind, ident) in enumerate(w.chain):
        stmt = by_id.get(ident)
        if stmt is None:
            return False
        if isinstance(stmt, For):
            if any(is_thread_dependent(e, tainted) for e in (stmt.init, stmt.cond, stmt.update)):
                return False
        elif isinstance(stmt, While):
            return False
        elif isinstance(stmt, If) and j < common and is_thread_dependent(stmt.cond, tainted):
            return False
    return True


def _barrier_between(region: Region, w: Access, r: Access, common: int) -> bool:
    """A barrier in a block enclosing both accesses, after ``w`` and before ``r``."""
    prefix = w.chain[:common]
    for node in range(w.node + 1, r.node):
        if isinstance(region.nodes[node], Barrier):
            chain = region.chains[node]
            if chain == prefix[:len(chain)]:
                return True
    return False


def block_covered(region: Region, w: Access, r: Access, tainted: set[str]) -> bool:
    """Whether the writes of all threads at ``w`` together store, earlier in the same
    iteration and before a barrier that precedes ``r``, the element ``r`` reads."""
    if not (w.write and w.buffer == r.buffer and w.pos < r.pos):
        return False
    common = _common_prefix(w.chain, r.chain)
    return ((covered(region, w, r, threads=True) or _range_covered(region, w, r, common))
            and _uniform_chain(region, w, common, tainted)
            and _barrier_between(region, w, r, common))


def _range_covered(region: Region, w: Access, r: Access, common: int) -> bool:
    """The block's threads write the contiguous run ``P + t`` (or ``P - t``), t over the
    block's x axis, and every element ``r`` may read lies in it (``t[31 - tx]`` after
    ``t[tx] = ...``). Only for a one-axis block and a write with no loops of its own."""
    axes = list(region.thread_ranges.items())
    if len(axes) != 1 or w.index is None or r.index is None or w.width != r.width:
        return False
    atom, (lo, hi) = axes[0]
    slope = w.index.get((atom,), 0)
    if abs(slope) != 1 or any(atom in mono for mono in w.index if mono != (atom,)):
        return False
    for j in range(common, len(w.chain)):
        kind, _ = w.chain[j]
        if kind not in ("then", "else") or not _sibling_write(region, w, j):
            return False
    base = {mono: c for mono, c in w.index.items() if mono != (atom,)}
    span = _interval(difference(r.index, base), region)
    if span is None:
        return False
    first, last = (lo, hi) if slope == 1 else (-hi, -lo)
    return first <= span[0] and span[1] <= last


def block_private_buffers(kernel: Kernel, label: str,
                          assume: Mapping[str, int] | None = None) -> frozenset[str]:
    """Shared arrays written in loop ``label`` that carry no value between its iterations:
    not read after the loop, and every read in it covered in the same iteration by a write
    of the same thread or (separated by a barrier) of the whole block."""
    region = collect(kernel, label, assume or {}, None)
    tainted = thread_dependent_vars(kernel)
    after = _read_after(kernel, region.loop)
    result = set()
    for name, space in region.spaces.items():
        if space != "shared" or name in after:
            continue
        inside = [a for a in region.accesses if a.buffer == name]
        writes = [a for a in inside if a.write]
        if not writes:
            continue
        if all(any(w.pos < r.pos and (covered(region, w, r)
                                      or block_covered(region, w, r, tainted)) for w in writes)
               for r in inside if r.read):
            result.add(name)
    return frozenset(result)


def _read_after(kernel: Kernel, loop: For) -> set[str]:
    """Buffers read by statements after ``loop`` in the kernel's pre-order (conservative:
    anything that is not the loop itself nor before it)."""
    from kir.ir import Atomic, Load

    seen = False
    names: set[str] = set()
    inside = {id(n) for n in loop.walk()}
    for n in kernel.body.walk():
        if n is loop:
            seen = True
            continue
        if seen and id(n) not in inside and isinstance(n, (Load, Atomic)):
            names.add(n.buffer)
    return names


def cross_iteration_conflicts(kernel: Kernel, label: str,
                              assume: Mapping[str, int] | None = None,
                              buffers: frozenset[str] | None = None) -> set[str]:
    """Global buffers (all, or those in ``buffers``) on which two instances in
    *different* iterations of loop ``label``, run by any threads of the block, may touch one
    element with at least one writing. An unanalysable index counts as a conflict."""
    region = collect(kernel, label, assume or {}, None)
    mem = [a for a in region.accesses if region.space(a.buffer) not in ("local", "shared")
           and (buffers is None or a.buffer in buffers)]
    out: set[str] = set()
    for i, a in enumerate(mem):
        for b in mem[i:]:
            if a.buffer != b.buffer or a.buffer in out or not (a.write or b.write):
                continue
            if _may_conflict(region, a, b):
                out.add(a.buffer)
    return out


def _may_conflict(region: Region, a: Access, b: Access) -> bool:
    if a.index is None or b.index is None:
        return True
    h, common = _pair_setup(region, a, b, cross=True)
    singles = _singles(region, a, b, common)
    threads = [(t + "#1", t + "#2", "*", rng) for t, rng in region.thread_ranges.items()]
    for first in ("<", ">"):
        pairs = [(region.var_of(f) + "#1", region.var_of(f) + "#2",
                  first if k == 0 else "*", region.ranges.get(f.label))
                 for k, f in enumerate(common)]
        if may_equal_zero(h, pairs + threads, singles):
            return True
    return False
