"""The warp-tiled matmul that ``warp-tile-matmul`` builds, as kir IR text.

The structure of MLX's steel GEMM and of CUTLASS's warp-level GEMMs (and of every fast SGEMM
since Volkov 2010): a block computes a BM x BN tile of C with ``warps_m x warps_n`` warps; each
warp owns a (BM / warps_m) x (BN / warps_n) patch held as 8x8 matrix fragments, so each
operand fragment it loads from shared memory feeds several products. Per step of BK along k,
all threads copy the A tile (BM x BK) and the B tile (BK x BN) from global memory into padded
shared arrays, zero past the matrix edges; after the k loop each warp writes its fragments,
one at a time, through a small per-warp scratch tile so that every element goes through the
original kernel's own bounds-checked store (its epilogue, kept as written).

Where the block's whole tiles lie inside the matrices and the row strides are multiples of 4,
each thread copies them with 16-byte loads (``f32x4``; CUDA's float4: a quarter of the load
instructions and of the registers their addresses take), the bounds-checked scalar copy
serving the edges. Like kir's other vector rules this assumes the operand buffers start on a
16-byte boundary, as MLX allocates them.

Padding (bank conflicts, 32 banks of 4 bytes): the A tile's row stride is BK + 4 and the B
tile's BN + 8, so the 32 lanes of a fragment load (CUDA's TF32 layout reads A[g][t] and
B[t][g], g < 8, t < 4) fall in 32 different banks.
"""

from __future__ import annotations

from dataclasses import dataclass

PAD_A, PAD_B = 4, 8
FRAG = 8


@dataclass(frozen=True)
class TileConfig:
    """Block tile ``bm x bn``, k step ``bk``, and the warps of a block (``warps_m`` along M
    by ``warps_n`` along N)."""

    bm: int
    bn: int
    bk: int
    warps_m: int
    warps_n: int
    stages: int = 1  # tiles in shared memory at once; 2 or more copy the next ones ahead

    @property
    def threads(self) -> int:
        return self.warps_m * self.warps_n * 32

    @property
    def scratch_floats(self) -> int:
        """The per-warp 8x8 scratch tiles the epilogue copies fragments through."""
        return self.warps_m * self.warps_n * 64

    @property
    def frags_m(self) -> int:
        return self.bm // self.warps_m // FRAG

    @property
    def frags_n(self) -> int:
        return self.bn // self.warps_n // FRAG

    def problem(self) -> str:
        """Why this configuration cannot be built, or ''."""
        if self.bk % FRAG or self.bm % (self.warps_m * FRAG) or self.bn % (self.warps_n * FRAG):
            return (f"tile {self.bm}x{self.bn}x{self.bk} does not split into 8x8 fragments "
                    f"over {self.warps_m}x{self.warps_n} warps")
        if (self.bm * self.bk) % self.threads or (self.bk * self.bn) % self.threads:
            return f"the tiles do not split evenly over {self.threads} threads"
        if self.stages < 1:
            return f"{self.stages} stages: a pipeline keeps at least one tile"
        return ""

    def vector_copy(self) -> bool:
        """Whether each thread's share of both tiles splits into 4-wide row pieces (the
        16-byte copy of whole tiles)."""
        return (self.bk % 4 == 0 and self.bn % 4 == 0
                and (self.bm * self.bk) % (4 * self.threads) == 0
                and (self.bk * self.bn) % (4 * self.threads) == 0)

    def __str__(self) -> str:
        stages = f", {self.stages} stages" if self.stages > 1 else ""
        return f"{self.bm}x{self.bn}x{self.bk}, {self.warps_m}x{self.warps_n} warps{stages}"


@dataclass(frozen=True)
class Gemm:
    """What the template needs from the original kernel, each as IR text over its
    parameters: the operand buffers, their row strides, the bounds, and whether B is stored
    transposed."""

    a: str
    b: str
    lda: str
    ldb: str
    m: str
    n: str
    k: str
    b_transposed: bool = False  # B stored N x K (row n at b[n * ldb]): C = A·Bᵀ
    a_transposed: bool = False  # A stored K x M (row k at a[k * lda]): C = Aᵀ·B
    a_offset: str = ""  # where this block's A starts (a batch: "i32(block.z) * (M * K)")
    b_offset: str = ""


@dataclass(frozen=True)
class _Tile:
    """One operand's tile in shared memory: ``rows`` x ``cols`` elements copied from
    ``buf[(row0 + r) * ld + col0 + c]`` (zero past ``row_bound`` / ``col_bound``) and kept
    row by row with a pitch of ``cols + pad``. ``letter`` names its copy's locals."""

    letter: str
    shared: str
    buf: str
    ld: str
    offset: str  # "" or "OFFSET + ": the batch's start
    row0: str
    rows: int
    row_bound: str
    col0: str
    cols: int
    col_bound: str
    pad: int

    @property
    def pitch(self) -> int:
        return self.cols + self.pad


def _tiles(cfg: "TileConfig", g: Gemm) -> tuple[_Tile, _Tile]:
    """A's and B's tiles, each kept as the operand is stored in memory (rows of k for A·B's
    B, rows of m or n where k runs along the stored rows), so every copy reads whole rows.
    A pipeline keeps both operands' stages in one array (``wt_S``: A's stages, then B's)."""
    m = ("wt_m0", cfg.bm, g.m)
    n = ("wt_n0", cfg.bn, g.n)
    k = ("wt_k0", cfg.bk, g.k)
    a = (*k, *m, PAD_B) if g.a_transposed else (*m, *k, PAD_A)
    b = (*n, *k, PAD_A) if g.b_transposed else (*k, *n, PAD_B)
    shared_a, shared_b = ("wt_S", "wt_S") if cfg.stages > 1 else ("wt_As", "wt_Bs")
    return (_Tile("a", shared_a, g.a, g.lda, f"{g.a_offset} + " if g.a_offset else "",
                  *a),  # type: ignore[arg-type]
            _Tile("b", shared_b, g.b, g.ldb, f"{g.b_offset} + " if g.b_offset else "",
                  *b))  # type: ignore[arg-type]


def tile_bytes(cfg: TileConfig, g: Gemm) -> int:
    """The bytes of shared memory the A and B tiles of all stages take."""
    return cfg.stages * sum(t.rows * t.pitch for t in _tiles(cfg, g)) * 4


PREFIX = "wt_"  # every name the template declares starts so; the rule checks none is taken


def epilogue_names(i: int, j: int) -> tuple[str, str, str]:
    """The names fragment (i, j)'s copy-out loop gives the output row, column and sum."""
    return f"wt_row_{i}_{j}", f"wt_col_{i}_{j}", f"wt_sum_{i}_{j}"


def body_text(cfg: TileConfig, g: Gemm, dynamic: bool = False) -> list[str]:
    """The kernel body's lines (IR text). Each fragment's copy-out loop ends with a stand-in
    statement (``wt_Ws[...] = wt_sum_i_j``) where the rule splices the original epilogue.

    With ``cfg.stages`` S > 1 the k loop is a software pipeline over S tiles in shared
    memory (CUTLASS's "multistage" GEMM, Ampere's ``cp.async``): iteration i copies tile i
    into stage i % S — whole tiles as asynchronous 16-byte copies that need no registers,
    edge tiles by the bounds-checked copy — and multiplies tile i - (S - 1), which its copies
    committed S - 1 iterations earlier have landed by then (``async_wait S - 2``, then a
    barrier). One barrier an iteration: the stage a copy writes was last read one iteration
    before, which every thread finished before that barrier. Targets without asynchronous
    copies (Metal) copy synchronously; the pipeline then only costs shared memory. With
    ``dynamic`` the stages live in CUDA's dynamic shared memory (the launch's
    ``shared_bytes``, :func:`tile_bytes`), which may exceed the 48 KB of static arrays.

    (Measured on the H200, 2048^3 TF32, BENCHMARKS.md round 4: prefetching the next tiles
    into registers while the current ones are multiplied was slower at four of five block
    tiles and no faster at the fifth: the extra registers spill or cost occupancy. The
    asynchronous copies above take no registers.)"""
    tile_a, tile_b = _tiles(cfg, g)
    wm, wn = cfg.bm // cfg.warps_m, cfg.bn // cfg.warps_n
    labels = iter(range(1_000))

    def each(var: str, count: int, body: list[str]) -> list[str]:
        """An unrolled loop over this thread's elements of a tile."""
        return ([f"  for L{next(labels)} [pragma_unroll] {var}: i32 = 0; {var} < {count}; "
                 f"{var} = {var} + 1 {{"] + [f"    {line}" for line in body] + ["  }"])

    pipelined = cfg.stages > 1
    # Where each operand's stage starts in its shared array ("" with one stage).
    put = {t.letter: f"wt_put_{t.letter} + " if pipelined else "" for t in (tile_a, tile_b)}
    get = {t.letter: f"wt_get_{t.letter} + " if pipelined else "" for t in (tile_a, tile_b)}

    def vector_copy(t: _Tile) -> list[str]:
        x = t.letter
        e, v = f"wt_e{x}", f"wt_{x}v"
        source = (f"{t.buf}[{t.offset}({t.row0} + {e} / {t.cols}) * {t.ld} + {t.col0} + "
                  f"{e} % {t.cols}] as f32x4")
        start = f"{put[x]}{e} / {t.cols} * {t.pitch} + {e} % {t.cols}"
        copy = ([f"async {t.shared}[{start}] = {source}"] if pipelined else
                [f"let {v}: f32x4 = {source}",
                 *(f"{t.shared}[{start} + {c}] = {v}.{'xyzw'[c]}" for c in range(4))])
        return ["  " + line for line in each(f"wt_v{x}", t.rows * t.cols // cfg.threads // 4, [
            f"let {e}: i32 = (wt_tid + wt_v{x} * {cfg.threads}) * 4", *copy])]

    def scalar_copy(t: _Tile) -> list[str]:
        x = t.letter
        r, c = f"wt_r{x}", f"wt_c{x}"
        return each(f"wt_i{x}", t.rows * t.cols // cfg.threads, [
            f"let {r}: i32 = (wt_tid + wt_i{x} * {cfg.threads}) / {t.cols}",
            f"let {c}: i32 = (wt_tid + wt_i{x} * {cfg.threads}) % {t.cols}",
            f"{t.shared}[{put[x]}{r} * {t.pitch} + {c}] = select({t.row0} + {r} < "
            f"{t.row_bound} && {t.col0} + {c} < {t.col_bound}, {t.buf}[{t.offset}({t.row0} + "
            f"{r}) * {t.ld} + {t.col0} + {c}], 0.0)"])

    size_a, size_b = tile_a.rows * tile_a.pitch, tile_b.rows * tile_b.pitch
    if not pipelined:
        lines = [f"shared wt_As: f32[{size_a}]", f"shared wt_Bs: f32[{size_b}]"]
    elif dynamic:
        lines = ["shared dynamic wt_S: f32[0]"]
    else:
        lines = [f"shared wt_S: f32[{cfg.stages * (size_a + size_b)}]"]
    lines += [
        f"shared wt_Ws: f32[{cfg.scratch_floats}]",
        "let wt_tid: i32 = i32(thread.x)",
        "let wt_warp: i32 = wt_tid / 32",
        f"let wt_m0: i32 = i32(block.y) * {cfg.bm}",
        f"let wt_n0: i32 = i32(block.x) * {cfg.bn}",
        f"let wt_wm: i32 = wt_warp / {cfg.warps_n} * {wm}",
        f"let wt_wn: i32 = wt_warp % {cfg.warps_n} * {wn}",
    ]
    accs = [(i, j) for i in range(cfg.frags_m) for j in range(cfg.frags_n)]
    lines += [f"matrix wt_acc_{i}_{j}: f32m8x8 = fill 0.0" for i, j in accs]
    k_loop = f"L{next(labels)}"  # numbered before the loops inside it, as in source order
    copy = []
    if cfg.vector_copy():
        aligned = "".join(f" && ({offset}) % 4 == 0" for offset in (g.a_offset, g.b_offset)
                          if offset)  # a batch's start too
        copy += [f"  if wt_m0 + {cfg.bm} <= {g.m} && wt_n0 + {cfg.bn} <= {g.n} && "
                 f"wt_k0 + {cfg.bk} <= {g.k} && ({g.lda}) % 4 == 0 && ({g.ldb}) % 4 == 0"
                 f"{aligned} {{"]
        copy += vector_copy(tile_a) + vector_copy(tile_b) + ["  } else {"]
        copy += ["  " + line for line in scalar_copy(tile_a) + scalar_copy(tile_b)] + ["  }"]
    else:
        copy += scalar_copy(tile_a) + scalar_copy(tile_b)
    multiply = [f"  for L{next(labels)} [pragma_unroll] wt_kk: i32 = 0; wt_kk < {cfg.bk}; "
                "wt_kk = wt_kk + 8 {"]
    # A fragment: rows m, columns k; B fragment: rows k, columns n. Loaded as stored, or
    # transposed where the tile's rows run along the fragment's columns.
    for t, base, count in ((tile_a, "wt_wm", cfg.frags_m), (tile_b, "wt_wn", cfg.frags_n)):
        k_rows = t.row0 == "wt_k0"
        for i in range(count):
            at = (f"{get[t.letter]}wt_kk * {t.pitch} + {base} + {i * FRAG}" if k_rows
                  else f"{get[t.letter]}({base} + {i * FRAG}) * {t.pitch} + wt_kk")
            stored_like_fragment = k_rows == (t is tile_b)
            multiply.append(f"    matrix wt_{t.letter}_{i}: f32m8x8 = mload {t.shared}[{at}] "
                            f"stride {t.pitch}" + ("" if stored_like_fragment else " transposed"))
    multiply += [f"    mma wt_acc_{i}_{j} += wt_a_{i} * wt_b_{j}" for i, j in accs]
    multiply.append("  }")
    if not pipelined:
        lines.append(f"for {k_loop} wt_k0: i32 = 0; wt_k0 < {g.k}; wt_k0 = wt_k0 + {cfg.bk} {{")
        lines += copy + ["  barrier block"] + multiply + ["  barrier block", "}"]
    else:
        ahead = cfg.stages - 1

        def indent(block: list[str]) -> list[str]:
            return ["  " + line for line in block]
        lines += [
            f"let wt_tiles: i32 = ({g.k} + {cfg.bk - 1}) / {cfg.bk}",
            f"for {k_loop} wt_i: i32 = 0; wt_i < wt_tiles + {ahead}; wt_i = wt_i + 1 {{",
            f"  if wt_i >= {ahead} {{",
            f"    async_wait {ahead - 1}",
            "    barrier block",
            "  }",
            "  if wt_i < wt_tiles {",
            f"    let wt_k0: i32 = wt_i * {cfg.bk}",
            f"    let wt_put_a: i32 = wt_i % {cfg.stages} * {size_a}",
            f"    let wt_put_b: i32 = {cfg.stages * size_a} + wt_i % {cfg.stages} * {size_b}",
            *indent(copy),
            "  }",
            "  async_commit",
            f"  if wt_i >= {ahead} {{",
            f"    let wt_get_a: i32 = (wt_i - {ahead}) % {cfg.stages} * {size_a}",
            f"    let wt_get_b: i32 = {cfg.stages * size_a} + (wt_i - {ahead}) % {cfg.stages} * "
            f"{size_b}",
            *indent(multiply),
            "  }",
            "}",
        ]
    for i, j in accs:
        row, col, total = epilogue_names(i, j)
        e = f"wt_e_{i}_{j}"
        lines += [
            f"mstore wt_Ws[wt_warp * 64] stride 8 = wt_acc_{i}_{j}",
            "barrier warp",
            f"for L{next(labels)} [pragma_unroll] {e}: i32 = i32(lane); {e} < 64; {e} = {e} + 32 {{",
            f"  let {row}: i32 = wt_m0 + wt_wm + {i * FRAG} + {e} / 8",
            f"  let {col}: i32 = wt_n0 + wt_wn + {j * FRAG} + {e} % 8",
            f"  let {total}: f32 = wt_Ws[wt_warp * 64 + {e}]",
            f"  wt_Ws[wt_warp * 64 + {e}] = {total}",
            "}",
            "barrier warp",
        ]
    return lines
