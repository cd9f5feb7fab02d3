"""Counting SIMD-group matrix statements (see :mod:`kir.interp.counters`).

A fragment load or store is one warp-instruction moving ``rows x cols`` elements: from or to
global memory it adds bytes, 32-byte sectors, 128-byte lines and footprint exactly as a
scalar access does; from or to threadgroup memory it adds wavefronts, the conflict degree
being the most distinct 4-byte words any of the 32 banks must serve (64 words need at least
two wavefronts). A product ``acc += a * b`` of an m x k and a k x n fragment counts
``m n k / 512`` 8x8x8 multiply-accumulates and ``2 m n k`` flops per warp. Fills are
register moves and count nothing.

Every wrapper runs the statement first, so an invalid fragment access raises the
statement's own error before anything is counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from kir import ir
from kir.interp.counters import EXACT_SAMPLES
from kir.interp.exprs import compile_expr
from kir.interp.matrix import _offsets
from kir.interp.state import WARP, Memory, State

if TYPE_CHECKING:
    from kir.interp.counters import Counters

StmtFn = Callable[[State, np.ndarray], None]
BANKS = 32
MMA_UNIT = 8 * 8 * 8  # multiply-adds of one simdgroup_multiply_accumulate on 8x8 fragments


def wrap_matrix_stmt(counters: "Counters", stmt: ir.Stmt, fn: StmtFn) -> StmtFn:
    """``fn`` (the closure of a matrix statement) reporting what it does to ``counters``."""
    if isinstance(stmt, ir.MatrixMultiplyAccumulate):
        a, b = stmt.a, stmt.b

        def product(st: State, mask: np.ndarray) -> None:
            fn(st, mask)
            m, k = st.env[a].shape[1:]
            n = st.env[b].shape[2]
            warps = int(_active(st, mask).sum())
            counters.matrix_mma += warps * -(-m * n * k // MMA_UNIT)
            counters.matrix_flops += warps * 2 * m * n * k
        return product
    if not isinstance(stmt, (ir.MatrixLoad, ir.MatrixStore)):
        return fn
    index = compile_expr(stmt.index, stmt.loc, None)  # uncounted: the statement counts it
    stride = compile_expr(stmt.stride, stmt.loc, None)
    load = isinstance(stmt, ir.MatrixLoad)
    transpose = load and stmt.transpose  # type: ignore[union-attr]
    site = counters.new_site()

    def access(st: State, mask: np.ndarray) -> None:
        first, step = index(st, mask), stride(st, mask)  # before a store changes memory
        fn(st, mask)
        active = _active(st, mask)
        if not active.any():
            return
        frag = st.env[stmt.name]
        rows, cols = frag.shape[1:]
        per_warp = [np.asarray(st.lanes(v)).astype(np.int64).reshape(-1, WARP)[active, 0]
                    for v in (first, step)]
        offsets = per_warp[0][:, None, None] + _offsets(rows, cols, per_warp[1], transpose)
        count_fragment(counters, st, st.memories[stmt.buffer], offsets.reshape(
            offsets.shape[0], -1), "load" if load else "store", site)
    return access


def _active(st: State, mask: np.ndarray) -> np.ndarray:
    """Bool per warp of the chunk: all 32 lanes live (the statement raised otherwise)."""
    return np.asarray(mask).reshape(-1, WARP).all(axis=1)


def count_fragment(counters: "Counters", st: State, mem: Memory, offsets: np.ndarray,
                   kind: str, site: int) -> None:
    """One fragment access per row of ``offsets`` (element offsets into ``mem``, one warp
    each: into the block's own array for threadgroup memory)."""
    warps, elements = offsets.shape
    esize = mem.data.itemsize
    if kind == "load":
        counters.matrix_loads += warps
    else:
        counters.matrix_stores += warps
    if mem.space == "local":
        counters.local_accesses += warps * WARP
        return
    sample = counters._samples.get(site)
    estimated = sample is not None and sample[0] >= EXACT_SAMPLES
    if mem.space == "shared":
        counters.shared_accesses += warps
        counters.shared_bytes += warps * elements * esize
        if estimated:
            counters.shared_wavefronts += round(warps * sample[2] / sample[1])
            counters.bank_conflicts += round(warps * sample[3] / sample[1])
            return
        wavefronts, conflicts = _bank_wavefronts(offsets, esize)
        counters.shared_wavefronts += wavefronts
        counters.bank_conflicts += conflicts
        counters._sample(site, warps, wavefronts, conflicts)
        return
    nbytes = warps * elements * esize
    if kind == "load":
        counters.global_load_bytes += nbytes
        counters.global_load_requests += warps
    else:
        counters.global_store_bytes += nbytes
        counters.global_store_requests += warps
    if estimated:
        sectors = round(warps * sample[2] / sample[1])
        lines = round(warps * sample[3] / sample[1])
    else:
        byte = offsets * esize
        sectors = int(counters._distinct(byte // 32).sum())
        lines = int(counters._distinct(byte // 128).sum())
        counters._sample(site, warps, sectors, lines)
    if kind == "load":
        counters.global_load_sectors += sectors
    else:
        counters.global_store_sectors += sectors
    counters.global_lines += lines
    counters._mark(st, st.full, mem, offsets.reshape(-1), 1, False, kind == "store", False)


def _bank_wavefronts(offsets: np.ndarray, esize: int) -> tuple[int, int]:
    """(wavefronts, extra wavefronts from bank conflicts) of fragment accesses, one warp per
    row: the most distinct words one bank serves, at least ceil(words / 32)."""
    words = np.sort((offsets * esize) // 4, axis=1)
    distinct = np.ones(words.shape, dtype=bool)
    distinct[:, 1:] = words[:, 1:] != words[:, :-1]
    rows = np.broadcast_to(np.arange(words.shape[0])[:, None], words.shape)
    keys = rows[distinct] * BANKS + words[distinct] % BANKS
    per_bank = np.bincount(keys, minlength=words.shape[0] * BANKS).reshape(-1, BANKS)
    degree = per_bank.max(axis=1)
    least = -(-distinct.sum(axis=1) // BANKS)
    return int(np.maximum(degree, least).sum()), int(np.maximum(degree - least, 0).sum())


__all__ = ["count_fragment", "wrap_matrix_stmt"]
