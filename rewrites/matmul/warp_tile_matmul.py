"""warp-tile-matmul: rebuild a shared-memory tiled matmul as a warp-tiled one on 8x8 matrices."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from kir.analysis import rename_var, substitute
from kir.errors import KirError
from kir.ir import (
    Alloc,
    Cast,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Launch,
    Select,
    Stmt,
    Var,
    transform,
)
from kir.ir.types import I32, Type
from kir.ir.verify import verify
from kir.rules import BaseRule, Match, NotApplicable, RuleContext, choice
from kir.rules.templates import kernel_from_template, needs_dynamic_shared
from kir.rewrites.matmul.by_function import looks_like_gemm
from kir.rewrites.matmul.by_function import recognize as recognize_by_function
from kir.rewrites.matmul.direct_nest import recognize_direct
from kir.rewrites.matmul.tiled_nest import MatmulNest, Refused, recognize
from kir.rewrites.matmul.unguarded_nest import recognize_unguarded
from kir.rewrites.matmul.warp_tiles import (PREFIX, Gemm, TileConfig, body_text,
                                            epilogue_names, tile_bytes)
from kir.rewrites.mma_tile import inner_product

# The site of a kernel with no inner-product loop, recognised by what it computes.
WHOLE_KERNEL = "kernel"

# Block tile / warps, the search's gene: MLX's steel GEMMs use 32-64 x 32-64 tiles with 2 x 2
# SIMD groups on Apple GPUs; CUDA GEMMs 64-128 x 64-128 with 4-8 warps (CUTLASS defaults).
CONFIGS = ("64x64x16/2x2", "64x128x16/2x2", "128x128x16/2x4", "128x128x32/2x4", "128x128x16/2x2",
           "128x64x16/2x2", "64x64x32/2x2", "32x64x16/1x2", "128x256x16/2x4", "256x128x16/4x2")


def parse_config(text: str) -> TileConfig:
    """``"64x128x16/2x2"`` (block tile BM x BN x BK / warps along M x N) as a TileConfig."""
    tile, warps = text.split("/")
    bm, bn, bk = (int(v) for v in tile.split("x"))
    wm, wn = (int(v) for v in warps.split("x"))
    return TileConfig(bm, bn, bk, wm, wn)


class WarpTileMatmul(BaseRule):
    """Rebuild a shared-memory tiled matmul as a warp-tiled matmul on 8x8 warp matrices.

    Encodes the structure of every fast GEMM since Volkov & Demmel (2008): MLX's steel GEMM
    (Apple SIMD-group matrices), CUTLASS's warp-level GEMM, the "warptiling" step of the
    CUDA SGEMM tutorials. A block of ``warps_m x warps_n`` warps computes a BM x BN tile of C;
    each warp owns a patch of 8x8 accumulator fragments, so every operand fragment it loads
    from shared memory feeds several products (the original's one element per thread loads two
    operands per multiply-add). The A and B tiles (BM x BK, BK x BN) are copied by all threads,
    zero past the edges, into shared arrays padded against bank conflicts; the original's
    epilogue (its bounds-checked store of the sum, and whatever it computes from it) runs
    unchanged for every output element. ``config`` (``BMxBNxBK/WMxWN``) is the search's gene,
    like a Triton config; ``stages`` (1-3) the tiles kept in shared memory at once, 2 or more
    a software pipeline whose whole tiles arrive by asynchronous copies (CUDA's ``cp.async``;
    see :func:`kir.rewrites.matmul.warp_tiles.body_text`). ``tf32-matrix`` then puts the
    products on TF32 tensor cores (CUDA).

    Site: the inner-product loop of the classic tiled SGEMM (``acc += As[ty][k] * Bs[k][tx]``
    over a T x T tile in a T x T block; CUDA Best Practices Guide, "Shared Memory in Matrix
    Multiplication"). The rule proves the nest computes C = A·B: each iteration of the k-tile
    loop stores ``A[row][t·T + tx]`` (zero unless ``row < M && t·T + tx < K``) to
    ``As[ty][tx]`` and ``B[t·T + ty][col]`` (zero unless ``t·T + ty < K && col < N``) to
    ``Bs[ty][tx]``, with row = block.y·T + thread.y and col = block.x·T + thread.x, row-major
    strides that are parameters or constants (checked as polynomials of the indices); the
    tile loop covers ceil(K / T) tiles; the sum starts at 0; nothing else is stored before the
    epilogue; the epilogue is one ``if`` whose condition requires row < M and col < N and
    reads only the sum, row, col and parameters. Refused otherwise (tiles stored or read
    any other way, other strides), and when the result exceeds the target's limits.

    B may be stored N x K (a linear layer's weight, ``acc += As[ty][k] * Ws[tx][k]``): C = A·Bᵀ,
    rebuilt with B's tile kept by rows and its fragments loaded transposed. A GEMM with no
    tiles at all — one element of C per thread, its dot product read straight from global
    memory under one ``row < M && col < N`` guard (or an early return), A and B stored either
    way (column-major code), the sum from 0 or from a bias, in batches along block.z — is read
    by :mod:`kir.rewrites.matmul.direct_nest` and rebuilt the same way.

    A GEMM tutorial's kernel that checks no bounds (right only at whole tiles) is read too
    (:mod:`kir.rewrites.matmul.unguarded_nest`): a 1-D block of T·T threads indexed as
    ``tid / T`` and ``tid % T``, rows from either block axis, operands walked by offsets the
    k loop advances by a constant, one unchecked store ``C[row * ldc + col] = f(sum,
    C[row * ldc + col])``. Its bounds come from its launch (a grid of ``M / T`` blocks covers
    ``(M / T) * T`` rows) and guard the rebuilt kernel's loads and store, which changes
    nothing where the original is defined.

    A kernel none of these reads — its inner-product loop shaped otherwise, or no ``acc +=
    a * b`` loop at all (a tutorial's register-blocked GEMM: a thread's results in a register
    array, the dot loop outside the result loop), then offered whole (``loop=kernel``) — is
    recognised by what it computes (:mod:`kir.rewrites.matmul.by_function`): A, B and C from
    the spec's shapes, and runs on the interpreter showing C = alpha·A·B + beta·C; the rebuilt
    kernel checks every bound.
    """

    name = "warp-tile-matmul"
    site_key = "loop"
    once_per_site = True

    @dataclass(frozen=True)
    class Params:
        config: str = choice(*CONFIGS)
        stages: int = choice(1, 2, 3)

    def candidates(self, kernel: Kernel) -> list[str]:
        loops = [n.label for n in kernel.body.walk()
                 if isinstance(n, For) and inner_product(n) is not None]
        return loops or ([WHOLE_KERNEL] if looks_like_gemm(kernel) else [])

    def plan_in(self, kernel: Kernel, site: str, ctx: RuleContext | None) -> MatmulNest:
        """The guarded form first; a kernel without shared tiles as one element per thread;
        failing those, a tutorial's unchecked one, whose bounds come from the launch and the
        spec's size expressions (``ctx``). A kernel none of these reads (its loop shaped
        otherwise, or no ``acc += a * b`` loop at all: then it is offered whole) is
        recognised by what it computes (:mod:`.by_function`)."""
        if site != WHOLE_KERNEL:
            nest = _read_loop(kernel, site, ctx)
            if not nest.refusal:
                return nest
        # Every kernel of a search derives from the unrewritten one by validated rules:
        # recognising that one (once, remembered) serves them all.
        base = getattr(ctx, "base", None)
        same = base is not None and base.params == kernel.params
        found = recognize_by_function(base if same else kernel, ctx)
        if site == WHOLE_KERNEL or not found.refusal:
            return found
        return MatmulNest(refusal=f"{nest.refusal}; by what it computes: {found.refusal}")

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        nest: MatmulNest = match.plan
        cfg = dataclasses.replace(parse_config(params.config), stages=params.stages)
        problem = cfg.problem()
        if problem:
            return NotApplicable(problem)
        grid = []
        for param, size in ((nest.n_param, cfg.bn), (nest.m_param, cfg.bm)):
            expr = ctx.scalar_exprs.get(param)
            if expr is None:
                return NotApplicable(f"no size expression for {param!r} to size the grid "
                                     "with (the spec binds it)")
            grid.append(f"ceil({expr if expr.isidentifier() else f'({expr})'} / {size})")
        # A pipeline over the target's static shared memory takes its tiles from dynamic
        # shared memory where the target has more of that (CUDA: 227 KB against 48).
        tiles = tile_bytes(cfg, nest.gemm)
        dynamic = cfg.stages > 1 and needs_dynamic_shared(ctx.target,
                                                          tiles + cfg.scratch_floats * 4)
        launch = Launch((*grid, nest.grid_z), (cfg.threads, 1, 1), tiles if dynamic else 0,
                        specialized=kernel.launch.specialized)
        try:
            result = _build(kernel, nest, cfg, launch, match_loc(kernel, match.site))
            verify(result, ctx.target)
        except KirError as err:
            return NotApplicable(f"the warp-tiled kernel does not verify: {err.message}")
        return result


def _read_loop(kernel: Kernel, site: str, ctx: RuleContext | None) -> MatmulNest:
    """The nest of the inner-product loop ``site`` as one of the loop readers proves it, or
    a refusal saying why none does."""
    loop = next(n for n in kernel.body.walk() if isinstance(n, For) and n.label == site)
    if not any(isinstance(n, Alloc) for n in kernel.body.walk()):
        try:
            return recognize_direct(kernel, loop)
        except Refused as why:
            return MatmulNest(refusal=f"read as one element per thread: {why}")
    try:
        return recognize(kernel, loop)
    except Refused as why:
        if ctx is None or not ctx.scalar_exprs or _guarded(kernel, loop):
            return MatmulNest(refusal=str(why))
        try:
            return recognize_unguarded(kernel, loop, ctx.scalar_exprs)
        except Refused as unchecked:
            return MatmulNest(refusal=f"{why}; read as a kernel without bounds checks: "
                                      f"{unchecked}")


def _guarded(kernel: Kernel, loop: For) -> bool:
    """Whether the nest holding ``loop`` checks bounds anywhere (its refusal as a guarded
    nest is then the one to report)."""
    holder = next(s for s in kernel.body.stmts if any(n is loop for n in s.walk()))
    return any(isinstance(n, (Select, If)) for n in holder.walk())


def match_loc(kernel: Kernel, site: str):
    """The source location of the inner-product loop ``site`` (for the whole kernel, of its
    first loop)."""
    return next(n.loc for n in kernel.body.walk()
                if isinstance(n, For) and (n.label == site or site == WHOLE_KERNEL))


# ---------------------------------------------------------------------------- building


def _typed(value: Expr, type_: Type) -> Expr:
    """``value`` (an i32 index) as the original's row or column local was typed (C code
    often declares them unsigned)."""
    return value if type_ == I32 else Cast(value, type_)  # type: ignore[arg-type]


def _i32_sizes(kernel: Kernel, gemm: Gemm) -> Gemm:
    """``gemm`` with each size and stride that reads a scalar parameter of another type
    (``unsigned int M``) cast to i32, the template's index type."""
    other = {p.name for p in kernel.params if not p.is_buffer and p.type != I32}

    def as_i32(text: str) -> str:
        names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
        return f"i32({text})" if names & other else text
    return dataclasses.replace(gemm, **{field: as_i32(getattr(gemm, field))
                                        for field in ("lda", "ldb", "m", "n", "k")})


def _build(kernel: Kernel, nest: MatmulNest, cfg: TileConfig, launch: Launch,
           loc) -> Kernel:
    """The template's kernel with the original's parameters, ``launch`` (dynamic shared
    bytes: the tiles live there), and its epilogue spliced into each fragment's copy-out
    loop (its locals renamed per copy)."""
    assert nest.gemm is not None
    gemm = _i32_sizes(kernel, nest.gemm)
    built = kernel_from_template(kernel, launch, body_text(cfg, gemm, launch.shared_bytes > 0),
                                 f"<{WarpTileMatmul.name}>")
    declared = {n.name for s in nest.epilogue for n in s.walk() if isinstance(n, Declare)}

    def epilogue_for(i: int, j: int) -> list[Stmt]:
        row, col, total = epilogue_names(i, j)
        out = []
        for s in nest.epilogue:
            for name, type_ in nest.rows:
                s = substitute(s, name, _typed(Var(row, I32), type_))
            for name, type_ in nest.cols:
                s = substitute(s, name, _typed(Var(col, I32), type_))
            s = rename_var(s, nest.acc, total)  # reads, and writes (`acc *= alpha`)
            for name in declared:
                s = rename_var(s, name, f"{name}_{PREFIX}{i}_{j}")
            out.append(s)
        return out

    stmts: list[Stmt] = []
    for s in built.body.stmts:
        if isinstance(s, For) and s.var.startswith("wt_e_"):
            i, j = (int(v) for v in s.var[len("wt_e_"):].split("_"))
            body = (*s.body.stmts[:-1], *epilogue_for(i, j))
            s = dataclasses.replace(s, body=dataclasses.replace(s.body, stmts=body))
        stmts.append(s)

    def locate(n):
        """The template's statements point at the original inner product."""
        if isinstance(n, Stmt) and getattr(n, "loc", 0) is None:
            return dataclasses.replace(n, loc=loc)
        return None

    body = transform(dataclasses.replace(built.body, stmts=tuple(stmts)), locate)
    return dataclasses.replace(kernel, body=body, launch=launch)


RULES = [WarpTileMatmul()]
