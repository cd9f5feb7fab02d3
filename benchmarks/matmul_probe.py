"""Which structure a warp-tiled TF32 GEMM still lacks on the H200: times hand-written variants
of the kernel ``warp-tile-matmul`` + ``tf32-matrix`` build (same block tile, same warps, same
m16n8k8 instruction) through ``mx.fast.cuda_kernel`` at 2048^3, each changed in one way:

- ``pair``: two 8x8 products sharing a B fragment issued as one m16n8k8 (rows 8-15 of the
  instruction carry the second product instead of zeros);
- ``vec``: the tiles copied from global memory with 16-byte loads (float4), whole tiles only,
  the scalar bounds-checked copy kept for the edges;
- ``round``: operands rounded to TF32 once, when stored to shared memory, not per fragment;
- ``db``: two shared buffers, the next tile's loads issued before the current tile's products
  and one barrier per k step;
- ``asyncN``: N shared buffers filled by ``cp.async`` (sm_80+: global to shared without
  registers), N - 1 tiles in flight while the current one is multiplied, one barrier per k
  step (the multistage pipeline of CUTLASS's Ampere GEMMs); whole tiles only, the edges
  copied as ``vec`` does.

Each variant is checked against ``a @ b`` first; ``a @ b`` is timed in the same run (median
of 20 after 5 warm-ups, ``mx.eval`` per call).

    python benchmarks/matmul_probe.py [--size 2048]
"""

from __future__ import annotations

import argparse
import itertools
import sys

HELPERS = r"""
__device__ __forceinline__ float probe_tf32(float x) {
    unsigned int u = __float_as_uint(x);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    return __uint_as_float(u);
}
__device__ __forceinline__ void probe_mma(float* c0, float* c1, unsigned a0, unsigned a1,
                                          unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    float z2 = c1 ? c1[0] : 0.0f, z3 = c1 ? c1[1] : 0.0f;
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c0[0]), "+f"(c0[1]), "+f"(z2), "+f"(z3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if (c1) { c1[0] = z2; c1[1] = z3; }
}
__device__ __forceinline__ void probe_cp16(float* dst, const float* src) {
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(src));
}
"""


def source(bm: int, bn: int, bk: int, wm_: int, wn_: int, pair: bool, vec: bool,
           round_: bool, db: bool, pipe: int = 0) -> str:
    """The kernel body for ``mx.fast.cuda_kernel`` (inputs A, B, M, N, K; output C)."""
    threads = wm_ * wn_ * 32
    sa, sb = bk + 4, bn + 8
    fm, fn = bm // wm_ // 8, bn // wn_ // 8
    stages = pipe or (2 if db else 1)
    rnd = "probe_tf32" if round_ else ""
    load_rnd = "" if round_ else "probe_tf32"
    out = ["const int M_ = M[0], N_ = N[0], K_ = K[0];",
           f"__shared__ __align__(16) float As[{stages}][{bm * sa}];",
           f"__shared__ __align__(16) float Bs[{stages}][{bk * sb}];",
           "int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;",
           "int g = lane >> 2, t = lane & 3;",
           f"int m0 = blockIdx.y * {bm}, n0 = blockIdx.x * {bn};",
           f"int wm = warp / {wn_} * {bm // wm_}, wn = warp % {wn_} * {bn // wn_};",
           f"float acc[{fm}][{fn}][2] = {{}};"]
    # the copy of one k step into stage s
    if vec:
        va, vb = bm * bk // 4 // threads, bk * bn // 4 // threads
        copy = [
            "bool whole = m0 + %d <= M_ && n0 + %d <= N_ && k0 + %d <= K_ && K_ %% 4 == 0 && N_ %% 4 == 0;" % (bm, bn, bk),
            "if (whole) {",
            f"  #pragma unroll\n  for (int i = 0; i < {va}; ++i) {{",
            f"    int e = (tid + i * {threads}) * 4; int r = e / {bk}, c = e % {bk};",
            *(["    probe_cp16(&As[s][r * %d + c], &A[(m0 + r) * K_ + k0 + c]);" % sa] if pipe else [
            "    float4 v = *reinterpret_cast<const float4*>(&A[(m0 + r) * K_ + k0 + c]);",
            f"    float* d = &As[s][r * {sa} + c]; d[0] = {rnd}(v.x); d[1] = {rnd}(v.y); d[2] = {rnd}(v.z); d[3] = {rnd}(v.w);"]),
            "  }",
            f"  #pragma unroll\n  for (int i = 0; i < {vb}; ++i) {{",
            f"    int e = (tid + i * {threads}) * 4; int r = e / {bn}, c = e % {bn};",
            *(["    probe_cp16(&Bs[s][r * %d + c], &B[(k0 + r) * N_ + n0 + c]);" % sb] if pipe else [
            "    float4 v = *reinterpret_cast<const float4*>(&B[(k0 + r) * N_ + n0 + c]);",
            f"    float* d = &Bs[s][r * {sb} + c]; d[0] = {rnd}(v.x); d[1] = {rnd}(v.y); d[2] = {rnd}(v.z); d[3] = {rnd}(v.w);"]),
            "  }",
            "} else {"]
    else:
        copy = ["{"]
    copy += [
        f"  #pragma unroll\n  for (int i = 0; i < {bm * bk // threads}; ++i) {{",
        f"    int e = tid + i * {threads}; int r = e / {bk}, c = e % {bk};",
        f"    As[s][r * {sa} + c] = {rnd}(m0 + r < M_ && k0 + c < K_ ? A[(m0 + r) * K_ + k0 + c] : 0.0f);",
        "  }",
        f"  #pragma unroll\n  for (int i = 0; i < {bk * bn // threads}; ++i) {{",
        f"    int e = tid + i * {threads}; int r = e / {bn}, c = e % {bn};",
        f"    Bs[s][r * {sb} + c] = {rnd}(k0 + r < K_ && n0 + c < N_ ? B[(k0 + r) * N_ + n0 + c] : 0.0f);",
        "  }",
        "}"]
    compute = [f"#pragma unroll\nfor (int kk = 0; kk < {bk}; kk += 8) {{",
               f"  unsigned a[{fm}][2], b[{fn}][2];"]
    compute += [f"  #pragma unroll\n  for (int i = 0; i < {fm}; ++i) {{",
                f"    const float* p = &As[s][(wm + i * 8 + g) * {sa} + kk + t];",
                f"    a[i][0] = __float_as_uint({load_rnd}(p[0])); a[i][1] = __float_as_uint({load_rnd}(p[4]));",
                "  }",
                f"  #pragma unroll\n  for (int j = 0; j < {fn}; ++j) {{",
                f"    const float* p = &Bs[s][(kk + t) * {sb} + wn + j * 8 + g];",
                f"    b[j][0] = __float_as_uint({load_rnd}(p[0])); b[j][1] = __float_as_uint({load_rnd}(p[4 * {sb}]));",
                "  }"]
    if pair:
        compute += [f"  #pragma unroll\n  for (int j = 0; j < {fn}; ++j) {{",
                    f"    #pragma unroll\n    for (int i = 0; i < {fm}; i += 2)",
                    "      probe_mma(acc[i][j], acc[i + 1][j], a[i][0], a[i + 1][0], a[i][1], a[i + 1][1], b[j][0], b[j][1]);",
                    "  }"]
    else:
        compute += [f"  #pragma unroll\n  for (int i = 0; i < {fm}; ++i)",
                    f"    #pragma unroll\n    for (int j = 0; j < {fn}; ++j)",
                    "      probe_mma(acc[i][j], nullptr, a[i][0], 0u, a[i][1], 0u, b[j][0], b[j][1]);"]
    compute.append("}")
    if pipe:
        commit = 'asm volatile("cp.async.commit_group;");'
        out += [f"#pragma unroll\nfor (int p = 0; p < {pipe - 1}; ++p) {{",
                f"  int s = p, k0 = p * {bk};", "  if (k0 < K_) {"] + copy + ["  }",
                f"  {commit}", "}",
                f"for (int k0 = 0, step = 0; k0 < K_; k0 += {bk}, ++step) {{",
                f'  asm volatile("cp.async.wait_group {pipe - 2};");', "  __syncthreads();",
                f"  {{ int s = (step + {pipe - 1}) % {pipe}; int k0n = k0 + {(pipe - 1) * bk};",
                "    if (k0n < K_) { int k0 = k0n;"] + copy + ["    }", f"    {commit}", "  }",
                f"  const int s = step % {pipe};"] + compute + ["}"]
    elif db:
        out += ["{ int s = 0, k0 = 0;"] + copy + ["}", "__syncthreads();",
                f"for (int k0 = 0, s = 0; k0 < K_; k0 += {bk}, s ^= 1) {{",
                f"  if (k0 + {bk} < K_) {{ int s2 = s ^ 1; int k1 = k0 + {bk};",
                "    { int s = s2, k0 = k1;"] + copy + ["    }", "  }"] + compute + [
                "  __syncthreads();", "}"]
    else:
        out += [f"for (int k0 = 0; k0 < K_; k0 += {bk}) {{", "  const int s = 0;"] + copy + [
                "  __syncthreads();"] + compute + ["  __syncthreads();", "}"]
    out += [f"#pragma unroll\nfor (int i = 0; i < {fm}; ++i)",
            f"  #pragma unroll\n  for (int j = 0; j < {fn}; ++j)",
            "    #pragma unroll\n    for (int h = 0; h < 2; ++h) {",
            "      int r = m0 + wm + i * 8 + g, c = n0 + wn + j * 8 + 2 * t + h;",
            "      if (r < M_ && c < N_) C[r * N_ + c] = acc[i][j][h];",
            "    }"]
    return "\n".join(out)


VARIANTS = {  # name: (pair, vec, round, db[, cp.async stages])
    "emitted-like": (False, False, False, False),
    "pair": (True, False, False, False),
    "round": (False, False, True, False),
    "vec": (False, True, False, False),
    "pair+vec": (True, True, False, False),
    "pair+vec+round": (True, True, True, False),
    "pair+vec+round+db": (True, True, True, True),
    "pair+round+db": (True, False, True, True),
    "pair+vec+async2": (True, True, False, False, 2),
    "pair+vec+async3": (True, True, False, False, 3),
    "pair+vec+async4": (True, True, False, False, 4),
}
TILES = [(64, 128, 16, 2, 2), (128, 128, 16, 2, 2), (128, 128, 32, 2, 4), (64, 128, 32, 2, 2),
         (128, 64, 16, 2, 2), (128, 128, 16, 4, 2), (128, 128, 32, 4, 2)]
EXTRA_TILES = [(128, 128, 8, 2, 2), (128, 256, 8, 2, 4), (256, 128, 8, 4, 2)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--emit", action="store_true", help="print one variant's source")
    parser.add_argument("--variant", default="pair+vec+round+db", choices=VARIANTS,
                        help="the variant --emit prints, at the first tile")
    parser.add_argument("--only", nargs="*", choices=VARIANTS, help="time these variants only")
    parser.add_argument("--tiles", nargs="*", help="block tiles to time, as BMxBNxBK/WMxWN")
    args = parser.parse_args(argv)
    if args.emit:
        print(HELPERS + source(*TILES[0], *VARIANTS[args.variant]))
        return 0
    import mlx.core as mx
    from mlx_timing import median_ms  # beside this script

    n = args.size
    a = mx.random.normal((n, n)).astype(mx.float32)
    b = mx.random.normal((n, n)).astype(mx.float32)
    ref = a @ b
    mx.eval(ref)
    base, _ = median_ms(lambda: a @ b)
    print(f"a @ b: {base:.4f} ms  (n={n})", flush=True)
    scalars = [mx.array(n, dtype=mx.int32)] * 3
    tiles = TILES + EXTRA_TILES
    if args.tiles:
        tiles = [t for t in tiles if f"{t[0]}x{t[1]}x{t[2]}/{t[3]}x{t[4]}" in args.tiles]
    variants = {k: v for k, v in VARIANTS.items() if not args.only or k in args.only}
    for tile, (name, knobs) in itertools.product(tiles, variants.items()):
        bm, bn, bk, wm_, wn_ = tile
        if len(knobs) > 4 and 4 * knobs[4] * (bm * (bk + 4) + bk * (bn + 8)) > 48 * 1024:
            continue  # over the 48 KB of static shared memory a block may have
        threads = wm_ * wn_ * 32
        if (bm // wm_ // 8) % 2 and knobs[0]:
            continue
        kern = mx.fast.cuda_kernel(name=f"probe_{bm}_{bn}_{bk}_{wm_}_{wn_}_{abs(hash(name))}",
                                   input_names=["A", "B", "M", "N", "K"], output_names=["C"],
                                   header=HELPERS, source=source(*tile, *knobs))

        def call():
            return kern(inputs=[a, b, *scalars], grid=(n // bn * threads, n // bm, 1),
                        threadgroup=(threads, 1, 1), output_shapes=[(n, n)],
                        output_dtypes=[mx.float32])[0]
        try:
            err = float(mx.max(mx.abs(call() - ref)))
            ms, _ = median_ms(call)
        except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
            print(f"{bm}x{bn}x{bk}/{wm_}x{wn_} {name}: failed: {exc}", flush=True)
            continue
        print(f"{bm}x{bn}x{bk}/{wm_}x{wn_} {name:20s} {ms:.4f} ms  {base / ms:.3f}x  "
              f"max err {err:.3g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
