"""Atomic read-modify-write statements, with many lanes hitting the same address.

Lanes are serialized in lane order, which is one of the orders a GPU may choose. Without
a ``result`` numpy's unbuffered ``ufunc.at`` does the whole update at once; with one, each
lane must see the value before its own update: integer adds get it from a segmented
prefix sum, everything else from a loop over the live lanes.
"""

from __future__ import annotations

import numpy as np

from kir import ir
from kir.errors import KirError
from kir.interp.exprs import Hoist, compile_expr, compile_index
from kir.interp.state import State
from kir.ir import cops
from kir.ir.types import ScalarType, Type, VectorType


def _combine(op: str, dtype: np.dtype):
    if op == "add":
        return np.add
    if op == "max":
        return np.fmax if dtype.kind == "f" else np.maximum
    if op == "min":
        return np.fmin if dtype.kind == "f" else np.minimum
    if op in ("and", "or", "xor"):
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    if op == "inc":
        return _wrapping_increment
    return None  # exch


def _wrapping_increment(current, limit):
    """CUDA's atomicInc: ``current >= limit ? 0 : current + 1`` (one element; no ``.at``)."""
    return type(current)(0) if current >= limit else type(current)(current + 1)


def _exchange(data: np.ndarray, addr: np.ndarray, values: np.ndarray) -> None:
    # The last lane in lane order wins: take each address's last occurrence explicitly.
    reversed_addr = addr[::-1]
    unique, first = np.unique(reversed_addr, return_index=True)
    data[unique] = values[::-1][first]


def _int_add_old(data: np.ndarray, addr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Old values seen by sequential integer adds in lane order (wrapping arithmetic)."""
    order = np.argsort(addr, kind="stable")
    sorted_addr = addr[order]
    sorted_values = values[order]
    running = np.cumsum(sorted_values, dtype=data.dtype)
    exclusive = running - sorted_values
    starts = np.ones(len(addr), dtype=bool)
    starts[1:] = sorted_addr[1:] != sorted_addr[:-1]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(len(addr)), 0))
    old_sorted = data[sorted_addr] + (exclusive - exclusive[group_start])
    old = np.empty_like(old_sorted)
    old[order] = old_sorted
    return old


def _sequential_old(op: str, data: np.ndarray, addr: np.ndarray,
                    values: np.ndarray) -> np.ndarray:
    combine = _combine(op, data.dtype)
    old = np.empty(len(addr), dtype=data.dtype)
    for k, (a, v) in enumerate(zip(addr.tolist(), values)):
        current = data[a]
        old[k] = current
        data[a] = v if combine is None else combine(current, v)
    return old


def compile_atomic(s: ir.Atomic, result_type: Type | None, hoist: Hoist | None = None):
    """A closure running atomic statement ``s``; ``result_type`` is the declared type of
    ``s.result`` when it names one."""
    from kir.interp.stmts import assign

    if s.op not in ir.ATOMIC_OPS:
        raise KirError(f"unknown atomic operation {s.op!r}", s.loc)
    if isinstance(s.value.type, VectorType):
        raise KirError("atomics on vector values are not supported", s.loc)
    if s.result is not None and result_type is None:
        raise KirError(f"atomic result variable {s.result!r} is not declared", s.loc)
    address = compile_index(s.index, s.loc, hoist, "atomic on")
    value = compile_expr(s.value, s.loc, hoist)
    op, name, result, loc = s.op, s.buffer, s.result, s.loc

    def run(st: State, mask: np.ndarray) -> None:
        mem = st.memory(name, loc)
        data = mem.data
        addr = st.lanes(address(st, mem, 1, mask))
        values = st.lanes(cops.c_cast(value(st, mask), _scalar_type_of(data.dtype)))
        full = mask is st.full
        live_addr = addr if full else addr[mask]
        live_values = values if full else values[mask]
        if result is None:
            combine = _combine(op, data.dtype)
            if op == "inc":  # no ufunc: lane by lane
                _sequential_old(op, data, live_addr, live_values)
            elif combine is None:
                _exchange(data, live_addr, live_values)
            else:
                combine.at(data, live_addr, live_values)
            return
        if op == "add" and data.dtype.kind in "iu":
            old = _int_add_old(data, live_addr, live_values)
            np.add.at(data, live_addr, live_values)
        else:
            old = _sequential_old(op, data, live_addr, live_values)
        per_lane = np.zeros(st.n, dtype=data.dtype)
        per_lane[mask] = old
        assign(st, result, result_type, cops.c_cast(per_lane, result_type), mask)

    return run


_DTYPE_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
                np.dtype(np.float64): "f64", np.dtype(np.int32): "i32",
                np.dtype(np.uint32): "u32", np.dtype(np.int64): "i64",
                np.dtype(np.uint64): "u64", np.dtype(np.bool_): "bool",
                np.dtype(np.int8): "i8", np.dtype(np.uint8): "u8",
                np.dtype(np.int16): "i16", np.dtype(np.uint16): "u16"}


def _scalar_type_of(dtype: np.dtype) -> ScalarType:
    from kir.ir.types import SCALARS

    return SCALARS[_DTYPE_TYPES[dtype]]
