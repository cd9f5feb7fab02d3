"""What ``warp-tile-matmul`` proves of a kernel: that a shared-memory tiled nest computes
C = A·B (B stored K x N, or N x K as a linear layer's weight is: C = A·Wᵀ), and the pieces of it the warp-tiled template needs (operands, strides, bounds, the
epilogue and the locals it reads as the row and the column).

Index expressions are compared as polynomials (:mod:`kir.analysis.affine`) over the hardware
indices, the loop variables and the parameters, with single-definition locals substituted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from kir.analysis import conjuncts, single_defs
from kir.analysis.affine import (
    Poly,
    poly_product,
    poly_sum,
    special_atom,
    substitute_values,
    to_poly,
)
from kir.ir import (
    Alloc,
    Barrier,
    Binary,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Select,
    Special,
    Stmt,
    Store,
    Var,
)
from kir.ir.printer import format_name
from kir.ir.types import F32, Type
from kir.rewrites.matmul.warp_tiles import PREFIX, Gemm
from kir.rewrites.mma_tile import inner_product

TY, TX, BY, BX = (special_atom(Special("thread", "y")), special_atom(Special("thread", "x")),
                  special_atom(Special("block", "y")), special_atom(Special("block", "x")))


@dataclass(frozen=True)
class MatmulNest:
    """A tiled matmul as the template needs it: the operands and bounds (``gemm``), the
    statements after the k loop (``epilogue``, run once per output element), the locals it
    reads as the output row and column, the accumulator, and the parameters bounding M and
    N (for the new grid). ``refusal`` says why a listed inner-product loop cannot be used."""

    gemm: Gemm | None = None
    epilogue: tuple[Stmt, ...] = ()
    rows: tuple[tuple[str, Type], ...] = ()  # (local, its type)
    cols: tuple[tuple[str, Type], ...] = ()
    acc: str = ""
    m_param: str = ""
    n_param: str = ""
    refusal: str = ""
    grid_z: str = "1"  # the launch's z extent, kept where block.z indexes a batch


class Refused(Exception):
    """Why the nest does not have the shape the rule rebuilds."""


class IndexPolys:
    """Index expression -> polynomial over hardware indices, loop variables and parameters,
    with single-definition locals substituted and the block's dimensions as the launch's
    constants (``blockIdx.y * blockDim.y + threadIdx.y`` is the row as much as
    ``blockIdx.y * TILE + threadIdx.y``). ``env`` gives some names values of their own (the
    offsets a tutorial's kernel reassigns); without it, answers are remembered."""

    def __init__(self, kernel: Kernel) -> None:
        self.defs = single_defs(kernel)
        self.dims = {special_atom(Special("block_dim", axis)): int(size)
                     for axis, size in zip("xyz", kernel.launch.block)}
        self._memo: dict[str, Poly | None] = {}

    def __call__(self, e: Expr, env: Mapping[str, Poly | None] | None = None) -> Poly | None:
        memo: dict[str, Poly | None] = self._memo if env is None else {}
        env = env or {}

        def lookup(name: str) -> Poly | None:
            if name in env:
                return env[name]
            if name not in memo:
                memo[name] = None
                memo[name] = to_poly(self.defs[name], lookup) if name in self.defs \
                    else {(name,): 1}
            return memo[name]

        found = to_poly(e, lookup)
        return None if found is None else substitute_values(found, self.dims)


def stride_text(p: Poly) -> str:
    """A stride (one parameter or a constant, as :func:`split_stride` allows) as IR text."""
    (mono, coef), = p.items()
    return format_name(mono[0]) if mono else str(coef)


def _lin(*terms: tuple[int, str]) -> Poly:
    out: Poly = {}
    for coef, atom in terms:
        out = poly_sum(out, {(atom,) if atom else (): coef})
    return out


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _guarded_tile_load(s: Stmt, poly) -> tuple[str, Expr, Expr, Load] | None:
    """(tile, index, condition, global load) for ``T[i] = cond ? X[j] : 0`` or ``if (cond)
    T[i] = X[j]; else T[i] = 0;`` (the same ``T[i]`` in both arms), else None."""
    if isinstance(s, Store) and isinstance(s.value, Select) and isinstance(
            s.value.if_true, Load) and _is_zero(s.value.if_false):
        return s.buffer, s.index, s.value.cond, s.value.if_true
    if isinstance(s, If) and s.orelse is not None and len(s.then.stmts) == 1 \
            and len(s.orelse.stmts) == 1:
        yes, no = s.then.stmts[0], s.orelse.stmts[0]
        if (isinstance(yes, Store) and isinstance(no, Store) and yes.buffer == no.buffer
                and isinstance(yes.value, Load) and _is_zero(no.value)
                and poly(yes.index) is not None and poly(yes.index) == poly(no.index)):
            return yes.buffer, yes.index, s.cond, yes.value
    return None


def split_stride(index: Poly, unit: Poly, row: Poly) -> Poly:
    """The stride s with ``index == s * row + unit``, read off the terms of ``index`` with
    thread.y (which ``row`` holds once and ``unit`` not at all); raises Refused unless s is
    a parameter or a constant and the equation holds."""
    stride: Poly = {}
    for mono, coef in index.items():
        if TY in mono:
            rest = list(mono)
            rest.remove(TY)
            stride = poly_sum(stride, {tuple(rest): coef})
    if not (len(stride) == 1 and len(next(iter(stride))) <= 1):
        raise Refused("a global operand's row stride is not a parameter or a constant")
    product = poly_product(stride, row)
    if product is None or poly_sum(index, poly_sum(product, unit), -1):
        raise Refused("a global operand is not read row-major at [row][k] / [k][col]")
    return stride


def bound_param(e: Expr) -> str | None:
    """P for ``x < P`` with P a variable (under integer casts: C's unsigned comparisons)."""
    if not (isinstance(e, Binary) and e.op == "<"):
        return None
    right = e.right
    while isinstance(right, Cast) and right.type.is_int:  # type: ignore[union-attr]
        right = right.value
    return right.name if isinstance(right, Var) else None


def _bounds(cond: Expr, poly, wanted: list[Poly]) -> list[str]:
    """The parameters P_i in ``cond == x_0 < P_0 && x_1 < P_1`` (either order) whose x_i
    have the polynomials ``wanted``; raises Refused otherwise."""
    found: list[str | None] = [None] * len(wanted)
    for part in conjuncts(cond):
        bound = bound_param(part)
        if bound is None:
            raise Refused("a bounds check is not `index < parameter`")
        p = poly(part.left)  # type: ignore[union-attr]
        hits = [i for i, w in enumerate(wanted) if p == w and found[i] is None]
        if not hits:
            raise Refused("a bounds check tests something other than the row, column or k")
        found[hits[0]] = bound
    if None in found:
        raise Refused("a bounds check is missing (row < M, k < K and col < N are needed)")
    return found  # type: ignore[return-value]


def recognize(kernel: Kernel, loop: For) -> MatmulNest:
    """The tiled matmul whose inner-product loop is ``loop``; raises :class:`Refused`."""
    product = inner_product(loop)
    assert product is not None
    acc, (first, second) = product
    bx, by, bz = kernel.launch.block
    tile = bx
    poly = IndexPolys(kernel)
    if not (bx == by and bz == 1 and len(kernel.launch.grid) >= 2):
        raise Refused(f"needs a square 2-D block, not {kernel.launch.block}")
    if not (isinstance(loop.init, Const) and loop.init.value == 0
            and poly(loop.update) == _lin((1, loop.var), (1, ""))
            and isinstance(loop.cond, Binary) and loop.cond.op == "<"
            and poly(loop.cond.right) == {(): tile}):
        raise Refused(f"{loop.label} does not count k = 0, 1, ... to the tile size {tile}")
    if any(p.name.startswith(PREFIX) for p in kernel.params):
        raise Refused(f"a parameter name starts with {PREFIX!r}, which the rule's names use")
    stmts = kernel.body.stmts
    holder_index = next(i for i, s in enumerate(stmts) if any(n is loop for n in s.walk()))
    tiles = stmts[holder_index]
    if not (isinstance(tiles, For) and loop in tiles.body.stmts):
        raise Refused("the inner product is not directly inside a top-level k-tile loop")
    t = tiles.var
    step = poly(tiles.update)
    if step == _lin((1, t), (1, "")):
        k_base = _lin((tile, t))
    elif step == _lin((1, t), (tile, "")):
        k_base = _lin((1, t))
    else:
        raise Refused(f"{tiles.label} does not step by 1 tile or by {tile}")
    row, col = _lin((tile, BY), (1, TY)), _lin((tile, BX), (1, TX))
    k_a, k_b = poly_sum(k_base, _lin((1, TX))), poly_sum(k_base, _lin((1, TY)))

    loads = tile_operands(kernel, (first, second), poly, loop.var, tile, transposed_b=True)
    transposed = "bt" in loads
    loads = {"a": loads["a"], "b": loads["bt" if transposed else "b"]}
    n_row = _lin((tile, BX), (1, TY))  # B's row staged by thread.y when B is stored N x K

    # The tile loads: As[ty][tx] = A[row][k_a] and Bs[ty][tx] = B[k_b][col] (or, B stored
    # N x K, B[n_row][k_a]: the inner product then reads Bs[tx][k]), guarded.
    staged: dict[str, tuple[str, Poly, list[str]]] = {}
    for s in tiles.body.stmts:
        if s is loop or isinstance(s, (Barrier, Declare)):
            if isinstance(s, Declare) and any(isinstance(n, Load) for n in s.walk()):
                raise Refused("the k-tile loop declares a local from memory")
            continue
        guarded = _guarded_tile_load(s, poly)
        if guarded is None or guarded[0] not in loads.values() or guarded[0] in staged:
            raise Refused("the k-tile loop does more than load the two tiles, each "
                          "bounds-checked with zero outside, and multiply")
        buffer, index_expr, cond, src = guarded
        if poly(index_expr) != _lin((tile, TY), (1, TX)):
            raise Refused(f"{buffer!r} is not written at [thread.y][thread.x]")
        index = poly(src.index)
        if index is None or src.type != F32:
            raise Refused("a tile is not loaded from an f32 buffer at an affine index")
        if buffer == loads["a"]:
            stride = split_stride(index, k_a, row)
            bounds = _bounds(cond, poly, [row, k_a])
        elif transposed:
            stride = split_stride(index, k_a, n_row)
            bounds = _bounds(cond, poly, [k_a, n_row])
        else:
            stride = split_stride(index, col, k_b)
            bounds = _bounds(cond, poly, [k_b, col])
        staged[buffer] = (src.buffer, stride, bounds)
    if set(staged) != set(loads.values()):
        raise Refused("the k-tile loop does not load both tiles")
    a_buf, lda, (m_param, k_param) = staged[loads["a"]]
    b_buf, ldb, (k_param_b, n_param) = staged[loads["b"]]
    if k_param != k_param_b:
        raise Refused("the two tiles are bounded by different k sizes")
    _check_tile_count(tiles, poly, single_defs(kernel), tile, k_param,
                      step == _lin((1, t), (1, "")))

    # Before the k loop: only the tiles, locals without loads and acc = 0.
    for s in stmts[:holder_index]:
        if isinstance(s, Alloc) and s.name in loads.values():
            continue
        if isinstance(s, Declare) and not any(isinstance(n, Load) for n in s.walk()):
            if s.name == acc and not (isinstance(s.init, Const) and s.init.value == 0):
                raise Refused(f"{acc!r} does not start at 0")
            continue
        raise Refused("the kernel does more before its k-tile loop than set up indices")
    epilogue = stmts[holder_index + 1:]
    rows, cols = epilogue_locals(kernel, epilogue, acc, poly, row, col, m_param, n_param)

    gemm = Gemm(format_name(a_buf), format_name(b_buf), stride_text(lda), stride_text(ldb),
                format_name(m_param), format_name(n_param), format_name(k_param), transposed)
    return MatmulNest(gemm, tuple(epilogue), rows, cols, acc, m_param, n_param)


def tile_operands(kernel: Kernel, loads, poly, k: str, tile: int,
                  transposed_b: bool = False) -> dict[str, str]:
    """{"a": As, "b": Bs} for the inner product's loads ``As[ty][k]`` and ``Bs[k][tx]`` —
    or, with ``transposed_b``, ``Bs[tx][k]`` (key "bt": a tile of Bᵀ's rows) — both static
    shared arrays of at least T x T elements; raises Refused otherwise."""
    found: dict[str, str] = {}
    for load in loads:
        p = poly(load.index)
        if p == _lin((tile, TY), (1, k)) and "a" not in found:
            found["a"] = load.buffer
        elif p == _lin((tile, k), (1, TX)):
            found["b"] = load.buffer
        elif transposed_b and p == _lin((tile, TX), (1, k)):
            found["bt"] = load.buffer
    if len(found) != 2 or "a" not in found or len(set(found.values())) != 2:
        raise Refused("the inner product is not As[ty][k] * Bs[k][tx] (or Bs[tx][k]) over "
                      "T x T tiles")
    shared = {a.name for a in kernel.body.stmts if isinstance(a, Alloc) and a.space == "shared"
              and not a.dynamic and a.size >= tile * tile}
    if not set(found.values()) <= shared:
        raise Refused("the tiles are not static shared arrays of T x T elements")
    return found


def _check_tile_count(tiles: For, poly, defs, tile: int, k_param: str, by_tiles: bool) -> None:
    """The k-tile loop covers ceil(K / T) tiles: ``t < (K + T - 1) / T`` counting tiles, or
    ``t < K`` stepping by T."""
    cond, t = tiles.cond, tiles.var
    if not (isinstance(tiles.init, Const) and tiles.init.value == 0 and isinstance(cond, Binary)
            and cond.op == "<" and poly(cond.left) == {(t,): 1}):
        raise Refused(f"{tiles.label} does not count from 0 with `{t} < bound`")
    bound = cond.right
    if not by_tiles:
        if poly(bound) != {(k_param,): 1}:
            raise Refused(f"{tiles.label} does not run to the k size {k_param}")
        return
    if isinstance(bound, Var):
        bound = defs.get(bound.name, bound)
    ok = (isinstance(bound, Binary) and bound.op == "/" and poly(bound.right) == {(): tile}
          and poly(bound.left) == _lin((1, k_param), (tile - 1, "")))
    if not ok:
        raise Refused(f"{tiles.label} does not run over ceil({k_param} / {tile}) tiles")


def epilogue_locals(kernel: Kernel, epilogue, acc: str, poly, row: Poly, col: Poly,
                    m_param: str, n_param: str,
                    keeps_block_z: bool = False) -> tuple[tuple, tuple]:
    """The locals the epilogue reads as the row and the column; checks its shape.
    ``keeps_block_z``: the rebuilt kernel keeps block.z (a batch index), so the epilogue may
    read it."""
    if not (len(epilogue) == 1 and isinstance(epilogue[0], If) and epilogue[0].orelse is None):
        raise Refused("after the k loop there must be exactly one `if (row < M && col < N)`")
    guard = epilogue[0]
    params = {p.name for p in kernel.params if not p.is_buffer}
    declared = {n.name for n in guard.walk() if isinstance(n, Declare)}
    if any(name.startswith(PREFIX) for name in declared):
        raise Refused(f"an epilogue local's name starts with {PREFIX!r}, which the rule uses")
    rows: dict[str, Type] = {}
    cols: dict[str, Type] = {}
    for n in guard.walk():
        if isinstance(n, (For, Barrier, Alloc)) or (isinstance(n, Load) and n.buffer in {
                a.name for a in kernel.body.walk() if isinstance(a, Alloc)}):
            raise Refused("the epilogue loops, synchronizes or reads shared memory")
        if isinstance(n, Special) and not (keeps_block_z and (n.kind, n.axis) == ("block", "z")):
            # the template's threads are not the original's
            raise Refused("the epilogue reads a hardware index itself; it may read the row "
                          "and the column only through locals")
        if isinstance(n, Var) and n.name not in declared | params | {acc}:
            p = poly(n)
            if p == row:
                rows[n.name] = n.type
            elif p == col:
                cols[n.name] = n.type
            else:
                raise Refused(f"the epilogue reads {n.name!r}, which is not the row, the "
                              "column, the sum or a parameter")
    checks = {(tuple(sorted(poly(p.left).items())) if poly(p.left) else None,
               bound_param(p)) for p in conjuncts(guard.cond) if bound_param(p) is not None}
    if (tuple(sorted(row.items())), m_param) not in checks or \
            (tuple(sorted(col.items())), n_param) not in checks:
        raise Refused(f"the epilogue's condition does not require row < {m_param} and "
                      f"col < {n_param}")
    return tuple(rows.items()), tuple(cols.items())
