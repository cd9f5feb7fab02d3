"""What ``warp-tile-matmul`` proves of a GEMM with no tiles at all: each thread of a 2-D grid
owns one element of C and sums its dot product straight from global memory — the first kernel
of every SGEMM tutorial, and a linear layer as training code first writes it::

    row = blockIdx.y * blockDim.y + threadIdx.y;      (either axis for either index)
    col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0;
        for (k = 0; k < K; k++) acc += A[row * lda + k] * B[k * ldb + col];   (or B[col * ldb + k])
        <epilogue: reads acc, row, col, parameters, buffers>
    }

Proved as polynomials of the hardware indices (:class:`tiled_nest.IndexPolys`): the two loads
are A at ``row * lda + k`` (or ``k * lda + row``: A stored K x M, as column-major code keeps
it) and B at ``k * ldb + col`` (B stored K x N) or ``col * ldb + k`` (B stored N x K: C =
A·Bᵀ), strides parameters or constants; the row and the column are the
standard map of two different grid axes; the guard requires both bounds and nothing else;
the sum starts at 0; nothing but index locals comes before the loop, and what follows it in
the guard is the epilogue, kept as written. The template then gives the threads that
computed one element each a warp-tiled block tile.
"""

from __future__ import annotations

import math

from kir.analysis import chain_operands, conjuncts
from kir.analysis.affine import Poly, poly_product, poly_sum, special_atom
from kir.ir import (
    Alloc,
    Assign,
    Binary,
    Block,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Return,
    Special,
    Var,
)
from kir.ir.edit import substitute
from kir.ir.printer import format_name
from kir.ir.types import BOOL, F32, I32
from kir.rewrites.matmul.tiled_nest import (
    IndexPolys,
    MatmulNest,
    Refused,
    bound_param,
    epilogue_locals,
    stride_text,
)
from kir.rewrites.matmul.unguarded_nest import thread_view
from kir.rewrites.matmul.warp_tiles import PREFIX, Gemm
from kir.rewrites.mma_tile import inner_product


def recognize_direct(kernel: Kernel, loop: For) -> MatmulNest:
    """The one-element-per-thread matmul whose dot-product loop is ``loop``; raises
    :class:`Refused`."""
    product = inner_product(loop)
    assert product is not None
    acc, loads = product
    if any(isinstance(n, Alloc) for n in kernel.body.walk()):
        raise Refused("the kernel stages data in arrays (not a one-element-per-thread nest)")
    if any(p.name.startswith(PREFIX) for p in kernel.params):
        raise Refused(f"a parameter name starts with {PREFIX!r}, which the rule's names use")
    kernel, extents = _thread_grid(kernel)
    loop = next(n for n in kernel.body.walk() if isinstance(n, For) and n.label == loop.label)
    poly = IndexPolys(kernel)
    k = loop.var
    k_param = bound_param(loop.cond)
    if not (isinstance(loop.init, Const) and loop.init.value == 0 and k_param is not None
            and poly(loop.cond.left) == {(k,): 1}  # type: ignore[union-attr]
            and poly(loop.update) == {(k,): 1, (): 1}):
        raise Refused(f"{loop.label} does not count k = 0, 1, ... up to a size parameter")

    guard, epilogue, start = _guard_and_epilogue(kernel, loop, acc)
    if start is not None:  # acc = X + sum: the epilogue first adds X to the template's sum
        epilogue = [Assign(acc, Binary("+", start, Var(acc, F32), F32), loc=guard.loc),
                    *epilogue]
    bounds = [(poly(part.left), bound_param(part))  # type: ignore[union-attr]
              for part in conjuncts(guard.cond)]
    if len(bounds) != 2 or any(p is None or b is None for p, b in bounds):
        raise Refused("the guard is not `row < M && col < N`")
    # A batch (block.z indexes independent GEMMs: bmm): each operand's block.z terms are
    # where its batch starts, the rest its matrix.
    split = [_split_batch(poly(load.index)) for load in loads]
    for (row, m_param), (col, n_param) in (bounds, bounds[::-1]):
        found = _operands(kernel, [(ld, rest) for ld, (rest, _) in zip(loads, split)], k,
                          row, col)  # type: ignore[arg-type]
        if found is not None:
            break
    else:
        raise Refused("the loads are not A[row * lda + k] (or A[k * lda + row]) and "
                      "B[k * ldb + col] (or B[col * ldb + k])")
    maps = [_thread_map(p, extents) for p in (row, col)]  # type: ignore[arg-type]
    if None in maps or maps[0][0] == maps[1][0] or maps[0][1] == maps[1][1]:  # type: ignore
        raise Refused("the row and the column are not block * blockDim + thread on two "
                      "different grid axes")
    (a_buf, lda), (b_buf, ldb), a_transposed, b_transposed, a_first = found
    per_batch = [per for _, per in split][::1 if a_first else -1]
    batched = any(per for per in per_batch)
    if batched and "z" in (maps[0][0], maps[1][0]):  # type: ignore[index]
        raise Refused("block.z indexes both a batch and the rows or columns")
    if any(per is None for per in per_batch):
        raise Refused("an operand's batch offset is not block.z times sizes")
    if batched:  # the epilogue may name the batch through locals: read their values
        epilogue = _batch_locals_inlined(kernel, guard, epilogue)
    kept = If(guard.cond, Block(tuple(epilogue)), None, loc=guard.loc)
    rows, cols = epilogue_locals(kernel, [kept], acc, poly, row, col,  # type: ignore[arg-type]
                                 m_param, n_param, keeps_block_z=batched)  # type: ignore
    offsets = [_offset_text(kernel, per) if per else "" for per in per_batch]  # type: ignore
    gemm = Gemm(format_name(a_buf), format_name(b_buf), stride_text(lda), stride_text(ldb),
                format_name(m_param), format_name(n_param),  # type: ignore[arg-type]
                format_name(k_param), b_transposed, a_transposed, *offsets)
    return MatmulNest(gemm, (kept,), rows, cols, acc, m_param, n_param,  # type: ignore[arg-type]
                      grid_z=str(kernel.launch.grid[2]) if batched else "1")


def _guard_and_epilogue(kernel: Kernel, loop: For,
                        acc: str) -> tuple[If, list, Expr | None]:
    """The guard ``if`` (the kernel's last statement, holding ``loop`` directly; or an early
    ``if (row >= M || col >= N) return;``, turned into that), the statements after the loop
    in it, and what ``acc`` starts at when not 0 (a bias: ``float val = bias[oc];``, read by
    the epilogue instead); checks that only index locals and ``acc``'s start precede."""
    stmts = kernel.body.stmts
    exit_at = next((i for i, s in enumerate(stmts) if _early_exit(s) is not None), None)
    if exit_at is not None and loop in stmts:
        cond = _early_exit(stmts[exit_at])
        guard = If(cond, Block(tuple(stmts[exit_at + 1:])), None,  # type: ignore[arg-type]
                   loc=stmts[exit_at].loc)
        stmts = (*stmts[:exit_at], guard)
    guard = stmts[-1] if stmts else None
    if not (isinstance(guard, If) and guard.orelse is None and loop in guard.then.stmts):
        raise Refused("the dot-product loop is not directly inside one final `if` guard "
                      "(or after one early `if (row >= M || col >= N) return;`)")
    inner = guard.then.stmts
    before = [*stmts[:-1], *inner[:inner.index(loop)]]
    start: Expr | None = None
    declared = False
    for s in before:
        if isinstance(s, Declare) and s.name == acc and s.init is not None:
            declared = True
            zero = isinstance(s.init, Const) and s.init.value == 0
            start = None if zero else s.init
            continue
        if not isinstance(s, Declare) or any(isinstance(n, Load) for n in s.walk()):
            raise Refused("the kernel does more before its dot product than set up indices")
    if not declared:
        raise Refused(f"{acc!r} is not declared with its start before the dot product")
    if start is not None and any(isinstance(n, Var) and n.name == acc for n in start.walk()):
        raise Refused(f"{acc!r} starts from itself")
    return guard, inner[inner.index(loop) + 1:], start


def _early_exit(s) -> Expr | None:
    """For ``if (x >= P || y >= Q) return;`` the condition the rest runs under,
    ``x < P && y < Q``; else None."""
    if not (isinstance(s, If) and s.orelse is None and len(s.then.stmts) == 1
            and isinstance(s.then.stmts[0], Return)):
        return None
    parts = chain_operands(s.cond, "||")
    if not all(isinstance(p, Binary) and p.op == ">=" for p in parts):
        return None
    kept = [Binary("<", p.left, p.right, BOOL) for p in parts]  # type: ignore[union-attr]
    out = kept[0]
    for part in kept[1:]:
        out = Binary("&&", out, part, BOOL)
    return out


def _operands(kernel: Kernel, loads, k: str, row: Poly, col: Poly):
    """((A, lda), (B, ldb), A transposed, B transposed, A is the first load) when one of
    ``loads`` ((load, its index polynomial)) is A[row * lda + k] (or A[k * lda + row]: A
    stored K x M, column-major) and the other B[k * ldb + col] (or B[col * ldb + k]); f32
    buffers, strides parameters or constants."""
    kk = {(k,): 1}
    for (a, pa), (b, pb) in (loads, loads[::-1]):
        if pa is None or pb is None or a.type != F32 or b.type != F32 or a.buffer == b.buffer:
            continue
        for a_transposed, lda in ((False, _stride(kernel, pa, kk, row)),
                                  (True, _stride(kernel, pa, row, kk))):
            for b_transposed, ldb in ((False, _stride(kernel, pb, col, kk)),
                                      (True, _stride(kernel, pb, kk, col))):
                if lda is not None and ldb is not None:
                    return ((a.buffer, lda), (b.buffer, ldb), a_transposed, b_transposed,
                            a is loads[0][0])
    return None


BLOCK_Z = special_atom(Special("block", "z"))


def _split_batch(p: Poly | None) -> tuple[Poly | None, Poly | None]:
    """(``p`` without its block.z terms, what block.z is multiplied by there); the second is
    None where block.z appears squared."""
    if p is None:
        return None, {}
    rest: Poly = {}
    per: Poly = {}
    for mono, coef in p.items():
        if BLOCK_Z not in mono:
            rest[mono] = coef
            continue
        others = list(mono)
        others.remove(BLOCK_Z)
        if BLOCK_Z in others:
            return rest, None
        per[tuple(others)] = coef
    return rest, per


def _offset_text(kernel: Kernel, per: Poly) -> str:
    """``i32(block.z) * (...)`` for the block.z coefficient ``per`` (scalar parameters and
    constants, each parameter as i32); raises Refused for anything else."""
    types = {p.name: p.type for p in kernel.params if not p.is_buffer and p.type.is_int}
    terms = []
    for mono, coef in per.items():
        if any(atom not in types for atom in mono):
            raise Refused("an operand's batch offset reads more than sizes")
        factors = [format_name(a) if types[a] == I32 else f"i32({format_name(a)})"
                   for a in mono]
        terms.append(" * ".join([str(coef)] * (coef != 1 or not factors) + factors))
    return f"i32(block.z) * ({' + '.join(terms)})"


def _batch_locals_inlined(kernel: Kernel, guard: If, epilogue: list) -> list:
    """``epilogue`` with each local declared before the guard from block.z, parameters and
    earlier such locals (``int b = blockIdx.z;``) replaced by its value, so that it reads the
    batch as the rebuilt kernel has it."""
    params = {p.name for p in kernel.params if not p.is_buffer}
    values: dict[str, Expr] = {}
    for s in kernel.body.stmts:
        if s is guard or not isinstance(s, Declare) or s.init is None:
            continue
        init = s.init
        for name, value in values.items():
            init = substitute(init, name, value)
        reads = {n.name for n in init.walk() if isinstance(n, Var)}
        specials = {(n.kind, n.axis) for n in init.walk() if isinstance(n, Special)}
        if specials == {("block", "z")} and reads <= params:
            values[s.name] = init
    out = []
    for stmt in epilogue:
        for name, value in values.items():
            stmt = substitute(stmt, name, value)
        out.append(stmt)
    return out


def _stride(kernel: Kernel, index: Poly, unit: Poly, strided: Poly) -> Poly | None:
    """s (one scalar parameter or a constant) with ``index == s * strided + unit``, else None."""
    rest = poly_sum(index, unit, -1)
    for p in kernel.params:
        if not p.is_buffer and p.type.is_int and poly_product({(p.name,): 1}, strided) == rest:
            return {(p.name,): 1}
    mono, coef = next(iter(strided.items()))
    if rest.get(mono, 0) % coef == 0:
        scale = {(): rest.get(mono, 0) // coef}
        if scale[()] and poly_product(scale, strided) == rest:
            return scale
    return None


def _thread_grid(kernel: Kernel) -> tuple[Kernel, tuple[int, int, int]]:
    """The kernel with a 1-D block of T·T threads indexed as ``x / T`` and ``x % T`` read as
    a T x T block (the tutorials' coalesced form; :func:`unguarded_nest.thread_view`), and
    the extent of each thread axis."""
    bx, by, bz = (int(v) for v in kernel.launch.block)
    side = math.isqrt(bx)
    if by == bz == 1 and side > 1 and side * side == bx:
        try:
            return thread_view(kernel, side), (side, side, 1)
        except Refused:
            pass
    return kernel, (bx, by, bz)


def _thread_map(p: Poly, extents: tuple[int, int, int]) -> tuple[str, str] | None:
    """(block axis, thread axis) when ``p`` is block.a * E + thread.b, E the extent of
    thread.b: each block a run of E consecutive indices, each thread one of them."""
    for a in "xyz":
        for b in "xyz":
            if p == {(special_atom(Special("block", a)),): extents["xyz".index(b)],
                     (special_atom(Special("thread", b)),): 1}:
                return a, b
    return None
