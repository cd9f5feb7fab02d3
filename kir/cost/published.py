"""Published timings of kernels on Apple GPUs, the figures the cost model is calibrated
against (``benchmarks/cost_model_calibration.py`` models an equivalent kernel for each and
prints the ratio). Data only: every figure names its source, chip, sizes and what it times.

Sources (see also :mod:`kir.cost.profiles`):

* [MFA]  Philip Turner, github.com/philipturner/metal-flash-attention, README, table "GFLOPS
         during general matrix multiplication": "32-core Apple 7 GPU" (M1 Max), F32, square
         NN GEMM. MFA F32: 1024^3 8185, 2048^3 8992, 4096^3 9247 GFLOPS; MPS F32 2048^3 8472.
* [GM]   vietfood/gemm_metal, README, table "How fast are we so far?": best GFLOPS over square
         sizes 256..3840 (step 128, ``gemm/params.h``) on an 8-core-GPU M2, GPU timestamps:
         ``naive`` ~178, ``tile_16`` ~269, ``tile_simdgroup`` ~421.
* [MLXB] github.com/TristanBilot/mlx-benchmark, benchmarks/detailed_benchmark.md (commit
         ccaeaf9): MLX built-ins, f32, one call timed with ``mx.eval`` after one untimed call,
         mean of 5, ms; MLX 0.2.0 on the M1 Max, M3 and M3 Max, 0.5.0 on the M2 Max, not
         stated for the M1 (8-core GPU). Python dispatch and the wait are inside the time.
* [MLX1610] ml-explore/mlx pull request #1610 "Matrix Attention kernel" (Nov 2024), the
         author's table from ``benchmarks/python/sdpa_bench.py`` on an M3 Max:
         ``mx.fast.scaled_dot_product_attention``, float16, B=1, 32 heads, head dim 64,
         qsl = ksl. The script prints seconds for 40 timed calls of a function doing 8
         attentions (``N_iter_bench = 40``, ``N_iter_func = 8``), so one attention is the
         printed figure / 320: N=1024 0.251 s -> 0.784 ms, 2048 0.954 -> 2.98, 4096 3.747
         -> 11.71.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    """One published measurement: ``ms`` for one launch (rates converted to time at the
    stated sizes) on ``profile``; ``fitted`` when a model constant was set from it."""

    key: str
    what: str
    profile: str
    sizes: tuple[tuple[str, int], ...]
    ms: float
    source: str
    note: str = ""
    fitted: bool = False


def _gemm_ms(n: int, gflops: float, batch: int = 1) -> float:
    return 2 * n ** 3 * batch / (gflops * 1e9) * 1e3


SUM_BYTES = 1_000_000 * 128 * 4
SOFTMAX_ROWS = 64 * 16 * 32  # mlx-benchmark's Softmax dim=64x16x32x1024, axis -1
BMM_FLOPS = 2 * 1000 * 1024 * 64 * 256  # MatMul dim=1000x1024x64 @ 1000x64x256


FIGURES: tuple[Published, ...] = (
    Published("mfa-gemm-1024", "MFA F32 GEMM 1024^3, 8185 GFLOPS", "apple-m1-max",
              (("n", 1024),), _gemm_ms(1024, 8185), "[MFA]"),
    Published("mfa-gemm-2048", "MFA F32 GEMM 2048^3, 8992 GFLOPS", "apple-m1-max",
              (("n", 2048),), _gemm_ms(2048, 8992), "[MFA]"),
    Published("mps-gemm-2048", "MPS F32 GEMM 2048^3, 8472 GFLOPS", "apple-m1-max",
              (("n", 2048),), _gemm_ms(2048, 8472), "[MFA]"),
    Published("gm-naive", "gemm_metal naive, best ~178 GFLOPS", "apple-m2-8c",
              (("n", 2048),), _gemm_ms(2048, 178), "[GM]",
              "best over sizes 256..3840; modelled at 2048"),
    Published("gm-tile16", "gemm_metal tile_16 (= examples/sgemm.cu TILE=16), ~269 GFLOPS",
              "apple-m2-8c", (("n", 2048),), _gemm_ms(2048, 269), "[GM]",
              "best over sizes 256..3840; modelled at 2048; theirs also reads C (beta = 1)"),
    Published("gm-simd", "gemm_metal tile_simdgroup, ~421 GFLOPS", "apple-m2-8c",
              (("n", 2048),), _gemm_ms(2048, 421), "[GM]",
              "best over sizes 256..3840; modelled at 2048"),
    Published("mlxb-sum-m1", "mx.sum 1000000x128 f32 (512 MB), 9.13 ms", "apple-m1",
              (("bytes", SUM_BYTES),), 9.13, "[MLXB]", fitted=True),
    Published("mlxb-sum-m1max", "mx.sum 512 MB, 1.68 ms", "apple-m1-max",
              (("bytes", SUM_BYTES),), 1.68, "[MLXB]", "GPU core count not stated",
              fitted=True),
    Published("mlxb-sum-m2max", "mx.sum 512 MB, 1.52 ms (MLX 0.5.0)", "apple-m2-max",
              (("bytes", SUM_BYTES),), 1.52, "[MLXB]", fitted=True),
    Published("mlxb-sum-m3", "mx.sum 512 MB, 5.52 ms", "apple-m3",
              (("bytes", SUM_BYTES),), 5.52, "[MLXB]", "GPU core count not stated",
              fitted=True),
    Published("mlxb-sum-m3max", "mx.sum 512 MB, 1.50 ms", "apple-m3-max",
              (("bytes", SUM_BYTES),), 1.50, "[MLXB]", fitted=True),
    Published("mlxb-softmax-m1", "mx.softmax 32768x1024 f32, 4.81 ms", "apple-m1",
              (("rows", SOFTMAX_ROWS), ("cols", 1024)), 4.81, "[MLXB]"),
    Published("mlxb-softmax-m1max", "mx.softmax 32768x1024, 3.25 ms", "apple-m1-max",
              (("rows", SOFTMAX_ROWS), ("cols", 1024)), 3.25, "[MLXB]",
              "GPU core count not stated"),
    Published("mlxb-softmax-m2max", "mx.softmax 32768x1024, 3.00 ms (MLX 0.5.0)",
              "apple-m2-max", (("rows", SOFTMAX_ROWS), ("cols", 1024)), 3.00, "[MLXB]"),
    Published("mlxb-softmax-m3", "mx.softmax 32768x1024, 3.29 ms", "apple-m3",
              (("rows", SOFTMAX_ROWS), ("cols", 1024)), 3.29, "[MLXB]",
              "GPU core count not stated"),
    Published("mlxb-softmax-m3max", "mx.softmax 32768x1024, 3.13 ms", "apple-m3-max",
              (("rows", SOFTMAX_ROWS), ("cols", 1024)), 3.13, "[MLXB]"),
    Published("mlxb-bmm-m1", "a @ b, 1000 x (1024x64 @ 64x256) f32, 25.69 ms", "apple-m1",
              (("batch", 1000), ("M", 1024), ("N", 256), ("K", 64)), 25.69, "[MLXB]"),
    Published("mlxb-bmm-m1max", "a @ b, 1000 x (1024x64 @ 64x256), 4.84 ms", "apple-m1-max",
              (("batch", 1000), ("M", 1024), ("N", 256), ("K", 64)), 4.84, "[MLXB]",
              "GPU core count not stated: 32 assumed"),
    Published("mlxb-bmm-m2max", "a @ b, 1000 x (1024x64 @ 64x256), 4.24 ms (MLX 0.5.0)",
              "apple-m2-max", (("batch", 1000), ("M", 1024), ("N", 256), ("K", 64)), 4.24,
              "[MLXB]"),
    Published("mlxb-bmm-m3max", "a @ b, 1000 x (1024x64 @ 64x256), 4.65 ms", "apple-m3-max",
              (("batch", 1000), ("M", 1024), ("N", 256), ("K", 64)), 4.65, "[MLXB]"),
    Published("mlx-sdpa-1024", "mx.fast.scaled_dot_product_attention f16 B=1 H=32 N=1024 "
              "D=64, 0.784 ms", "apple-m3-max", (("BH", 32), ("N", 1024)), 0.251 / 320 * 1e3,
              "[MLX1610]", "float16 published, f32 modelled; core count not stated: 40 "
              "assumed"),
    Published("mlx-sdpa-2048", "same at N=2048, 2.98 ms", "apple-m3-max",
              (("BH", 32), ("N", 2048)), 0.954 / 320 * 1e3, "[MLX1610]",
              "float16 published, f32 modelled"),
    Published("mlx-sdpa-4096", "same at N=4096, 11.71 ms", "apple-m3-max",
              (("BH", 32), ("N", 4096)), 3.747 / 320 * 1e3, "[MLX1610]",
              "float16 published, f32 modelled"),
)

__all__ = ["BMM_FLOPS", "FIGURES", "Published", "SOFTMAX_ROWS", "SUM_BYTES"]
