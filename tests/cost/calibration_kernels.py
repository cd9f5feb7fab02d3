"""Hand-written kir IR kernels equivalent to published Apple-GPU measurements, with their
inputs (see :mod:`tests.cost.calibration`): SIMD-group matrix GEMMs (one shaped like Philip
Turner's metal-flash-attention GEMM, one transcribing vietfood/gemm_metal's
``tile_simdgroup``), the naive GEMM of the same repository, a streaming sum, an FA-2 attention
forward with 8x8 matrices, and FMA / simdgroup_matrix throughput probes."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from kir.ir import Kernel
from kir.ir.parser import parse_kernel

D_HEAD = 64


def gemm_simd_blocked() -> Kernel:
    """C[z] = A[z] B[z]: 128 threads = 2 x 2 SIMD-groups, each computing a 32 x 32 block of
    C as 4 x 4 accumulator fragments, A and B fragments loaded straight from device memory
    (the register-blocked structure of metal-flash-attention's GEMM). M, N multiples of 64,
    K of 8; the grid's z is the batch."""
    frags = [(i, j) for i in range(4) for j in range(4)]
    lines = ["  let w: i32 = i32(warp)", "  let z: i32 = i32(block.z)",
             "  let row: i32 = i32(block.y) * 64 + w / 2 * 32",
             "  let col: i32 = i32(block.x) * 64 + w % 2 * 32",
             "  let abase: i32 = z * M * K + row * K", "  let bbase: i32 = z * K * N + col"]
    lines += [f"  matrix c{i}{j}: f32m8x8 = fill 0.0" for i, j in frags]
    lines.append("  for L0 k: i32 = 0; k < K; k = k + 8 {")
    lines += [f"    matrix a{i}: f32m8x8 = mload A[abase + {i * 8} * K + k] stride K"
              for i in range(4)]
    lines += [f"    matrix b{j}: f32m8x8 = mload B[bbase + k * N + {j * 8}] stride N"
              for j in range(4)]
    lines += [f"    mma c{i}{j} += a{i} * b{j}" for i, j in frags]
    lines.append("  }")
    lines += [f"  mstore C[z * M * N + (row + {i * 8}) * N + col + {j * 8}] stride N = c{i}{j}"
              for i, j in frags]
    return _gemm_kernel("gemm_simd_blocked", ("N / 64", "M / 64", "batch"), (128, 1, 1),
                        lines)


def gemm_simd_8x8() -> Kernel:
    """vietfood/gemm_metal's ``tile_simdgroup``: 8 SIMD-groups (4 x 2) per 256-thread group,
    each one 8 x 8 block of C with one accumulator, an A and a B fragment from device memory
    per step of 8 along K."""
    lines = ["  let w: i32 = i32(warp)",
             "  let row: i32 = i32(block.y) * 32 + w / 2 * 8",
             "  let col: i32 = i32(block.x) * 16 + w % 2 * 8",
             "  matrix acc: f32m8x8 = fill 0.0",
             "  for L0 k: i32 = 0; k < K; k = k + 8 {",
             "    matrix a: f32m8x8 = mload A[row * K + k] stride K",
             "    matrix b: f32m8x8 = mload B[k * N + col] stride N",
             "    mma acc += a * b",
             "  }",
             "  mstore C[row * N + col] stride N = acc"]
    return _gemm_kernel("gemm_simd_8x8", ("N / 16", "M / 32", "1"), (256, 1, 1), lines)


def gemm_naive() -> Kernel:
    """vietfood/gemm_metal's ``naive``: one thread per element of C, 32 x 32 threads per
    group, the row from thread x (so A is read with a stride of K across a SIMD-group), and
    ``C = A B + C`` (alpha = beta = 1)."""
    lines = ["  let i: i32 = i32(block.x) * 32 + i32(thread.x)",
             "  let j: i32 = i32(block.y) * 32 + i32(thread.y)",
             "  let acc: f32 = 0.0",
             "  for L0 p: i32 = 0; p < K; p = p + 1 {",
             "    acc = acc + A[i * K + p] * B[p * N + j]",
             "  }",
             "  C[i * N + j] = acc + C[i * N + j]"]
    return _gemm_kernel("gemm_naive", ("M / 32", "N / 32", "1"), (32, 32, 1), lines)


def _gemm_kernel(name: str, grid: Sequence[str], block: Sequence[int],
                 body: list[str]) -> Kernel:
    grid_text = ", ".join(f'"{g}"' for g in grid)
    head = (f"kernel @{name}(A: f32* global const, B: f32* global const, C: f32* global, "
            f"M: i32, N: i32, K: i32)\n    grid=({grid_text}) "
            f"block=({block[0]}, {block[1]}, {block[2]}) shared_bytes=0 {{\n")
    return parse_kernel(head + "\n".join(body) + "\n}\n")


def stream_sum() -> Kernel:
    """A two-stage sum's first (and only costly) stage, the structure of ``mx.sum``: 256
    threads per group, each thread adding ``per_thread`` float4s along a grid-stride loop,
    a SIMD reduction, the group's 8 partials through threadgroup memory, one store per
    group."""
    return parse_kernel("""\
kernel @stream_sum(x: f32* global const, partial: f32* global, n4: i32, per_thread: i32)
    grid=("groups", "1", "1") block=(256, 1, 1) shared_bytes=0 {
  shared sums: f32[8]
  let stride: i32 = i32(grid_dim.x) * 256
  let acc: f32 = 0.0
  for L0 t: i32 = 0; t < per_thread; t = t + 1 {
    let v: f32x4 = x[(t * stride + i32(block.x) * 256 + i32(thread.x)) * 4] as f32x4
    acc = acc + (v.x + v.y + (v.z + v.w))
  }
  acc = reduce.sum(acc)
  if i32(lane) == 0 {
    sums[i32(warp)] = acc
  }
  barrier block
  if i32(thread.x) == 0 {
    let total: f32 = 0.0
    for L1 w: i32 = 0; w < 8; w = w + 1 {
      total = total + sums[w]
    }
    partial[i32(block.x)] = total
  }
}
""")


def attention_simd() -> Kernel:
    """FA-2 forward with 8x8 SIMD-group matrices, f32, head dimension 64, the structure of
    MLX's fused attention: a 128-thread group takes 32 query rows (8 per SIMD-group, their Q
    fragments held in registers) and walks the keys 32 at a time, each K block and then V
    block loaded once per group into one threadgroup buffer (float4 loads and stores);
    S = Q K^T as 8 x 4 fragment products, the online softmax on S in threadgroup memory
    (lane l owns row l / 4, columns l % 4 + 4 t), O rescaled by a diagonal fragment
    (``O += (diag(alpha) - I) O``: fragments are opaque in kir IR, where MLX scales its
    registers), then O += P V. Grid: (N / 32, B H). Threadgroup rows are padded (68 and 36
    floats) so fragment loads meet no bank conflicts."""
    d8 = range(D_HEAD // 8)
    lines = [
        "  shared KV: f32[2176]",  # 32 keys x stride 68: the K block, then the V block
        "  shared Ss: f32[1152]",  # 4 SIMD-groups x 8 rows x stride 36
        "  shared Dg: f32[256]",  # 4 SIMD-groups x 8 x 8
        "  let tid: i32 = i32(thread.x)",
        "  let sg: i32 = i32(warp)",
        "  let ln: i32 = i32(lane)",
        "  let r: i32 = ln / 4",
        "  let q: i32 = ln % 4",
        "  let base: i32 = i32(block.y) * N * 64",
        "  let row0: i32 = i32(block.x) * 32 + sg * 8",
    ]
    lines += [f"  matrix q{j}: f32m8x8 = mload Q[base + row0 * 64 + {j * 8}] stride 64"
              for j in d8]
    lines += [f"  matrix o{j}: f32m8x8 = fill 0.0" for j in d8]
    lines += ["  let m: f32 = -3.0e38", "  let l: f32 = 0.0"]

    def stage(buffer: str, label: str) -> list[str]:
        return [f"    for {label} e: i32 = tid; e < 512; e = e + 128 {{",
                f"      let kv: f32x4 = {buffer}[base + (kb + e / 16) * 64 + e % 16 * 4] "
                "as f32x4",
                "      KV[e / 16 * 68 + e % 16 * 4] = kv",
                "    }",
                "    barrier block"]

    lines.append("  for L1 kb: i32 = 0; kb < N; kb = kb + 32 {")
    lines += stage("K", "L2")
    lines += [f"    matrix s{c}: f32m8x8 = fill 0.0" for c in range(4)]
    for j in d8:
        for c in range(4):
            lines += [f"    matrix k{j}_{c}: f32m8x8 = mload KV[{c * 8 * 68 + j * 8}] "
                      "stride 68 transposed",
                      f"    mma s{c} += q{j} * k{j}_{c}"]
    lines += [f"    mstore Ss[sg * 288 + {c * 8}] stride 36 = s{c}" for c in range(4)]
    lines += [
        "    barrier block",
        "    let mx: f32 = -3.0e38",
        "    for L3 t: i32 = 0; t < 8; t = t + 1 {",
        "      mx = max(mx, Ss[sg * 288 + r * 36 + q + 4 * t] * scale)",
        "    }",
        "    mx = max(mx, shuffle.xor(mx, 1))",
        "    mx = max(mx, shuffle.xor(mx, 2))",
        "    let m_new: f32 = max(m, mx)",
        "    let alpha: f32 = exp(m - m_new)",
        "    let ps: f32 = 0.0",
        "    for L4 t: i32 = 0; t < 8; t = t + 1 {",
        "      let p: f32 = exp(Ss[sg * 288 + r * 36 + q + 4 * t] * scale - m_new)",
        "      Ss[sg * 288 + r * 36 + q + 4 * t] = p",
        "      ps = ps + p",
        "    }",
        "    ps = ps + shuffle.xor(ps, 1)",
        "    ps = ps + shuffle.xor(ps, 2)",
        "    l = l * alpha + ps",
        "    m = m_new",
        "    Dg[sg * 64 + r * 8 + q * 2] = select(r == q * 2, alpha - 1.0, 0.0)",
        "    Dg[sg * 64 + r * 8 + q * 2 + 1] = select(r == q * 2 + 1, alpha - 1.0, 0.0)",
    ]
    lines += stage("V", "L5")
    lines.append("    matrix dg: f32m8x8 = mload Dg[sg * 64] stride 8")
    lines += [f"    mma o{j} += dg * o{j}" for j in d8]
    lines += [
        "    for L6 c: i32 = 0; c < 32; c = c + 8 {",
        "      matrix pf: f32m8x8 = mload Ss[sg * 288 + c] stride 36",
    ]
    for j in d8:
        lines += [f"      matrix v{j}: f32m8x8 = mload KV[c * 68 + {j * 8}] stride 68",
                  f"      mma o{j} += pf * v{j}"]
    lines += [
        "    }",
        "    barrier block",
        "  }",
        "  Dg[sg * 64 + r * 8 + q * 2] = select(r == q * 2, 1.0 / l - 1.0, 0.0)",
        "  Dg[sg * 64 + r * 8 + q * 2 + 1] = select(r == q * 2 + 1, 1.0 / l - 1.0, 0.0)",
        "  barrier block",
        "  matrix fin: f32m8x8 = mload Dg[sg * 64] stride 8",
    ]
    lines += [f"  mma o{j} += fin * o{j}" for j in d8]
    lines += [f"  mstore O[base + row0 * 64 + {j * 8}] stride 64 = o{j}" for j in d8]
    head = ("kernel @attention_simd(Q: f32* global const, K: f32* global const, "
            "V: f32* global const, O: f32* global, N: i32, scale: f32)\n"
            '    grid=("N / 32", "BH", "1") block=(128, 1, 1) shared_bytes=0 {\n')
    return parse_kernel(head + "\n".join(lines) + "\n}\n")


def fma_micro() -> Kernel:
    """Peak-FLOPS probe: 256 threads per group, 16 independent multiply-add chains per
    thread, ``iters`` steps; flops = groups x 256 x iters x 32."""
    accs = range(16)
    lines = ["  let g: i32 = i32(block.x) * 256 + i32(thread.x)",
             "  let x: f32 = src[g]"]
    lines += [f"  let acc{i}: f32 = x + {i}.0" for i in accs]
    lines.append("  for L0 t: i32 = 0; t < iters; t = t + 1 {")
    lines += [f"    acc{i} = acc{i} * 0.999 + 0.5" for i in accs]
    lines.append("  }")
    lines.append("  dst[g] = " + " + ".join(f"acc{i}" for i in accs))
    head = ("kernel @fma_micro(src: f32* global const, dst: f32* global, iters: i32)\n"
            '    grid=("groups", "1", "1") block=(256, 1, 1) shared_bytes=0 {\n')
    return parse_kernel(head + "\n".join(lines) + "\n}\n")


def mma_micro() -> Kernel:
    """simdgroup_matrix probe: 128 threads per group, each SIMD-group 4 independent 8x8
    accumulators, ``iters`` steps of 4 products; flops = groups x 4 x iters x 4 x 1024."""
    lines = ["  let w: i32 = i32(block.x) * 4 + i32(warp)",
             "  matrix a: f32m8x8 = mload src[0] stride 8",
             "  matrix b: f32m8x8 = mload src[64] stride 8"]
    lines += [f"  matrix c{i}: f32m8x8 = fill 0.0" for i in range(4)]
    lines.append("  for L0 t: i32 = 0; t < iters; t = t + 1 {")
    lines += [f"    mma c{i} += a * b" for i in range(4)]
    lines.append("  }")
    lines += [f"  mstore dst[w * 256 + {i * 64}] stride 8 = c{i}" for i in range(4)]
    head = ("kernel @mma_micro(src: f32* global const, dst: f32* global, iters: i32)\n"
            '    grid=("groups", "1", "1") block=(128, 1, 1) shared_bytes=0 {\n')
    return parse_kernel(head + "\n".join(lines) + "\n}\n")


# ------------------------------------------------------------------------------- inputs


def micro_inputs(sizes: Mapping[str, int], seed: int = 0) -> dict[str, object]:
    """Inputs of :func:`fma_micro` and :func:`mma_micro` (values in [0, 0.01))."""
    rng = np.random.default_rng(seed)
    n = sizes["groups"] * 256
    return {"src": rng.uniform(0, 0.01, n).astype(np.float32),
            "dst": np.zeros(n * 4, np.float32), "iters": sizes["iters"]}



def gemm_inputs(sizes: Mapping[str, int], seed: int = 0) -> dict[str, object]:
    """A, B (uniform in [-1, 1)), C zero, and the scalars, for the GEMM kernels."""
    rng = np.random.default_rng(seed)
    m, n, k, z = sizes["M"], sizes["N"], sizes["K"], sizes.get("batch", 1)
    return {"A": rng.uniform(-1, 1, z * m * k).astype(np.float32),
            "B": rng.uniform(-1, 1, z * k * n).astype(np.float32),
            "C": np.zeros(z * m * n, np.float32), "M": m, "N": n, "K": k}


def sum_inputs(sizes: Mapping[str, int], seed: int = 0) -> dict[str, object]:
    """``n4 = groups x 256 x per_thread`` float4s and one partial per group."""
    rng = np.random.default_rng(seed)
    n4 = sizes["groups"] * 256 * sizes["per_thread"]
    return {"x": rng.uniform(-1, 1, n4 * 4).astype(np.float32),
            "partial": np.zeros(sizes["groups"], np.float32), "n4": n4,
            "per_thread": sizes["per_thread"]}


def attention_inputs(sizes: Mapping[str, int], seed: int = 0) -> dict[str, object]:
    """Q, K, V of shape (B H, N, 64), O zero, scale 1 / sqrt(64)."""
    rng = np.random.default_rng(seed)
    shape = (sizes["BH"] * sizes["N"] * D_HEAD,)
    return {"Q": rng.standard_normal(shape).astype(np.float32),
            "K": rng.standard_normal(shape).astype(np.float32),
            "V": rng.standard_normal(shape).astype(np.float32),
            "O": np.zeros(shape, np.float32), "N": sizes["N"], "scale": D_HEAD ** -0.5}


def attention_reference(args: Mapping[str, object], sizes: Mapping[str, int]) -> np.ndarray:
    """softmax(Q K^T / sqrt(d)) V in float64, flat like ``O``."""
    shape = (sizes["BH"], sizes["N"], D_HEAD)
    q, k, v = (np.asarray(args[n], np.float64).reshape(shape) for n in "QKV")
    s = q @ k.transpose(0, 2, 1) * D_HEAD ** -0.5
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((p / p.sum(axis=-1, keepdims=True)) @ v).reshape(-1)
