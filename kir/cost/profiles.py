"""Apple M-series GPU profiles for the analytical cost model: data, each number with its source.

Sources, cited per number below:

* [A-M1]   Apple newsroom, "Apple unleashes M1", 10 Nov 2020: 8-core GPU, 2.6 TFLOPS,
           128 execution units per core ("1024 execution units").
* [A-M1PM] Apple newsroom, "Introducing M1 Pro and M1 Max", 18 Oct 2021: M1 Pro 16-core GPU,
           5.2 TFLOPS, 200 GB/s; M1 Max 32-core GPU, 10.4 TFLOPS, 400 GB/s.
* [A-M2]   Apple newsroom, "Apple unveils M2", 6 Jun 2022: 10-core GPU, 3.6 TFLOPS, 100 GB/s.
* [A-M2PM] Apple newsroom, "Apple unveils M2 Pro and M2 Max", 17 Jan 2023: 19-core GPU,
           200 GB/s; 38-core GPU, 400 GB/s.
* [A-M3]   Apple newsroom, "Apple unveils M3, M3 Pro, and M3 Max", 30 Oct 2023: M3 10-core
           GPU, 100 GB/s; M3 Max up to 40-core GPU, 400 GB/s.
* [A-M4]   Apple newsroom, "Apple introduces M4 chip", 7 May 2024: 10-core GPU, 120 GB/s.
* [A-M4PM] Apple newsroom, "Apple introduces M4 Pro and M4 Max", 30 Oct 2024: M4 Pro 20-core
           GPU, 273 GB/s; M4 Max 40-core GPU, 546 GB/s.
* [MFT]    Apple, Metal Feature Set Tables: 32 KiB threadgroup memory and 1024 threads per
           threadgroup on Apple7+ GPU families; SIMD-group width 32.
* [PT]     Philip Turner, github.com/philipturner/metal-benchmarks, README (commit 936d911),
           measured on the M1 Max / A14: 128 FP32 lanes per core (4 schedulers x 32); GPU
           clocks (M1 1278 MHz, M1 Pro/Max 1296 MHz, M2 1398 MHz); per core 64 KB threadgroup
           memory, 384 KB register file, 768-3072 resident threads; instruction throughput in
           cycles per SIMD-group instruction on one of the four schedulers: FADD/FFMA32 1,
           DIV32 6.01, EXP2_32 4.00, RSQRT32 8, SHUFFLE / BROADCAST32 2.04, simd_sum F32
           14.54, simdgroup_matrix MATMUL<F32x8x8> ~20.14. The later README (section
           "Overview", 859 lines): a GPU core's I/O bus is 32 bytes wide, the limit of
           bandwidth-bound work outside the core (read here as 32 bytes per clock).
* [MLXB]   Tristan Bilot et al., github.com/TristanBilot/mlx-benchmark,
           benchmarks/detailed_benchmark.md (commit ccaeaf9): MLX built-ins on M-series
           chips, one call with ``mx.eval``, ms. ``mx.sum`` over 1000000 x 128 f32 (512 MB):
           M1 (8-core GPU) 9.13, M1 Pro 3.24, M1 Max 1.68, M2 Pro (16-core) 3.05, M2 Max
           1.52, M3 5.52, M3 Max 1.50 - 76% to 93% of the chip's bandwidth, median 84%.

Where Apple publishes no TFLOPS figure, it is cores x 128 lanes x 2 (FMA) x clock, with the
clock marked as an estimate. Everything marked "estimate" has no published figure behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kir.errors import KirError


@dataclass(frozen=True)
class GpuProfile:
    """One Apple GPU, as the cost model sees it."""

    name: str  # the key, e.g. "apple-m2"
    display: str  # e.g. "Apple M2 (10-core GPU)"
    gpu_cores: int
    alus_per_core: int  # FP32 lanes per core per clock
    clock_ghz: float
    fp32_tflops: float
    bandwidth_gbs: float  # unified memory bandwidth
    threadgroup_memory: int = 32 * 1024  # bytes per threadgroup [MFT]
    max_threads_per_group: int = 1024  # [MFT]
    simd_width: int = 32  # [MFT]
    schedulers_per_core: int = 4  # SIMD-groups issuing per clock [PT]
    # Per-core residency. Threads: at most 3072 (few registers) down to 768 (many) [PT];
    # the register file decides where in that range a kernel lands.
    max_threads_per_core: int = 3072  # [PT]
    register_file_bytes: int = 384 * 1024  # [PT]
    threadgroup_memory_per_core: int = 64 * 1024  # [PT]
    max_groups_per_core: int = 32  # estimate
    # Issue costs in clocks per SIMD-group instruction on one scheduler [PT].
    shuffle_clocks: float = 2.04  # simd_shuffle*, simd_broadcast [PT]
    simd_reduce_clocks: float = 14.54  # simd_sum / simd_max on F32 [PT]
    mma_clocks: float = 20.14  # simdgroup_multiply_accumulate, 8x8x8 F32 [PT]
    fdiv_lane_ops: float = 6.0  # DIV32 (fast) = 6 FADD slots [PT]
    # Special functions, lanes per clock per core: fast exp2/log2 at 4 clocks per SIMD-group
    # instruction [PT] = 32; the precise class at half that is an estimate (RSQRT32 and
    # SQRT32 take 8 clocks [PT], precise variants more).
    sfu_lanes_per_clock: float = 16.0  # estimate, after [PT]
    sfu_fast_lanes_per_clock: float = 32.0  # [PT]
    shared_wavefronts_per_clock: float = 1.0  # one 32-lane threadgroup access: estimate
    core_io_bytes_per_clock: float = 32.0  # between a core and the L2 / memory [PT]
    # Achieved / nominal DRAM bandwidth of a streaming kernel: the median of mx.sum over
    # 512 MB on seven chips [MLXB] (fitted, so that row of the calibration table is not a test).
    bandwidth_efficiency: float = 0.84  # [MLXB]
    memory_latency_ns: float = 500.0  # DRAM round trip under load, estimate
    launch_overhead_us: float = 5.0  # command-buffer dispatch of one kernel, estimate
    modelled: bool = True

    @property
    def lanes_per_second(self) -> float:
        """FP32 lane-ops per second (an FMA is one lane-op, two flops)."""
        return self.gpu_cores * self.alus_per_core * self.clock_ghz * 1e9

    @property
    def issue_slots_per_second(self) -> float:
        """SIMD-group instruction slots per second, GPU-wide (schedulers x cores x clock)."""
        return self.gpu_cores * self.schedulers_per_core * self.clock_ghz * 1e9

    @property
    def mma_tflops(self) -> float:
        """Peak F32 TFLOPS through simdgroup_matrix 8x8 products: 1024 flops per product per
        ``mma_clocks`` on each scheduler (about 80% of :attr:`fp32_tflops` with [PT]'s
        figures)."""
        return self.issue_slots_per_second * 1024 / self.mma_clocks / 1e12


def _profile(name: str, display: str, cores: int, clock_ghz: float, tflops: float | None,
             bandwidth: float) -> GpuProfile:
    if tflops is None:  # not published by Apple: computed from the (estimated) clock
        tflops = round(cores * 128 * 2 * clock_ghz / 1000, 2)
    return GpuProfile(name, display, cores, 128, clock_ghz, tflops, bandwidth)


PROFILES: dict[str, GpuProfile] = {p.name: p for p in (
    # M1: 8 cores [A-M1], 1.278 GHz [PT], 2.6 TFLOPS [A-M1]; 68.25 GB/s is computed from
    # LPDDR4X-4266 on a 128-bit bus (Apple publishes no figure): estimate.
    _profile("apple-m1", "Apple M1 (8-core GPU)", 8, 1.278, 2.6, 68.25),
    # M1 Pro / Max: [A-M1PM]; clock 1.296 GHz [PT].
    _profile("apple-m1-pro", "Apple M1 Pro (16-core GPU)", 16, 1.296, 5.2, 200.0),
    _profile("apple-m1-max", "Apple M1 Max (32-core GPU)", 32, 1.296, 10.4, 400.0),
    # M2: [A-M2]; clock 1.398 GHz [PT]. The 8-core-GPU M2 (same memory, 100 GB/s) is the
    # chip of one published GEMM series (kir.cost.published [GM]); TFLOPS computed.
    _profile("apple-m2", "Apple M2 (10-core GPU)", 10, 1.398, 3.6, 100.0),
    _profile("apple-m2-8c", "Apple M2 (8-core GPU)", 8, 1.398, None, 100.0),
    # M2 Pro / Max: cores and bandwidth [A-M2PM]; clock 1.398 GHz estimate (as M2), so
    # TFLOPS computed (~6.8 / ~13.6).
    _profile("apple-m2-pro", "Apple M2 Pro (19-core GPU)", 19, 1.398, None, 200.0),
    _profile("apple-m2-max", "Apple M2 Max (38-core GPU)", 38, 1.398, None, 400.0),
    # M3 / M3 Max: cores and bandwidth [A-M3]; clock 1.38 GHz estimate; TFLOPS computed.
    _profile("apple-m3", "Apple M3 (10-core GPU)", 10, 1.38, None, 100.0),
    _profile("apple-m3-max", "Apple M3 Max (40-core GPU)", 40, 1.38, None, 400.0),
    # M4 family: cores and bandwidth [A-M4], [A-M4PM]; clock 1.47 GHz estimate.
    _profile("apple-m4", "Apple M4 (10-core GPU)", 10, 1.47, None, 120.0),
    _profile("apple-m4-pro", "Apple M4 Pro (20-core GPU)", 20, 1.47, None, 273.0),
    _profile("apple-m4-max", "Apple M4 Max (40-core GPU)", 40, 1.47, None, 546.0),
)}

DEFAULT_PROFILE = "apple-m2"


def get_profile(profile: str | GpuProfile) -> GpuProfile:
    """A profile by name (``apple-m2``, ``m2``, ``M2 Max``) or the profile itself."""
    if isinstance(profile, GpuProfile):
        return profile
    key = str(profile).strip().lower().replace(" ", "-").replace("_", "-")
    if key.startswith("model:"):
        key = key[len("model:"):]
    if not key.startswith("apple-"):
        key = "apple-" + key
    if key not in PROFILES:
        raise KirError(f"unknown GPU profile {profile!r}",
                       hint=f"choose one of {', '.join(PROFILES)}")
    return PROFILES[key]
