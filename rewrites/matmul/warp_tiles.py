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

    @property
    def threads(self) -> int:
        return self.warps_m * self.warps_n * 32

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
        return ""

    def vector_copy(self) -> bool:
        """Whether each thread's share of both tiles splits into 4-wide row pieces (the
        16-byte copy of whole tiles)."""
        return (self.bk % 4 == 0 and self.bn % 4 == 0
                and (self.bm * self.bk) % (4 * self.threads) == 0
                and (self.bk * self.bn) % (4 * self.threads) == 0)

    def shared_bytes(self) -> int:
        warps = self.warps_m * self.warps_n
        return 4 * (self.bm * (self.bk + PAD_A) + self.bk * (self.bn + PAD_B) + warps * 64)

    def __str__(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk}, {self.warps_m}x{self.warps_n} warps"


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


PREFIX = "wt_"  # every name the template declares starts so; the rule checks none is taken


def epilogue_names(i: int, j: int) -> tuple[str, str, str]:
    """The names fragment (i, j)'s copy-out loop gives the output row, column and sum."""
    return f"wt_row_{i}_{j}", f"wt_col_{i}_{j}", f"wt_sum_{i}_{j}"


def body_text(cfg: TileConfig, g: Gemm) -> list[str]:
    """The kernel body's lines (IR text). Each fragment's copy-out loop ends with a stand-in
    statement (``wt_Ws[...] = wt_sum_i_j``) where the rule splices the original epilogue.

    (Measured on the H200, 2048^3 TF32, BENCHMARKS.md round 4: prefetching the next tiles
    into registers while the current ones are multiplied was slower at four of five block
    tiles and no faster at the fifth: the extra registers spill or cost occupancy.)"""
    sa, sb = cfg.bk + PAD_A, cfg.bn + PAD_B
    if g.b_transposed:  # B's tile kept as its rows (n) of k, like A's; fragments read across
        sb = cfg.bk + PAD_A
    per_a, per_b = cfg.bm * cfg.bk // cfg.threads, cfg.bk * cfg.bn // cfg.threads
    wm, wn = cfg.bm // cfg.warps_m, cfg.bn // cfg.warps_n
    labels = iter(range(1_000))

    def each(var: str, count: int, body: list[str]) -> list[str]:
        """An unrolled loop over this thread's elements of a tile."""
        return ([f"  for L{next(labels)} [pragma_unroll] {var}: i32 = 0; {var} < {count}; "
                 f"{var} = {var} + 1 {{"] + [f"    {line}" for line in body] + ["  }"])

    lines = [
        f"shared wt_As: f32[{cfg.bm * sa}]",
        f"shared wt_Bs: f32[{cfg.bn * sb if g.b_transposed else cfg.bk * sb}]",
        f"shared wt_Ws: f32[{cfg.warps_m * cfg.warps_n * 64}]",
        "let wt_tid: i32 = i32(thread.x)",
        "let wt_warp: i32 = wt_tid / 32",
        f"let wt_m0: i32 = i32(block.y) * {cfg.bm}",
        f"let wt_n0: i32 = i32(block.x) * {cfg.bn}",
        f"let wt_wm: i32 = wt_warp / {cfg.warps_n} * {wm}",
        f"let wt_wn: i32 = wt_warp % {cfg.warps_n} * {wn}",
    ]
    accs = [(i, j) for i in range(cfg.frags_m) for j in range(cfg.frags_n)]
    lines += [f"matrix wt_acc_{i}_{j}: f32m8x8 = fill 0.0" for i, j in accs]
    lines.append(f"for L{next(labels)} wt_k0: i32 = 0; wt_k0 < {g.k}; wt_k0 = wt_k0 + {cfg.bk} {{")
    vector = cfg.vector_copy()
    if vector:
        lines += [f"  if wt_m0 + {cfg.bm} <= {g.m} && wt_n0 + {cfg.bn} <= {g.n} && "
                  f"wt_k0 + {cfg.bk} <= {g.k} && ({g.lda}) % 4 == 0 && ({g.ldb}) % 4 == 0 {{"]
        lines += ["  " + line for line in each("wt_va", per_a // 4, [
            f"let wt_ea: i32 = (wt_tid + wt_va * {cfg.threads}) * 4",
            f"let wt_av: f32x4 = {g.a}[(wt_m0 + wt_ea / {cfg.bk}) * {g.lda} + wt_k0 + "
            f"wt_ea % {cfg.bk}] as f32x4",
            *(f"wt_As[wt_ea / {cfg.bk} * {sa} + wt_ea % {cfg.bk} + {c}] = wt_av.{'xyzw'[c]}"
              for c in range(4))])]
        # (B's rows of k when it is stored transposed: then n0 + row, k0 + column)
        b_row, b_col, b_width = (("wt_n0", "wt_k0", cfg.bk) if g.b_transposed
                                 else ("wt_k0", "wt_n0", cfg.bn))
        lines += ["  " + line for line in each("wt_vb", per_b // 4, [
            f"let wt_eb: i32 = (wt_tid + wt_vb * {cfg.threads}) * 4",
            f"let wt_bv: f32x4 = {g.b}[({b_row} + wt_eb / {b_width}) * {g.ldb} + {b_col} + "
            f"wt_eb % {b_width}] as f32x4",
            *(f"wt_Bs[wt_eb / {b_width} * {sb} + wt_eb % {b_width} + {c}] = wt_bv.{'xyzw'[c]}"
              for c in range(4))])]
        lines.append("  } else {")
    scalar_start = len(lines)
    lines += each("wt_ia", per_a, [
        f"let wt_ra: i32 = (wt_tid + wt_ia * {cfg.threads}) / {cfg.bk}",
        f"let wt_ca: i32 = (wt_tid + wt_ia * {cfg.threads}) % {cfg.bk}",
        f"wt_As[wt_ra * {sa} + wt_ca] = select(wt_m0 + wt_ra < {g.m} && wt_k0 + wt_ca < {g.k}, "
        f"{g.a}[(wt_m0 + wt_ra) * {g.lda} + wt_k0 + wt_ca], 0.0)"])
    if g.b_transposed:
        lines += each("wt_ib", per_b, [
            f"let wt_rb: i32 = (wt_tid + wt_ib * {cfg.threads}) / {cfg.bk}",
            f"let wt_cb: i32 = (wt_tid + wt_ib * {cfg.threads}) % {cfg.bk}",
            f"wt_Bs[wt_rb * {sb} + wt_cb] = select(wt_n0 + wt_rb < {g.n} && "
            f"wt_k0 + wt_cb < {g.k}, {g.b}[(wt_n0 + wt_rb) * {g.ldb} + wt_k0 + wt_cb], 0.0)"])
    else:
        lines += each("wt_ib", per_b, [
            f"let wt_rb: i32 = (wt_tid + wt_ib * {cfg.threads}) / {cfg.bn}",
            f"let wt_cb: i32 = (wt_tid + wt_ib * {cfg.threads}) % {cfg.bn}",
            f"wt_Bs[wt_rb * {sb} + wt_cb] = select(wt_k0 + wt_rb < {g.k} && "
            f"wt_n0 + wt_cb < {g.n}, {g.b}[(wt_k0 + wt_rb) * {g.ldb} + wt_n0 + wt_cb], 0.0)"])
    if vector:
        lines[scalar_start:] = ["  " + line for line in lines[scalar_start:]] + ["  }"]
    lines.append("  barrier block")
    lines.append(f"  for L{next(labels)} [pragma_unroll] wt_kk: i32 = 0; wt_kk < {cfg.bk}; "
                 "wt_kk = wt_kk + 8 {")
    lines += [f"    matrix wt_a_{i}: f32m8x8 = mload wt_As[(wt_wm + {i * FRAG}) * {sa} + wt_kk] "
              f"stride {sa}" for i in range(cfg.frags_m)]
    if g.b_transposed:  # fragment element (k, n) at wt_Bs[(n0 + n) * sb + k]
        lines += [f"    matrix wt_b_{j}: f32m8x8 = mload wt_Bs[(wt_wn + {j * FRAG}) * {sb} + "
                  f"wt_kk] stride {sb} transposed" for j in range(cfg.frags_n)]
    else:
        lines += [f"    matrix wt_b_{j}: f32m8x8 = mload wt_Bs[wt_kk * {sb} + wt_wn + "
                  f"{j * FRAG}] stride {sb}" for j in range(cfg.frags_n)]
    lines += [f"    mma wt_acc_{i}_{j} += wt_a_{i} * wt_b_{j}" for i, j in accs]
    lines += ["  }", "  barrier block", "}"]
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
