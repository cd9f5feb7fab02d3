"""The tiled matmuls of GEMM tutorials, which check no bounds: what ``warp-tile-matmul``
proves of them (the guarded form is :mod:`kir.rewrites.matmul.tiled_nest`).

Such a kernel is right only where its sizes are whole tiles, and it says nothing of M, N and
K itself: the bounds come from its launch. A grid of ``M / T`` blocks along the rows covers
exactly ``(M / T) * T`` rows (``ceil(M / T)`` covers M where the kernel is right), so the
rebuilt kernel guards its loads and its store with those, which changes nothing where the
original is defined. The tutorial style also walks its operands with offsets advanced in the
k loop (``A += T; B += T * N``) and may index a 1-D block of T·T threads as
``threadIdx.x / T`` and ``threadIdx.x % T``; both are read here as what they are: affine in
the tile index, and a T x T block.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping

from kir.analysis import strip_casts
from kir.analysis.affine import Poly, poly_product, poly_sum
from kir.ir import (
    Alloc,
    Assign,
    Barrier,
    Binary,
    Block,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Node,
    Special,
    Stmt,
    Store,
    Var,
    transform,
)
from kir.ir.printer import format_name, print_expr
from kir.ir.types import BOOL, I32
from kir.rewrites.matmul.tiled_nest import (
    BX,
    BY,
    TX,
    TY,
    MatmulNest,
    Refused,
    _lin,
    IndexPolys,
    split_stride,
    stride_text,
    tile_operands,
)
from kir.rewrites.matmul.warp_tiles import PREFIX, Gemm
from kir.rewrites.mma_tile import inner_product

ROW, COL = f"{PREFIX}row", f"{PREFIX}col"  # the kept epilogue's row and column, renamed later


def thread_view(kernel: Kernel, tile: int) -> Kernel:
    """A 1-D block of T·T threads read as T x T: ``thread.x / T`` as thread.y and
    ``thread.x % T`` as thread.x. Only for recognition (the kernel is rebuilt from a
    template); refused where thread.x is used any other way."""
    if tuple(kernel.launch.block) != (tile * tile, 1, 1):
        return kernel
    split = 0

    def visit(n: Node) -> Node | None:
        nonlocal split
        if isinstance(n, Binary) and n.op in ("/", "%"):
            left, right = strip_casts(n.left), strip_casts(n.right)
            if (isinstance(left, Special) and (left.kind, left.axis) == ("thread", "x")
                    and isinstance(right, Const) and right.value == tile):
                split += 1
                return Special("thread", "y" if n.op == "/" else "x", n.type)
        return None

    total = sum(1 for n in kernel.body.walk()
                if isinstance(n, Special) and (n.kind, n.axis) == ("thread", "x"))
    body = transform(kernel.body, visit)
    if split != total or any(isinstance(n, Special) and n.kind == "thread" and n.axis != "x"
                             for n in kernel.body.walk()):
        raise Refused("a 1-D block uses threadIdx other than as x / T and x % T")
    return dataclasses.replace(kernel, body=body)


class _Values:
    """Polynomials of index expressions in a kernel whose top level reassigns offsets: the
    values inside the k-tile loop (an offset advanced by ``v = v + c`` once per iteration is
    ``v0 + c * i`` there) and after it (offsets the loop advances are unknown there)."""

    def __init__(self, polys: IndexPolys, kernel: Kernel, holder: int, tiles: For,
                 tile_step: Poly) -> None:
        self.polys = polys
        env: dict[str, Poly | None] = {}
        for s in kernel.body.stmts[:holder]:
            if isinstance(s, (Declare, Assign)):
                value = s.init if isinstance(s, Declare) else s.value
                env[s.name] = None if value is None else self.polys(value, env)
        self.inside = dict(env)
        self.advanced: dict[str, int] = {}  # name -> index of its advance in the loop body
        t = tiles.var
        for i, s in enumerate(tiles.body.stmts):
            if not isinstance(s, Assign):
                continue
            step = self._advance(s, env)
            if step is None or s.name in self.advanced or env.get(s.name) is None:
                raise Refused(f"the k-tile loop changes {s.name!r} other than by a constant "
                              "step per iteration")
            per_t = _divide(step, tile_step)
            if per_t is None:
                raise Refused(f"{s.name!r} advances by a step that the loop's step does "
                              "not divide")
            self.inside[s.name] = poly_sum(env[s.name], poly_product(per_t, {(t,): 1}) or {})
            self.advanced[s.name] = i
        self.after = {n: (None if n in self.advanced else p) for n, p in env.items()}

    def _advance(self, s: Assign, env) -> Poly | None:
        v = s.value
        if isinstance(strip_casts(v), Binary) and strip_casts(v).op == "+":
            v = strip_casts(v)
            for mine, other in ((v.left, v.right), (v.right, v.left)):
                if isinstance(strip_casts(mine), Var) and strip_casts(mine).name == s.name:
                    step = self.polys(other, env)
                    if step is not None and not any(s.name in m for m in step):
                        return step
        return None

    def in_loop(self, e: Expr) -> Poly | None:
        return self.polys(e, self.inside)

    def after_loop(self, e: Expr) -> Poly | None:
        return self.polys(e, self.after)


def _divide(p: Poly, step: Poly) -> Poly | None:
    """``p / step`` for a constant ``step`` dividing every coefficient, else None."""
    if set(step) != {()}:
        return None
    d = step[()]
    if d == 0 or any(c % d for c in p.values()):
        return None
    return {m: c // d for m, c in p.items()}


def _bound(grid: str, tile: int, params: Mapping[str, str]) -> Expr:
    """The rows (or columns) a grid dimension of ``X / T`` or ``ceil(X / T)`` blocks covers,
    as an expression over the parameter bound to X: ``(P / T) * T`` or ``P``."""
    text = grid.replace(" ", "")
    found = re.fullmatch(rf"(ceil\()?([A-Za-z_]\w*)/{tile}(\))?", text)
    if not found or bool(found.group(1)) != bool(found.group(3)) or found.group(2) not in params:
        raise Refused(f"the launch's {grid!r} blocks do not say how many rows or columns the "
                      f"unchecked kernel covers (X / {tile} or ceil(X / {tile}), X a "
                      "parameter's size)")
    p = Var(params[found.group(2)], I32)
    if found.group(1):
        return p
    return Binary("*", Binary("/", p, Const(tile, I32), I32), Const(tile, I32), I32)


def recognize_unguarded(kernel: Kernel, loop: For,
                        scalar_exprs: Mapping[str, str]) -> MatmulNest:
    """The unchecked tiled matmul whose inner product is ``loop``; raises :class:`Refused`."""
    product = inner_product(loop)
    assert product is not None
    acc, (first, second) = product
    trip = loop.cond.right if isinstance(loop.cond, Binary) else None
    tile = trip.value if isinstance(trip, Const) else 0
    if not (isinstance(loop.init, Const) and loop.init.value == 0 and tile >= 8):
        raise Refused(f"{loop.label} does not count k = 0, 1, ... to a constant tile size")
    view = thread_view(kernel, tile)
    bx, by, bz = view.launch.block
    if (bx, by, bz) not in ((tile, tile, 1), (tile * tile, 1, 1)):
        raise Refused(f"needs T x T threads (or a 1-D block of T·T), not {kernel.launch.block}")
    if any(p.name.startswith(PREFIX) for p in kernel.params):
        raise Refused(f"a parameter name starts with {PREFIX!r}, which the rule's names use")
    stmts = view.body.stmts
    holder = next(i for i, s in enumerate(stmts) if any(n is loop or (
        isinstance(n, For) and n.label == loop.label) for n in s.walk()))
    tiles = stmts[holder]
    inner = next((s for s in tiles.body.stmts if isinstance(s, For) and s.label == loop.label),
                 None) if isinstance(tiles, For) else None
    if inner is None:
        raise Refused("the inner product is not directly inside a top-level k-tile loop")
    t = tiles.var
    polys = IndexPolys(view)
    step = polys(tiles.update)  # the loop variable is no offset the loop body advances
    by_tiles = step == _lin((1, t), (1, ""))
    if not (by_tiles or step == _lin((1, t), (tile, ""))):
        raise Refused(f"{tiles.label} does not step by 1 tile or by {tile}")
    values = _Values(polys, view, holder, tiles, {(): 1} if by_tiles else {(): tile})
    k_base = _lin((tile, t)) if by_tiles else _lin((1, t))
    products = inner_product(inner)
    assert products is not None
    loads = tile_operands(view, products[1], values.in_loop, inner.var, tile)

    # Plain tile loads, before the loop advances its offsets.
    stores: dict[str, Load] = {}
    first_advance = min(values.advanced.values(), default=len(tiles.body.stmts))
    for i, s in enumerate(tiles.body.stmts):
        if s is inner or isinstance(s, Barrier) or i in values.advanced.values():
            continue
        if isinstance(s, Declare) and not any(isinstance(n, Load) for n in s.walk()):
            continue
        if not (isinstance(s, Store) and s.buffer in loads.values() and s.buffer not in stores
                and isinstance(s.value, Load) and i < first_advance):
            raise Refused("the k-tile loop does more than load the two tiles (before it "
                          "advances its offsets) and multiply")
        if values.in_loop(s.index) != _lin((tile, TY), (1, TX)):
            raise Refused(f"{s.buffer!r} is not written at [thread.y][thread.x]")
        stores[s.buffer] = s.value

    # Rows along one block axis, columns along the other.
    for row_axis, (rb, cb) in ((1, (BY, BX)), (0, (BX, BY))):
        row, col = _lin((tile, rb), (1, TY)), _lin((tile, cb), (1, TX))
        k_a, k_b = poly_sum(k_base, _lin((1, TX))), poly_sum(k_base, _lin((1, TY)))
        try:
            lda = _stride(values.in_loop(stores[loads["a"]].index), k_a, row)
            ldb = _stride(values.in_loop(stores[loads["b"]].index), col, k_b)
        except (Refused, KeyError):
            continue
        break
    else:
        raise Refused("the tiles are not loaded as A[row][k] and B[k][col], row-major")

    ints = {p.name for p in kernel.params if p.type == I32}
    params = {expr: name for name, expr in scalar_exprs.items()
              if expr.isidentifier() and name in ints}
    grid = view.launch.grid
    m_bound = _bound(grid[row_axis], tile, params)
    n_bound = _bound(grid[1 - row_axis], tile, params)
    k_bound = _k_bound(tiles, values, t, tile, by_tiles)

    for s in stmts[:holder]:
        if isinstance(s, Alloc) and s.name in loads.values():
            continue
        if isinstance(s, (Declare, Assign)) and not any(isinstance(n, Load) for n in s.walk()):
            if s.name == acc and not (isinstance(s, Declare) and isinstance(s.init, Const)
                                      and s.init.value == 0):
                raise Refused(f"{acc!r} does not start at 0")
            continue
        raise Refused("the kernel does more before its k-tile loop than set up indices")
    epilogue = _epilogue(kernel, stmts[holder + 1:], acc, values, row, col, m_bound, n_bound)

    gemm = Gemm(format_name(stores[loads["a"]].buffer), format_name(stores[loads["b"]].buffer),
                stride_text(lda), stride_text(ldb), print_expr(m_bound), print_expr(n_bound),
                print_expr(k_bound))
    return MatmulNest(gemm, (epilogue,), ((ROW, I32),), ((COL, I32),), acc,
                      _param_of(m_bound), _param_of(n_bound))


def _param_of(bound: Expr) -> str:
    return next(n.name for n in bound.walk() if isinstance(n, Var))


def _stride(index: Poly | None, unit: Poly, row: Poly) -> Poly:
    if index is None:
        raise Refused("a tile is not loaded at an affine index")
    return split_stride(index, unit, row)


def _k_bound(tiles: For, values: _Values, t: str, tile: int, by_tiles: bool) -> Expr:
    """The k the loop covers: ``t < K`` stepping by T covers K where the kernel is right;
    ``t < K / T`` counting tiles covers ``(K / T) * T``."""
    cond = tiles.cond
    if not (isinstance(tiles.init, Const) and tiles.init.value == 0 and isinstance(cond, Binary)
            and cond.op == "<" and values.in_loop(cond.left) == {(t,): 1}):
        raise Refused(f"{tiles.label} does not count from 0 with `{t} < bound`")
    bound = strip_casts(cond.right)
    if isinstance(bound, Var) and bound.name in values.polys.defs:
        bound = strip_casts(values.polys.defs[bound.name])
    if not by_tiles and isinstance(bound, Var):
        return Var(bound.name, I32)
    if by_tiles and isinstance(bound, Binary) and bound.op == "/" and isinstance(
            strip_casts(bound.left), Var) and isinstance(strip_casts(bound.right), Const) \
            and strip_casts(bound.right).value == tile:
        k = Var(strip_casts(bound.left).name, I32)
        return Binary("*", Binary("/", k, Const(tile, I32), I32), Const(tile, I32), I32)
    raise Refused(f"{tiles.label} does not run to a k size (K stepping by {tile}, or K / "
                  f"{tile} tiles)")


def _epilogue(kernel: Kernel, after: list[Stmt], acc: str, values: _Values, row: Poly,
              col: Poly, m_bound: Expr, n_bound: Expr) -> Stmt:
    """The one unchecked store after the loop, ``C[row * ldc + col] = f(acc, C[same])``,
    rewritten over the template's row and column and guarded by the grid's bounds."""
    if len(after) != 1 or not isinstance(after[0], Store):
        raise Refused("after the k loop there must be exactly one store of the sum")
    store = after[0]
    index = values.after_loop(store.index)
    if index is None:
        raise Refused("the output is stored at an index the loop's offsets leave unknown")
    ldc = _stride(index, col, row)
    new_index = Binary("+", Binary("*", Var(ROW, I32), _expr(ldc), I32), Var(COL, I32), I32)
    params = {p.name for p in kernel.params if not p.is_buffer}

    def visit(n: Node) -> Node | None:
        if isinstance(n, Load) and n.buffer == store.buffer:
            if values.after_loop(n.index) != index:
                raise Refused("the epilogue reads the output elsewhere than its own element")
            return Load(n.buffer, new_index, n.type)
        return None

    value = transform(store.value, visit)
    for n in value.walk():
        if isinstance(n, Special) or (isinstance(n, Var) and n.name not in
                                      params | {acc, ROW, COL}):
            raise Refused("the epilogue reads something besides the sum, the output element "
                          "and parameters")
        if isinstance(n, Load) and n.buffer != store.buffer:
            raise Refused("the epilogue reads another buffer")
    guard = Binary("&&", Binary("<", Var(ROW, I32), m_bound, BOOL),
                   Binary("<", Var(COL, I32), n_bound, BOOL), BOOL)
    return If(guard, Block((Store(store.buffer, new_index, value, loc=store.loc),)),
              loc=store.loc)


def _expr(p: Poly) -> Expr:
    (mono, coef), = p.items()
    return Var(mono[0], I32) if mono else Const(coef, I32)


