"""The attention kernel that ``mma-attention`` builds, as kir IR text.

FlashAttention-2's forward pass (Dao 2023, Algorithm 1) on 8x8 matrix fragments, the
structure of MLX's fused attention on Apple GPUs (``steel_attention``: each SIMD-group owns
rows of queries, S = Q·Kᵀ and O += P·V on ``simdgroup_matrix``) and of FlashAttention-2's
``mma.sync`` kernels on NVIDIA GPUs. A block of ``warps`` warps takes ``rows`` query rows
(``rows / warps`` a warp, held as 8-row fragments of Q in registers for the whole kernel) of
one (batch, head) and walks the keys ``keys`` at a time:

1. all threads copy the K and V tiles from global memory into shared memory (16-byte loads
   of f32; 16-bit elements widened to f32 one by one), zero past the last key, one block
   barrier (with a causal mask the walk stops at the block's last query);
2. each warp computes its S tile (``rows / warps`` x ``keys``) as fragment products and
   stores it to its own shared scratch;
3. the online softmax on that scratch: lane ``l`` owns row ``l / 4`` of each 8-row fragment
   and columns ``l % 4 + 4t``; the row's maximum and sum are combined over the four lanes of
   the row by two butterfly shuffles; keys past the last score -inf (weight 0); P replaces S;
4. P·V into fresh fragments, stored over the same scratch, and folded into the running O,
   which each lane keeps in registers for its row and columns ``l % 4 + 4t``:
   ``O = O * alpha + P·V``. (kir's fragments are opaque, so O is rescaled outside them:
   a product with a diagonal would need an accumulator as an operand, which tensor-core
   operands cannot be.)

At the end each lane writes its O elements divided by the row's sum, and the row's maximum
and sum where the original kernel writes them (FlashAttention-1's ``m`` and ``l``). Rows past
the last query are computed on zero queries and never written.

Padding (32 banks of 4 bytes; the TF32 layouts read A[g][t] and B[t][g], g < 8, t < 4): the
K tile's pitch is D + 4 (Kᵀ fragments read K[g][t]: bank 4g + t), V's D + 8 (B[t][g] =
V[t][g]: bank 8t + g), the scratch's keys + 4 for S and P and D + 4 for P·V.
"""

from __future__ import annotations

from dataclasses import dataclass

FRAG = 8
PREFIX = "fa_"  # every name the template declares starts so; the rule checks none is taken


@dataclass(frozen=True)
class AttentionConfig:
    """``rows`` query rows a block over ``warps`` warps, ``keys`` keys a step."""

    rows: int
    keys: int
    warps: int
    stages: int = 1  # K/V tiles in shared memory at once; 2 copies the next while one is used

    @property
    def threads(self) -> int:
        return self.warps * 32

    @property
    def row_frags(self) -> int:
        """8-row fragments of queries each warp owns."""
        return self.rows // self.warps // FRAG

    def problem(self, head_dim: int) -> str:
        """Why this configuration cannot be built for head dimension ``head_dim``, or ''."""
        if self.rows % (self.warps * FRAG) or self.keys % FRAG or head_dim % FRAG:
            return (f"{self.rows} rows over {self.warps} warps, {self.keys} keys and head "
                    f"dimension {head_dim} do not split into 8x8 fragments")
        quads = head_dim // 4
        for count in (self.rows * quads, self.keys * quads):
            if count % self.threads:
                return f"the Q, K and V tiles do not split evenly over {self.threads} threads"
        if self.stages not in (1, 2):
            return f"{self.stages} stages: the K/V tiles take one or two"
        return ""

    def tile_floats(self, head_dim: int) -> int:
        """Shared f32 elements of the K and V tiles, all stages (``fa_T``)."""
        return self.stages * self.keys * (2 * head_dim + 12)

    def shared_floats(self, head_dim: int) -> int:
        """Shared f32 elements the kernel declares: the K and V tiles, each warp's scratch."""
        return self.tile_floats(head_dim) + self.rows * (max(self.keys, head_dim) + 4)

    def __str__(self) -> str:
        stages = f", {self.stages} stages" if self.stages > 1 else ""
        return f"{self.rows}x{self.keys}/{self.warps}{stages}"


def parse_config(text: str) -> AttentionConfig:
    """``"64x32/4"`` (query rows x keys a step / warps) as an AttentionConfig."""
    tile, warps = text.split("/")
    rows, keys = (int(v) for v in tile.split("x"))
    return AttentionConfig(rows, keys, int(warps))


@dataclass(frozen=True)
class Rows:
    """Where one (batch, head)'s rows lie in a buffer, as IR text over the block index and
    the kernel's parameters: row ``r`` starts at ``base + r * stride``."""

    base: str
    stride: str


@dataclass(frozen=True)
class Attention:
    """What the template needs from the original kernel, as IR text over its parameters:
    the Q, K, V and O buffers (all laid out as ``rows``), the sequence length ``n``, the score
    scale, whether key j is masked for query i > j (``causal``), and the buffers the original
    also writes the rows' softmax maximum (of the scaled scores) and sum to, if any (laid out
    as ``stat_rows``, one element a row)."""

    q: str
    k: str
    v: str
    o: str
    n: str
    head_dim: int
    scale: str
    rows: Rows
    row_max: str = ""
    row_sum: str = ""
    stat_rows: Rows | None = None
    causal: bool = False
    dtype: str = "f32"  # Q, K, V and O's elements (f16 and bf16 are computed in f32)
    kv_rows: Rows | None = None  # K and V's, where they have fewer heads than Q


def body_text(cfg: AttentionConfig, a: Attention, dynamic: bool = False) -> list[str]:
    """The kernel body's lines (IR text); the grid is (ceil(n / rows), heads, batches), each
    (batch, head)'s rows where ``a.rows`` (and ``a.kv_rows``) say from block.y and .z.

    With two stages the key walk is a software pipeline (as warp-tile-matmul's, see
    :func:`kir.rewrites.matmul.warp_tiles.body_text`): iteration i copies K/V tile i into
    stage i % 2 — f32 rows by asynchronous 16-byte copies, 16-bit ones widened as before —
    while tile i - 1 is multiplied, one block barrier an iteration instead of two. With
    ``dynamic`` the tiles live in CUDA's dynamic shared memory (over 48 KB of arrays)."""
    d, rf, kt = a.head_dim, cfg.row_frags, cfg.keys
    kp, vp = d + 4, d + 8  # the K and V tiles' pitches
    sp, op = kt + 4, d + 4  # the scratch's pitch for S / P and for P·V
    rows_w = rf * FRAG  # query rows a warp
    scratch_w = rows_w * (max(kt, d) + 4)
    v_at = kt * kp  # V's tile follows K's in fa_T
    labels = iter(range(1_000))

    def loop(var: str, count: int, step_body: list[str]) -> list[str]:
        """A fully unrolled loop of ``count`` steps."""
        return ([f"for L{next(labels)} [pragma_unroll] {var}: i32 = 0; {var} < {count}; "
                 f"{var} = {var} + 1 {{"] + ["  " + line for line in step_body] + ["}"])

    def copy(buf: str, first_row: str, rows: int, dest: str, pitch: int, var: str,
             base: str = "fa_base", ld: str = "fa_ld", asynchronous: bool = False
             ) -> list[str]:
        """``rows`` rows of ``buf`` from row ``first_row`` of this head into shared memory at
        ``dest`` (pitch ``pitch``), zero past row n; each thread a share of 4-element pieces
        (one float4 load in f32 — ``asynchronous``: an asynchronous copy —; 16-bit elements
        read one by one and widened to f32)."""
        quads = d // 4
        e, row, col, v = f"{var}_e", f"{var}_r", f"{var}_c", f"{var}_v"
        at = f"{base} + ({first_row} + {row}) * {ld} + {col}"
        if a.dtype == "f32" and asynchronous:
            store = [f"  async {dest} + {row} * {pitch} + {col}] = {buf}[{at}] as f32x4"]
        elif a.dtype == "f32":
            store = [f"  let {v}: f32x4 = {buf}[{at}] as f32x4",
                     *(f"  {dest} + {row} * {pitch} + {col} + {c}] = {v}.{'xyzw'[c]}"
                       for c in range(4))]
        else:
            store = [f"  {dest} + {row} * {pitch} + {col} + {c}] = f32({buf}[{at} + {c}])"
                     for c in range(4)]
        return loop(var, rows * quads // cfg.threads, [
            f"let {e}: i32 = fa_tid + {var} * {cfg.threads}",
            f"let {row}: i32 = {e} / {quads}",
            f"let {col}: i32 = {e} % {quads} * 4",
            f"if {first_row} + {row} < {a.n} {{",
            *store,
            "} else {",
            *(f"  {dest} + {row} * {pitch} + {col} + {c}] = 0.0" for c in range(4)),
            "}"])

    pipelined = cfg.stages > 1
    tile = kt * (kp + vp)  # one stage of fa_T: K's tile, then V's
    at_tile = "fa_get + " if pipelined else ""  # where the tile being multiplied starts
    lines = [
        "shared dynamic fa_T: f32[0]" if dynamic else f"shared fa_T: f32[{cfg.stages * tile}]",
        f"shared fa_W: f32[{cfg.warps * scratch_w}]",
        "let fa_tid: i32 = i32(thread.x)",
        "let fa_warp: i32 = fa_tid / 32",
        "let fa_r: i32 = fa_tid % 32 / 4",
        "let fa_q: i32 = fa_tid % 4",
        f"let fa_base: i32 = {a.rows.base}",
        f"let fa_ld: i32 = {a.rows.stride}",
        f"let fa_row0: i32 = i32(block.x) * {cfg.rows}",
        f"let fa_s: i32 = fa_warp * {scratch_w}",
    ]
    kv = ("fa_base", "fa_ld")
    if a.kv_rows is not None:  # K and V with fewer heads: their own rows
        kv = ("fa_kvbase", "fa_kvld")
        lines += [f"let fa_kvbase: i32 = {a.kv_rows.base}",
                  f"let fa_kvld: i32 = {a.kv_rows.stride}"]
    # Q's rows through the warps' scratch (contiguous rows of pitch wp), into registers.
    wp = max(kt, d) + 4
    lines += copy(a.q, "fa_row0", cfg.rows, "fa_W[0", wp, "fa_cq")
    lines.append("barrier block")
    for f in range(rf):
        for j in range(d // FRAG):
            lines.append(f"matrix fa_q{f}_{j}: f32m8x8 = mload fa_W[(fa_warp * {rows_w} + "
                         f"{f * FRAG}) * {wp} + {j * FRAG}] stride {wp}")
    for f in range(rf):
        lines += [f"let fa_m{f}: f32 = -inf", f"let fa_l{f}: f32 = 0.0"]
        lines += [f"let fa_o{f}_{t}: f32 = 0.0" for t in range(d // 4)]
    lines.append("barrier block")
    put = "fa_put + " if pipelined else ""
    first = "fa_kn" if pipelined else "fa_k0"
    copies = [*copy(a.k, first, kt, f"fa_T[{put}0", kp, "fa_ck", *kv, asynchronous=pipelined),
              *copy(a.v, first, kt, f"fa_T[{put}{v_at}", vp, "fa_cv", *kv,
                    asynchronous=pipelined)]
    # S = Q·Kᵀ: fragment (f, c) rows f of the warp's queries, keys c of the tile.
    step = [f"matrix fa_s{f}_{c}: f32m8x8 = fill 0.0"
            for f in range(rf) for c in range(kt // FRAG)]
    for j in range(d // FRAG):
        for c in range(kt // FRAG):
            step.append(f"matrix fa_k{j}_{c}: f32m8x8 = mload "
                        f"fa_T[{at_tile}{c * FRAG * kp + j * FRAG}] stride {kp} transposed")
            step += [f"mma fa_s{f}_{c} += fa_q{f}_{j} * fa_k{j}_{c}" for f in range(rf)]
    step += [f"mstore fa_W[fa_s + {f * FRAG * sp + c * FRAG}] stride {sp} = fa_s{f}_{c}"
             for f in range(rf) for c in range(kt // FRAG)]
    step.append("barrier warp")
    for f in range(rf):
        at = f"fa_s + ({f * FRAG} + fa_r) * {sp} + fa_q + 4 * fa_t"
        key = "fa_k0 + fa_q + 4 * fa_t"
        valid = f"{key} < {a.n}" + (f" && {key} <= fa_qr{f}" if a.causal else "")
        score = f"select({valid}, fa_W[{at}] * ({a.scale}), -inf)"
        step += [f"let fa_mx{f}: f32 = -inf"]
        step += loop("fa_t", kt // 4, [f"fa_mx{f} = max(fa_mx{f}, {score})"])
        step += [f"fa_mx{f} = max(fa_mx{f}, shuffle.xor(fa_mx{f}, 1))",
                 f"fa_mx{f} = max(fa_mx{f}, shuffle.xor(fa_mx{f}, 2))",
                 f"let fa_mn{f}: f32 = max(fa_m{f}, fa_mx{f})",
                 f"let fa_a{f}: f32 = exp(fa_m{f} - fa_mn{f})",
                 f"let fa_ps{f}: f32 = 0.0"]
        step += loop("fa_t", kt // 4, [f"let fa_p: f32 = exp({score} - fa_mn{f})",
                                       f"fa_W[{at}] = fa_p",
                                       f"fa_ps{f} = fa_ps{f} + fa_p"])
        step += [f"fa_ps{f} = fa_ps{f} + shuffle.xor(fa_ps{f}, 1)",
                 f"fa_ps{f} = fa_ps{f} + shuffle.xor(fa_ps{f}, 2)",
                 f"fa_l{f} = fa_l{f} * fa_a{f} + fa_ps{f}",
                 f"fa_m{f} = fa_mn{f}"]
    step.append("barrier warp")
    # P·V: fragment (f, j) rows f of the warp's queries, columns j of the head.
    step += [f"matrix fa_pv{f}_{j}: f32m8x8 = fill 0.0"
             for f in range(rf) for j in range(d // FRAG)]
    for c in range(kt // FRAG):
        step += [f"matrix fa_p{f}_{c}: f32m8x8 = mload fa_W[fa_s + {f * FRAG * sp + c * FRAG}] "
                 f"stride {sp}" for f in range(rf)]
        for j in range(d // FRAG):
            step.append(f"matrix fa_v{c}_{j}: f32m8x8 = mload "
                        f"fa_T[{at_tile}{v_at + c * FRAG * vp} + {j * FRAG}] stride {vp}")
            step += [f"mma fa_pv{f}_{j} += fa_p{f}_{c} * fa_v{c}_{j}" for f in range(rf)]
    step.append("barrier warp")
    step += [f"mstore fa_W[fa_s + {f * FRAG * op + j * FRAG}] stride {op} = fa_pv{f}_{j}"
             for f in range(rf) for j in range(d // FRAG)]
    step.append("barrier warp")
    for f in range(rf):
        step += [f"fa_o{f}_{t} = fa_o{f}_{t} * fa_a{f} + "
                 f"fa_W[fa_s + ({f * FRAG} + fa_r) * {op} + fa_q + {4 * t}]"
                 for t in range(d // 4)]
    # The lane's query row of each row fragment; with a causal mask the keys stop at the
    # block's last row (the tiles past it are masked whole).
    lines += [f"let fa_qr{f}: i32 = fa_row0 + fa_warp * {rows_w} + {f * FRAG} + fa_r"
              for f in range(rf)]
    keys_end = f"min({a.n}, fa_row0 + {cfg.rows})" if a.causal else a.n
    if not pipelined:
        lines.append(f"for L{next(labels)} fa_k0: i32 = 0; fa_k0 < {keys_end}; "
                     f"fa_k0 = fa_k0 + {kt} {{")
        lines += ["  " + line for line in [*copies, "barrier block", *step, "barrier block"]]
        lines.append("}")
        return lines + _epilogue(cfg, a)
    lines += [f"let fa_tiles: i32 = ({keys_end} + {kt - 1}) / {kt}",
              f"for L{next(labels)} fa_i: i32 = 0; fa_i < fa_tiles + 1; fa_i = fa_i + 1 {{",
              "  if fa_i >= 1 {", "    async_wait 0", "    barrier block", "  }",
              "  if fa_i < fa_tiles {",
              f"    let fa_kn: i32 = fa_i * {kt}",
              f"    let fa_put: i32 = fa_i % 2 * {tile}",
              *("    " + line for line in copies),
              "  }",
              "  async_commit",
              "  if fa_i >= 1 {",
              f"    let fa_k0: i32 = (fa_i - 1) * {kt}",
              f"    let fa_get: i32 = (fa_i - 1) % 2 * {tile}",
              *("    " + line for line in step),
              "  }",
              "}"]
    return lines + _epilogue(cfg, a)


def _epilogue(cfg: AttentionConfig, a: Attention) -> list[str]:
    """Each lane's O elements divided by the row's sum, and the row's maximum and sum where
    the original writes them."""
    lines: list[str] = []
    rf, d = cfg.row_frags, a.head_dim
    if a.stat_rows is not None:
        lines.append(f"let fa_sbase: i32 = {a.stat_rows.base}")
    for f in range(rf):
        row = f"fa_qr{f}"
        lines.append(f"if {row} < {a.n} {{")
        out = "{}" if a.dtype == "f32" else f"{a.dtype}({{}})"
        lines += [f"  {a.o}[fa_base + {row} * fa_ld + fa_q + {4 * t}] = "
                  + out.format(f"fa_o{f}_{t} / fa_l{f}") for t in range(d // 4)]
        head_row = (f"fa_sbase + {row} * ({a.stat_rows.stride})" if a.stat_rows is not None
                    else "")
        if a.row_max:
            lines += ["  if fa_q == 0 {", f"    {a.row_max}[{head_row}] = fa_m{f}", "  }"]
        if a.row_sum:
            lines += ["  if fa_q == 0 {", f"    {a.row_sum}[{head_row}] = fa_l{f}", "  }"]
        lines.append("}")
    return lines
