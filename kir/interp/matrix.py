"""Matrix-fragment statements in the lockstep interpreter.

A fragment belongs to a warp, not a lane: its value is an array ``[warps, rows, cols]`` over
the warps of the chunk (every block's warps in order), kept in ``State.env`` under the
fragment's name. Each statement acts for the warps whose 32 lanes are all live; a warp that
reaches one with only some lanes live is an error (the hardware needs all of them), as is an
index or stride that differs between the lanes of a warp. Arithmetic is f32 (numpy matmul
per warp), as Metal's simdgroup float8x8 computes it; a ``tf32`` product first rounds its
operands with :func:`round_to_tf32`, as the CUDA back end does before ``mma.sync``, and a
``tf32x3`` product adds the three products of the operands' split parts (:func:`split_tf32`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from kir import ir
from kir.errors import KirError, Loc
from kir.interp.state import WARP, State

if TYPE_CHECKING:
    from kir.interp.stmts import StmtCompiler

StmtFn = Callable[[State, np.ndarray], None]


def compile_matrix_stmt(compiler: "StmtCompiler", stmt: ir.Stmt) -> StmtFn:
    """The closure that runs one matrix statement."""
    if isinstance(stmt, ir.MatrixFill):
        return _fill(compiler, stmt)
    if isinstance(stmt, ir.MatrixLoad):
        return _load(compiler, stmt)
    if isinstance(stmt, ir.MatrixMultiplyAccumulate):
        return _mma(stmt)
    if isinstance(stmt, ir.MatrixStore):
        return _store(compiler, stmt)
    raise KirError(f"the interpreter does not support {type(stmt).__name__}", ir.stmt_loc(stmt))


def _warps(st: State, mask: np.ndarray, loc: Loc | None) -> np.ndarray:
    """Bool per warp of the chunk: all 32 lanes live. Raises for a partly live warp."""
    if not st.dense_warps:
        raise KirError(f"matrix operation in a block of {st.threads} threads; fragments need "
                       f"whole warps of {WARP}", loc, hint="make the block a multiple of 32")
    per_warp = np.asarray(mask).reshape(-1, WARP)
    active = per_warp.all(axis=1)
    partial = per_warp.any(axis=1) & ~active
    if partial.any():
        w = int(np.flatnonzero(partial)[0])
        raise KirError(f"matrix operation reached by {int(per_warp[w].sum())} of {WARP} lanes "
                       f"of a warp in {st.where_of(w * WARP)}", loc,
                       hint="every lane of a warp must reach a matrix operation together")
    return active


def _uniform(st: State, value, active: np.ndarray, loc: Loc | None, what: str) -> np.ndarray:
    """One int64 value per active warp; the lanes of a warp must agree."""
    lanes = np.asarray(st.lanes(value)).astype(np.int64).reshape(-1, WARP)
    first = lanes[:, 0]
    differ = (lanes != first[:, None]).any(axis=1) & active
    if differ.any():
        w = int(np.flatnonzero(differ)[0])
        raise KirError(f"matrix {what} differs between the lanes of a warp in "
                       f"{st.where_of(w * WARP)}", loc, hint="use a warp-uniform value")
    return first[active]


def _offsets(rows: int, cols: int, stride: np.ndarray, transpose: bool) -> np.ndarray:
    i = np.arange(rows, dtype=np.int64)[None, :, None]
    j = np.arange(cols, dtype=np.int64)[None, None, :]
    s = stride[:, None, None]
    return j * s + i if transpose else i * s + j


def _addresses(st: State, name: str, index: np.ndarray, stride: np.ndarray, active: np.ndarray,
               rows: int, cols: int, transpose: bool, loc: Loc | None, action: str):
    """(memory, flat element addresses [warps, rows, cols]) of one tile, bounds-checked."""
    mem = st.memory(name, loc)
    offset = index[:, None, None] + _offsets(rows, cols, stride, transpose)
    bad = (offset < 0) | (offset >= mem.size)
    if bad.any():
        k = int(np.flatnonzero(bad.any(axis=(1, 2)))[0])
        w = int(np.flatnonzero(active)[k])
        raise KirError(f"out-of-bounds matrix {action} {name!r}: elements "
                       f"{int(offset[k].min())}..{int(offset[k].max())} outside "
                       f"[0, {mem.size}) in {st.where_of(w * WARP)}", loc,
                       hint="the tile runs past the end of the array for these sizes")
    if mem.base is not None:  # shared (per block) or local: offset into the first lane's
        base = np.asarray(mem.base).reshape(-1, WARP)[active, 0].astype(np.int64)
        offset = offset + base[:, None, None]
    return mem, offset


def _declare(st: State, name: str, shape: tuple[int, int], active: np.ndarray,
             values: np.ndarray) -> None:
    old = st.env.get(name)
    if isinstance(old, np.ndarray) and old.shape == (active.size, *shape):
        frag = old.copy()
    else:
        frag = np.zeros((active.size, *shape), dtype=np.float32)
    frag[active] = values
    st.env[name] = frag


def _fill(compiler: "StmtCompiler", s: ir.MatrixFill) -> StmtFn:
    value = compiler.expr(s.value, s.loc)
    shape, name, loc = (s.type.rows, s.type.cols), s.name, s.loc

    def run(st: State, mask: np.ndarray) -> None:
        active = _warps(st, mask, loc)
        lanes = np.asarray(st.lanes(value(st, mask)), dtype=np.float32).reshape(-1, WARP)
        if (lanes[active] != lanes[active][:, :1]).any():
            raise KirError("matrix fill value differs between the lanes of a warp", loc)
        _declare(st, name, shape, active, lanes[active][:, 0, None, None])
    return run


def _load(compiler: "StmtCompiler", s: ir.MatrixLoad) -> StmtFn:
    index, stride = compiler.expr(s.index, s.loc), compiler.expr(s.stride, s.loc)
    rows, cols, loc = s.type.rows, s.type.cols, s.loc

    def run(st: State, mask: np.ndarray) -> None:
        active = _warps(st, mask, loc)
        if not active.any():
            return
        i = _uniform(st, index(st, mask), active, loc, "index")
        k = _uniform(st, stride(st, mask), active, loc, "stride")
        mem, addr = _addresses(st, s.buffer, i, k, active, rows, cols, s.transpose, loc,
                               "load from")
        _declare(st, s.name, (rows, cols), active, mem.data[addr].astype(np.float32))
    return run


def round_to_tf32(values: np.ndarray) -> np.ndarray:
    """f32 ``values`` rounded to TF32 (8 exponent bits, 10 explicit mantissa bits): to
    nearest, ties away from zero, the low 13 bits cleared — PTX ``cvt.rna.tf32.f32``. Infinities
    and NaNs pass unchanged; a value within half a TF32 step of the largest float rounds to
    infinity, as the instruction does."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(finite, rounded, bits).view(np.float32)


def split_tf32(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """f32 ``values`` as ``(big, small)``: ``big`` rounded to TF32 and ``small`` the rest
    (exact in f32) rounded to TF32 too — the operands of a ``tf32x3`` product. Where ``big``
    is not finite ``small`` is 0, so infinities multiply as infinities, not NaN."""
    big = round_to_tf32(values)
    finite = np.isfinite(big)
    rest = np.where(finite, np.asarray(values, dtype=np.float32), 0) - np.where(finite, big, 0)
    return big, round_to_tf32(rest.astype(np.float32))


def _mma(s: ir.MatrixMultiplyAccumulate) -> StmtFn:
    def products(a: np.ndarray, b: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """The operand pairs the product adds, in order."""
        if s.precision == "tf32":
            return [(round_to_tf32(a), round_to_tf32(b))]
        if s.precision == "tf32x3":
            (big_a, small_a), (big_b, small_b) = split_tf32(a), split_tf32(b)
            return [(small_a, big_b), (big_a, small_b), (big_a, big_b)]
        return [(a, b)]

    def run(st: State, mask: np.ndarray) -> None:
        active = _warps(st, mask, s.loc)
        if not active.any():
            return
        acc = st.env[s.acc].copy()
        total = acc[active]
        for a, b in products(st.env[s.a][active], st.env[s.b][active]):
            total = np.matmul(a, b, dtype=np.float32) + total
        acc[active] = total
        st.env[s.acc] = acc
    return run


def _store(compiler: "StmtCompiler", s: ir.MatrixStore) -> StmtFn:
    index, stride = compiler.expr(s.index, s.loc), compiler.expr(s.stride, s.loc)
    loc = s.loc

    def run(st: State, mask: np.ndarray) -> None:
        active = _warps(st, mask, loc)
        if not active.any():
            return
        frag = st.env[s.name][active]
        i = _uniform(st, index(st, mask), active, loc, "index")
        k = _uniform(st, stride(st, mask), active, loc, "stride")
        rows, cols = frag.shape[1:]
        mem, addr = _addresses(st, s.buffer, i, k, active, rows, cols, False, loc,
                               "store to")
        mem.data[addr] = frag.astype(mem.data.dtype)
    return run


__all__ = ["compile_matrix_stmt"]
