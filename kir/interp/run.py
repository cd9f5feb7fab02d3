"""``run_kernel``: bind arguments, compile the kernel once, run it over the grid in chunks."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np

from kir import ir
from kir.errors import KirError
from kir.interp.exprs import deep_recursion
from kir.interp.races import global_marks
from kir.interp.state import Memory, State, Steps
from kir.interp.stmts import StmtCompiler
from kir.ir import cops
from kir.ir.types import PointerType, ScalarType, VectorType
from kir.spec.sizeexpr import eval_size_expr

if TYPE_CHECKING:
    from kir.interp.counters import Counters

DEFAULT_MAX_STEPS = 10_000_000
"""Loop iterations (each one over all lanes of a chunk) before a run counts as a hang."""

LANES_PER_CHUNK = 1 << 17
"""Threads run together at most; bounds the memory of per-lane values."""

LOCAL_ELEMENTS_PER_CHUNK = 1 << 24
"""Local-array elements of all lanes of a chunk together, at most."""


def run_kernel(kernel: ir.Kernel, args: dict[str, np.ndarray | int | float],
               sizes: dict[str, int] | None = None, *,
               max_steps: int | None = None,
               counters: "Counters | None" = None,
               time_limit_s: float | None = None,
               races: bool = True) -> dict[str, np.ndarray]:
    """Run ``kernel`` on the CPU over its whole launch grid and return the final contents of
    every buffer parameter (new arrays of the shapes given; ``args`` is never modified).

    ``args`` maps each parameter to an array (buffers, any shape, converted to the element
    type) or a number (scalars, converted with C rules); ``sizes`` binds the names in the
    launch grid's size expressions. Raises :class:`~kir.errors.KirError` for kernel bugs
    the run exposes (out-of-bounds accesses, divergent barriers, loops running past
    ``max_steps`` iterations, or past ``time_limit_s`` seconds of CPU time) and for
    arguments that do not fit the kernel.

    With ``races`` (the default) shared-memory races raise ``RaceError``
    (:mod:`kir.interp.races`); without, the lanes' lockstep hides them.

    With ``counters`` (a :class:`kir.interp.counters.Counters`) the run also counts what a
    GPU would execute (memory transactions, flops, barriers, ...) into it; slower, and
    only then: without it no counting code runs.
    """
    grid = tuple(_grid_dim(g, dict(sizes or {})) for g in kernel.launch.grid)
    block = tuple(int(b) for b in kernel.launch.block)
    if len(grid) != 3 or len(block) != 3 or min(block) < 1:
        raise KirError(f"kernel {kernel.name}: bad launch block {kernel.launch.block}")
    threads = math.prod(block)
    total_blocks = math.prod(grid)
    args = {**_scratch(kernel, dict(sizes or {})), **args}
    buffers, shapes, scalars = _bind(kernel, args)
    steps = Steps(DEFAULT_MAX_STEPS if max_steps is None else int(max_steps),
                  deadline=None if time_limit_s is None else time.process_time() + time_limit_s,
                  seconds=time_limit_s)

    with deep_recursion(), np.errstate(all="ignore"):
        if counters is not None:
            counters.start(kernel, grid, block)
        body = StmtCompiler(kernel, counters, scalars if races else None).block(kernel.body)
        per_chunk = _blocks_per_chunk(kernel, threads)
        marks = global_marks(kernel, buffers) if races else None
        for first in range(0, total_blocks, per_chunk):
            count = min(per_chunk, total_blocks - first)
            state = State(count, threads, block, grid, first, steps, dict(buffers),
                          check_races=races, race_globals=marks)
            state.env.update(scalars)
            body(state, state.full)
    if counters is not None:
        counters.finish()
    return {name: buffers[name].data.reshape(shapes[name]) for name in buffers}


def _scratch(kernel: ir.Kernel, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Zero-filled workspace buffers of the kernel's own (``Launch.scratch``)."""
    out = {}
    for name, count in kernel.launch.scratch:
        param = kernel.param(name)
        elem = cops.scalar_of(param.type.elem)  # type: ignore[union-attr]
        out[name] = np.zeros(int(eval_size_expr(count, sizes)), dtype=elem.numpy)
    return out


def _grid_dim(text: str | int, sizes: dict[str, int]) -> int:
    value = eval_size_expr(text, sizes)
    if isinstance(value, float):
        if not value.is_integer():
            raise KirError(f"launch grid dimension {text!r} = {value} is not a whole number")
        value = int(value)
    if value < 0:
        raise KirError(f"launch grid dimension {text!r} = {value} is negative")
    return int(value)


def _blocks_per_chunk(kernel: ir.Kernel, threads: int) -> int:
    local = sum(
        n.size * (n.elem.count if isinstance(n.elem, VectorType) else 1)
        for n in kernel.body.walk() if isinstance(n, ir.Alloc) and n.space == "local")
    lanes = LANES_PER_CHUNK
    if local:
        lanes = min(lanes, LOCAL_ELEMENTS_PER_CHUNK // local)
    return max(1, lanes // threads)


def _bind(kernel: ir.Kernel, args: dict[str, np.ndarray | int | float]
          ) -> tuple[dict[str, Memory], dict[str, tuple[int, ...]], dict[str, np.generic]]:
    unknown = sorted(set(args) - {p.name for p in kernel.params})
    if unknown:
        raise KirError(f"kernel {kernel.name} has no parameter(s) {', '.join(unknown)}")
    buffers: dict[str, Memory] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    scalars: dict[str, np.generic] = {}
    for param in kernel.params:
        if param.name not in args:
            raise KirError(f"missing argument {param.name!r} of kernel {kernel.name}")
        value = args[param.name]
        if isinstance(param.type, PointerType):
            buffers[param.name], shapes[param.name] = _bind_buffer(param, value)
        elif isinstance(param.type, ScalarType):
            scalars[param.name] = _bind_scalar(param, value)
        else:
            raise KirError(f"parameter {param.name!r}: {param.type} parameters are not "
                           "supported by the interpreter")
    return buffers, shapes, scalars


def _bind_buffer(param: ir.Param, value: object) -> tuple[Memory, tuple[int, ...]]:
    elem = cops.scalar_of(param.type.elem)  # type: ignore[union-attr]
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise KirError(f"argument {param.name!r}: expected a numeric array for "
                       f"{param.type}, got {array.dtype}")
    data = np.array(array, dtype=elem.numpy, copy=True).reshape(-1)
    if elem.name == "bf16":
        data = cops.round_bf16(data)
    return Memory(param.name, data, data.size, "global"), array.shape


def _bind_scalar(param: ir.Param, value: object) -> np.generic:
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    elif isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise KirError(f"argument {param.name!r}: expected a number for {param.type}, "
                       f"got {type(value).__name__}")
    return cops.const_value(value, param.type)  # type: ignore[arg-type]
