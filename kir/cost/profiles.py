"""Apple M-series GPU profiles for the analytical cost model.

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
* [PT]     Philip Turner, github.com/philipturner/metal-benchmarks: 128 FP32 lanes per core
           (4 schedulers x 32), GPU clocks (M1 1.278 GHz, M1 Pro/Max 1.296 GHz, M2 1.398 GHz),
           per-core issue rates of special functions and of threadgroup memory.

Where Apple publishes no TFLOPS figure, it is cores x 128 lanes x 2 (FMA) x clock, with the
clock marked as an estimate. Per-core occupancy figures are estimates in the spirit of [PT].
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
    # Per-core residency: estimates. A core keeps at most this many threads (register file
    # permitting) and this much threadgroup memory across resident groups.
    max_threads_per_core: int = 2048  # estimate
    threadgroup_memory_per_core: int = 64 * 1024  # estimate ([PT] lists 64 KB on-chip)
    max_groups_per_core: int = 32  # estimate
    # Per-core issue rates in lanes per clock: estimates after [PT]'s instruction tables.
    sfu_lanes_per_clock: float = 16.0  # precise exp/log/rsqrt class, estimate
    sfu_fast_lanes_per_clock: float = 32.0  # metal::fast:: variants, estimate
    shared_wavefronts_per_clock: float = 1.0  # one 32-lane threadgroup-memory access, est.
    cache_bandwidth_ratio: float = 2.5  # on-chip cache bw / DRAM bw, estimate
    memory_latency_ns: float = 500.0  # DRAM round trip under load, estimate
    launch_overhead_us: float = 5.0  # command-buffer dispatch of one kernel, estimate
    modelled: bool = True

    @property
    def lanes_per_second(self) -> float:
        """FP32 lane-ops per second (an FMA is one lane-op, two flops)."""
        return self.gpu_cores * self.alus_per_core * self.clock_ghz * 1e9


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
    # M2: [A-M2]; clock 1.398 GHz [PT].
    _profile("apple-m2", "Apple M2 (10-core GPU)", 10, 1.398, 3.6, 100.0),
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
