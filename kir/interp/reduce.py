"""Whole-loop evaluation of counted sum loops: ``for (k = a; k < b; k += c) acc += E(k);``.

Dot products and other inner reductions dominate real kernels (attention, GEMV, norms)
and cost one interpreted iteration each. When the counter is uniform across lanes and the
body is a single accumulation whose term reads no memory the loop writes, every term can
be evaluated at once with the counter bound to a ``[K, 1]`` column (expressions broadcast
to ``[K, lanes]``), then summed with ``np.add.accumulate`` along the iteration axis: the
same sequential order and rounding as the loop, so results are bit-identical.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from kir import ir
from kir.interp.exprs import Hoist, compile_expr
from kir.interp.state import State
from kir.ir.types import ScalarType, VectorType

MAX_ELEMENTS = 1 << 22
"""Iterations x lanes evaluated at once at most; longer loops run iteration by iteration."""

_UNSUPPORTED = (ir.Shuffle, ir.WarpReduce, ir.MakeVector, ir.Component)

# The iteration count of ``k op bound`` from k = start stepping by ``step``, or None.
_TRIPS: dict[str, Callable[[int, int, int], int | None]] = {
    "<": lambda s, b, c: max(0, -(-(b - s) // c)) if c > 0 else None,
    "<=": lambda s, b, c: max(0, (b - s) // c + 1) if c > 0 else None,
    ">": lambda s, b, c: max(0, -(-(s - b) // -c)) if c < 0 else None,
    ">=": lambda s, b, c: max(0, (s - b) // -c + 1) if c < 0 else None,
    "!=": lambda s, b, c: (b - s) // c if c and (b - s) % c == 0 and (b - s) // c >= 0
    else None,
}

SumLoop = Callable[[State, np.ndarray], bool]


def compile_sum_loop(loop: ir.For, hoist: Hoist, types: dict[str, object]) -> SumLoop | None:
    """A closure running ``loop`` as one vectorized sum, returning False when this run does
    not qualify (counter or bound not uniform, too many iterations) so the caller runs the
    loop normally; None when the loop never qualifies. Call it after the counter's init."""
    shape = _match(loop)
    if shape is None:
        return None
    acc, term, bound_expr, step = shape
    acc_type = types.get(acc)
    if acc_type != term.type or not isinstance(acc_type, ScalarType) \
            or acc_type.name == "bf16":
        return None
    trips = _TRIPS[loop.cond.op]  # type: ignore[attr-defined]
    term_fn = compile_expr(term, loop.loc, hoist)
    bound_fn = compile_expr(bound_expr, loop.loc, hoist)
    var, dtype = loop.var, loop.type.numpy
    info = np.iinfo(dtype)

    def run(st: State, mask: np.ndarray) -> bool:
        start, bound = st.env[var], bound_fn(st, mask)
        if type(start) is np.ndarray or type(bound) is np.ndarray:
            return False
        start, bound = int(start), int(bound)
        count = trips(start, bound, step)
        if count is None or count * st.n > MAX_ELEMENTS \
                or not info.min <= start + count * step <= info.max:
            return False
        if st.steps.count + count > st.steps.limit:
            return False  # the iteration-by-iteration run reports it, naming the loop
        st.steps.count += count
        if count == 0:
            return True
        counters = np.arange(start, start + count * step, step, dtype=np.int64)
        st.env[var] = counters.astype(dtype)[:, None]
        try:
            terms = term_fn(st, mask)
        finally:
            st.env[var] = np.array(start + count * step).astype(dtype)[()]
        acc_value = st.env[acc]
        rows = np.empty((count + 1, st.n), dtype=acc_type.numpy)
        rows[0] = acc_value
        rows[1:] = terms
        total = np.add.accumulate(rows, axis=0)[-1]
        if mask is st.full:
            st.env[acc] = total
        else:
            st.env[acc] = np.where(mask, total, acc_value)
        return True
    return run


def _match(loop: ir.For) -> tuple[str, ir.Expr, ir.Expr, int] | None:
    """(accumulator, term, bound, step) of a counted single-accumulation loop, or None."""
    cond, update, var = loop.cond, loop.update, loop.var
    if not (isinstance(cond, ir.Binary) and cond.op in _TRIPS and cond.left == ir.Var(
            var, loop.type) and loop.type.is_int):
        return None
    if not (isinstance(update, ir.Binary) and update.op in ("+", "-")
            and update.left == ir.Var(var, loop.type) and isinstance(update.right, ir.Const)):
        return None
    step = int(update.right.value) * (1 if update.op == "+" else -1)
    if len(loop.body.stmts) != 1 or not isinstance(loop.body.stmts[0], ir.Assign):
        return None
    assign = loop.body.stmts[0]
    value = assign.value
    if not (isinstance(value, ir.Binary) and value.op == "+"):
        return None
    acc = assign.name
    if isinstance(value.left, ir.Var) and value.left.name == acc:
        term = value.right
    elif isinstance(value.right, ir.Var) and value.right.name == acc:
        term = value.left
    else:
        return None
    for node in list(term.walk()) + list(cond.right.walk()):
        if isinstance(node, _UNSUPPORTED) or isinstance(node.type, VectorType):
            return None
        if isinstance(node, ir.Var) and node.name == acc:
            return None
    if any(isinstance(n, ir.Var) and n.name == var for n in cond.right.walk()):
        return None
    return acc, term, cond.right, step

