"""mma-tile: compute a shared-memory tiled matmul's inner product with 8x8 warp matrices."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from kir import analysis
from kir.analysis import single_defs
from kir.errors import KirError
from kir.ir import (
    Alloc,
    Assign,
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
    MatrixFill,
    MatrixLoad,
    MatrixMultiplyAccumulate,
    MatrixStore,
    Special,
    Stmt,
    Var,
    const,
)
from kir.ir.types import BOOL, F32, I32, MatrixType
from kir.ir.verify import verify
from kir.rules import LoopRule, Match, NoParams, NotApplicable, RuleContext

FRAG = MatrixType(F32, 8, 8)
_PROBES = ((0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (3, 5, 7), (6, 2, 9), (11, 13, 4))


def _thread_axis(e: Expr, defs: Mapping[str, Expr]) -> str | None:
    """"x"/"y" when ``e`` is thread.x/.y (under casts, or a local defined as one)."""
    for _ in range(4):
        while isinstance(e, Cast):
            e = e.value
        if isinstance(e, Var) and e.name in defs:
            e = defs[e.name]
            continue
        break
    if isinstance(e, Special) and e.kind == "thread" and e.axis in ("x", "y"):
        return e.axis
    return None


def _evaluate(e: Expr, point: tuple[int, int, int], k: str, defs) -> int | None:
    """``e`` at (thread.y, thread.x, k) = ``point``; None unless it is integer + - * over
    those and constants."""
    axis = _thread_axis(e, defs)
    if axis is not None:
        return point[0] if axis == "y" else point[1]
    if isinstance(e, Var) and e.name == k:
        return point[2]
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Cast) and e.type.is_int:  # type: ignore[union-attr]
        return _evaluate(e.value, point, k, defs)
    if isinstance(e, Binary) and e.op in ("+", "-", "*"):
        left, right = _evaluate(e.left, point, k, defs), _evaluate(e.right, point, k, defs)
        if left is None or right is None:
            return None
        return left + right if e.op == "+" else left - right if e.op == "-" else left * right
    return None


def _affine(index: Expr, k: str, defs) -> tuple[int, int, int, int] | None:
    """(c0, c_y, c_x, c_k) with ``index == c0 + c_y*ty + c_x*tx + c_k*k``, checked at probes."""
    values = [_evaluate(index, p, k, defs) for p in _PROBES]
    if any(v is None for v in values):
        return None
    c0 = values[0]
    cy, cx, ck = (values[i] - c0 for i in (1, 2, 3))  # type: ignore[operator]
    for (y, x, kk), v in zip(_PROBES, values):
        if v != c0 + cy * y + cx * x + ck * kk:
            return None
    return c0, cy, cx, ck  # type: ignore[return-value]


def _lin(c0: int, terms: list[tuple[int, Expr]]) -> Expr:
    expr: Expr | None = const(c0) if c0 else None
    for coef, var in terms:
        if coef == 0:
            continue
        term = var if coef == 1 else Binary("*", var, const(coef), I32)
        expr = term if expr is None else Binary("+", expr, term, I32)
    return expr if expr is not None else const(0)


@dataclass(frozen=True)
class InnerProduct:
    """An inner-product loop ``acc = acc + A[..] * B[..]`` and what the rewrite needs: the
    T x T tile size, the operands (per ``a`` / ``b``: buffer, index coefficients, row stride,
    transposed) and where ``acc`` is declared and the loop sits at the kernel's top level.
    ``refusal``: why it cannot use warp matrices, for a loop still listed so that the
    search sees the sites it saw before; a later change stops listing such loops."""

    loop: For
    acc: str
    tile: int = 0
    operands: dict | None = None
    top: tuple[int, int] | None = None
    refusal: str = ""


class MmaTile(LoopRule):
    """Compute a shared-memory tiled matmul's inner product with 8x8 warp matrices.

    Encodes Apple's SIMD-group matrix functions (MSL specification §6.7,
    ``simdgroup_float8x8`` / ``simdgroup_multiply_accumulate``; MLX's steel GEMM kernels use
    them) and, on CUDA, the warp-level matrix practice of WMMA / ``mma.sync`` (CUDA C++
    Programming Guide, "Warp Matrix Functions"). Site: the inner-product loop of the classic
    shared-memory tiled SGEMM (CUDA Best Practices Guide, "Shared Memory in Matrix
    Multiplication"): ``for k in [0, T): acc += As[ty][k] * Bs[k][tx]`` in a T x T block.

    The block keeps its shape and its per-thread C stores: the T x T output tile is (T/8)^2
    8x8 tiles for T*T/32 = 2 (T/8)^2 warps, so two warps share each tile and split the k steps
    (even / odd 8-wide steps). After the loop that holds the inner product, each warp stores
    its partial tile to a shared staging array, and every thread adds its two partials to its
    own ``acc``: the bounds-checked store of ``acc`` is untouched, so ragged edges stay right.

    Checks: T = block.x = block.y, T a multiple of 16, block.z = 1; the loop is ``k = 0; k <
    T; k + 1`` with a body of exactly ``acc = acc + A * B``, f32 loads from shared arrays whose
    indices are affine in (thread.y, k) and (k, thread.x) with unit stride along one of them
    (transposed tiles load transposed); ``acc`` is an f32 local declared at the kernel's top
    level and not named elsewhere in the statement that holds the loop; the result passes the
    verifier (uniform barriers, warp-uniform matrix operations). It cannot check that the
    shared tiles are fully written before the loop: the original's barriers must say so, and
    the search validates every candidate against the reference.
    """

    name = "mma-tile"

    def plan_loop(self, kernel: Kernel, loop: For) -> InnerProduct | NotApplicable:
        site = loop.label
        product = inner_product(loop)
        if product is None:
            return NotApplicable(f"{site} is not `acc = acc + x[..] * y[..]` over f32")
        acc, loads = product
        bx, by, bz = kernel.launch.block
        trip = analysis.constant_trip_count(loop)
        if not (isinstance(loop.init, Const) and loop.init.value == 0 and trip is not None):
            return InnerProduct(loop, acc,
                                refusal=f"{site} does not count k = 0, 1, ... to a constant")
        tile = trip
        if not (bx == by == tile and bz == 1 and tile % 16 == 0):
            return InnerProduct(loop, acc, refusal=(
                f"needs a block of T x T threads with T = trip count of {site} and a "
                f"multiple of 16; block is {kernel.launch.block}, T = {tile}"))
        operands = _operands(kernel, loop, loads)
        if isinstance(operands, NotApplicable):
            return InnerProduct(loop, acc, refusal=operands.reason)
        top = _top_level(kernel, loop, acc)
        if isinstance(top, NotApplicable):
            return InnerProduct(loop, acc, refusal=top.reason)
        return InnerProduct(loop, acc, tile, operands, top)

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        plan: InnerProduct = match.plan
        if plan.refusal:
            return NotApplicable(plan.refusal)
        assert plan.operands is not None and plan.top is not None
        return _rewrite(kernel, plan.loop, plan.acc, plan.operands, plan.top, plan.tile)


def inner_product(loop: For) -> tuple[str, tuple[Load, Load]] | None:
    """(acc, (load, load)) when the body is exactly ``acc = acc + l1 * l2`` in f32."""
    if len(loop.body.stmts) != 1 or not isinstance(loop.body.stmts[0], Assign):
        return None
    s = loop.body.stmts[0]
    v = s.value
    if not (isinstance(v, Binary) and v.op == "+" and v.type == F32):
        return None
    acc = Var(s.name, F32)
    term = v.right if v.left == acc else v.left if v.right == acc else None
    if not (isinstance(term, Binary) and term.op == "*" and isinstance(term.left, Load)
            and isinstance(term.right, Load) and term.left.type == term.right.type == F32):
        return None
    return s.name, (term.left, term.right)


def _operands(kernel: Kernel, loop: For, loads: tuple[Load, Load]):
    """((buffer, c0, cy, cx, ck, transpose) for A, same for B), or NotApplicable."""
    defs = single_defs(kernel)
    shared = {a.name for a in kernel.body.walk() if isinstance(a, Alloc)
              and a.space == "shared" and a.elem == F32 and not a.dynamic}
    found: dict[str, tuple] = {}
    for load in loads:
        if load.buffer not in shared:
            return NotApplicable(f"{load.buffer!r} is not a static f32 shared array")
        coef = _affine(load.index, loop.var, defs)
        if coef is None:
            return NotApplicable(f"index into {load.buffer!r} is not affine in "
                                 f"thread.y, thread.x and {loop.var}")
        c0, cy, cx, ck = coef
        if cx == 0 and cy != 0 and ck != 0 and "a" not in found:
            # A row-major when unit stride runs along k (columns), transposed when along rows.
            if ck == 1:
                found["a"] = (load.buffer, coef, cy, False)
            elif cy == 1:
                found["a"] = (load.buffer, coef, ck, True)
        elif cy == 0 and cx != 0 and ck != 0 and "b" not in found:
            if cx == 1:
                found["b"] = (load.buffer, coef, ck, False)
            elif ck == 1:
                found["b"] = (load.buffer, coef, cx, True)
    if set(found) != {"a", "b"}:
        return NotApplicable("the loads are not As[thread.y][k] and Bs[k][thread.x] with unit "
                             "stride along one index")
    if min(found["a"][2], found["b"][2]) < 8:
        return NotApplicable("tile rows overlap (row stride under 8)")
    return found


def _top_level(kernel: Kernel, loop: For, acc: str):
    """(index of acc's Declare, index of the top-level statement holding ``loop``)."""
    stmts = kernel.body.stmts
    decl = next((i for i, s in enumerate(stmts) if isinstance(s, Declare) and s.name == acc
                 and s.type == F32), None)
    if decl is None:
        return NotApplicable(f"{acc!r} is not an f32 local declared at the kernel's top level")
    holder = next((i for i, s in enumerate(stmts)
                   if any(n is loop for n in s.walk())), None)
    if holder is None or holder <= decl:
        return NotApplicable(f"the loop is not after {acc!r}'s declaration at top level")
    others = [n for n in stmts[holder].walk() if n is not loop.body.stmts[0]
              and ((isinstance(n, Var) and n.name == acc) or
                   (isinstance(n, (Assign, Declare)) and n.name == acc))]
    # The Var nodes inside the loop's own assignment are reached through it; drop those.
    inside = set(map(id, loop.body.stmts[0].walk()))
    if any(id(n) not in inside for n in others):
        return NotApplicable(f"{acc!r} is used outside the inner product in the same loop nest")
    return decl, holder


def _rewrite(kernel: Kernel, loop: For, acc: str, ops: dict, top: tuple[int, int],
             tile: int) -> Kernel | NotApplicable:
    _, holder = top
    taken = {n.name for n in kernel.body.walk() if isinstance(n, (MatrixFill, MatrixLoad))}

    def fresh(base: str) -> str:
        name = analysis.fresh_name(kernel, base, taken)
        taken.add(name)
        return name

    warp, half, row, col = (fresh(n) for n in ("mma_warp", "mma_half", "mma_row", "mma_col"))
    frag, fa, fb, stage, k = (fresh(n) for n in ("mma_acc", "mma_a", "mma_b", "mma_stage",
                                                 "mma_k"))
    per_row, tiles = tile // 8, (tile // 8) ** 2
    v = {name: Var(name, I32) for name in (warp, half, row, col, k)}
    loc = loop.loc
    setup: list[Stmt] = [
        Declare(warp, I32, Cast(Special("warp"), I32), loc=loc),
        Declare(half, I32, Binary("/", v[warp], const(tiles), I32), loc=loc),
        Declare(row, I32, Binary("*", Binary("/", Binary("%", v[warp], const(tiles), I32),
                                             const(per_row), I32), const(8), I32), loc=loc),
        Declare(col, I32, Binary("*", Binary("%", Binary("%", v[warp], const(tiles), I32),
                                             const(per_row), I32), const(8), I32), loc=loc),
        MatrixFill(frag, FRAG, const(0.0), loc=loc),
    ]
    a_buf, (a0, ay, _, ak), a_stride, a_t = ops["a"]
    b_buf, (b0, _, bx, bk), b_stride, b_t = ops["b"]
    body = Block((
        MatrixLoad(fa, FRAG, a_buf, _lin(a0, [(ay, v[row]), (ak, v[k])]), const(a_stride),
                   a_t, loc=loop.body.stmts[0].loc),
        MatrixLoad(fb, FRAG, b_buf, _lin(b0, [(bk, v[k]), (bx, v[col])]), const(b_stride),
                   b_t, loc=loop.body.stmts[0].loc),
        MatrixMultiplyAccumulate(frag, fa, fb, loc=loop.body.stmts[0].loc),
    ), loc=loop.body.loc)
    # Two warps per output tile: half h takes the 8-wide k steps h, h + 2, ...
    steps = For(loop.label, k, I32, Binary("*", v[half], const(8), I32),
                Binary("<", v[k], const(tile), BOOL),
                Binary("+", v[k], const(16), I32), body, loc=loop.loc)
    ty, tx = Cast(Special("thread", "y"), I32), Cast(Special("thread", "x"), I32)
    mine = _lin(0, [(tile, ty), (1, tx)])
    finish: list[Stmt] = [
        MatrixStore(stage, _lin(0, [(tile * tile, v[half]), (tile, v[row]), (1, v[col])]),
                    const(tile), frag, loc=loc),
        Barrier("block", loc=loc),
        Assign(acc, Binary("+", Var(acc, F32), Binary(
            "+", Load(stage, mine, F32),
            Load(stage, Binary("+", const(tile * tile), mine, I32), F32), F32), F32), loc=loc),
    ]
    stmts = list(kernel.body.stmts)
    holder_stmt = analysis.replace_stmt(
        dataclasses.replace(kernel, body=Block((stmts[holder],))), loop, steps).body.stmts[0]
    stmts = stmts[:holder] + setup + [holder_stmt] + finish + stmts[holder + 1:]
    alloc = Alloc(stage, F32, 2 * tile * tile, "shared", loc=loc)
    first = next((i for i, s in enumerate(stmts) if not isinstance(s, Alloc)), len(stmts))
    stmts.insert(first, alloc)
    result = dataclasses.replace(kernel, body=dataclasses.replace(kernel.body,
                                                                  stmts=tuple(stmts)))
    try:
        verify(result)
    except KirError as err:
        return NotApplicable(f"the rewritten kernel does not verify: {err.message}")
    return result


RULES = [MmaTile()]
