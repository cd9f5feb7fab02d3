"""An analytical, roofline-style time model of one kernel launch on an Apple GPU.

Input: the :class:`~kir.interp.counters.Counters` of an interpreter run; output: a
:class:`CostEstimate` whose time is *modelled*, never measured. The model, term by term:

* **Occupancy.** Groups resident per core are limited by threads per core (3072 at most,
  fewer when each thread needs many registers: the register file is shared), threadgroup
  memory per core and a group cap; ``concurrent`` groups run GPU-wide, in ``waves``.
  ``utilization`` is the fraction of the GPU's throughput the launch can use: busy cores out
  of all cores, times latency hiding (resident SIMD-groups per core against the number
  needed to hide latency), times the balance of groups over cores (a core that gets one
  group more than another finishes last; resident groups share a core, so a half-filled
  last wave is not by itself idle time).
* **Memory.** DRAM traffic is at least the 32-byte sectors the kernel touches (its
  footprint; a sparse access pays for whole sectors), at the bandwidth a streaming kernel
  achieves (``bandwidth_efficiency``) with the cores the launch keeps busy (too few resident
  SIMD-groups show in the latency term instead). Traffic between each core and the L2 is the
  sectors of every warp-instruction, less those the same warp's previous execution of a
  load already brought into L1, over a 32-byte core bus, so uncoalesced accesses cost more.
  Time = max(DRAM, core bus). Threadgroup memory costs one clock per wavefront per core;
  bank conflicts add wavefronts. SIMD-group matrix loads and stores count as the memory
  traffic they are.
* **Compute.** Everything that takes issue slots of the four schedulers per core, summed:
  FP32/int lane-ops at the ALU rate (a multiply-add the compiler contracts is one),
  divisions and special functions at their own rates (fast variants cheaper), shuffles,
  SIMD reductions and SIMD-group 8x8 matrix products at their measured clocks per
  SIMD-group instruction; lane-ops inflated by divergence (executed warp-instructions x 32
  over useful lane-ops).
* **Latency.** Each SIMD-group's chain of global loads, per wave, at DRAM latency with a
  little memory-level parallelism; plus a fixed launch overhead.
* **Synchronization.** Barriers cost a fixed number of clocks each, overlapped across
  concurrent groups; atomics pay a throughput cost and serialize on their hottest address.

time = max(memory, threadgroup memory, compute, latency) + 10% of the non-binding ones
     + sync + atomics + launch.
Every constant not in :mod:`kir.cost.profiles` is an estimate, named here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from kir.cost.profiles import GpuProfile, get_profile
from kir.interp.counters import SECTOR, Counters

WARPS_TO_HIDE_LATENCY = 16  # resident SIMD-groups per core for full throughput: estimate
MEMORY_LEVEL_PARALLELISM = 4  # independent loads in flight per SIMD-group: estimate
BARRIER_CLOCKS = 64  # one threadgroup barrier: estimate
ATOMIC_LANES_PER_CLOCK = 32  # GPU-wide atomic throughput: estimate
ATOMIC_SERIAL_CLOCKS = 4  # one more update of the same address: estimate
OVERLAP_LEAK = 0.1  # share of non-binding throughput terms that still adds time: estimate

BOUNDS = ("memory", "compute", "latency", "sync")


@dataclass(frozen=True)
class CostEstimate:
    """A modelled time (``modelled`` is always True): ``bound`` names the term that decides
    it; ``breakdown`` holds every term (``*_ms``) and the occupancy figures."""

    time_ms: float
    bound: str
    breakdown: Mapping[str, float] = field(default_factory=dict)
    profile: str = ""
    modelled: bool = True

    def describe(self) -> str:
        """One line for users; says "modelled", as any time resting on the model must."""
        return f"{self.time_ms:.4g} ms modelled on {self.profile} ({self.bound}-bound)"


def occupancy(counters: Counters, p: GpuProfile) -> dict[str, float]:
    """Groups per core, concurrent groups, waves and the usable fraction of the GPU."""
    groups = max(counters.groups, 1)
    warps_per_group = max(counters.warps_per_group, 1)
    group_threads = warps_per_group * p.simd_width
    threads = p.max_threads_per_core
    if counters.registers_per_thread > 0:
        threads = min(threads, p.register_file_bytes // (4 * counters.registers_per_thread))
    limits = [p.max_groups_per_core, threads // group_threads]
    if counters.threadgroup_bytes > 0:
        limits.append(p.threadgroup_memory_per_core // counters.threadgroup_bytes)
    groups_per_core = max(1, min(limits))  # a group within the limits always fits alone
    concurrent = p.gpu_cores * groups_per_core
    waves = math.ceil(groups / concurrent)
    busy_cores = min(p.gpu_cores, groups)
    resident_groups = min(groups_per_core, math.ceil(groups / p.gpu_cores))
    resident_warps = resident_groups * warps_per_group
    hiding = min(1.0, resident_warps / WARPS_TO_HIDE_LATENCY)
    tail = groups / (busy_cores * math.ceil(groups / busy_cores))
    return {"groups_per_core": groups_per_core, "concurrent_groups": concurrent,
            "waves": waves, "busy_cores": busy_cores, "resident_warps": resident_warps,
            "latency_hiding": hiding, "tail_efficiency": tail, "resident_threads": threads,
            "utilization": busy_cores / p.gpu_cores * hiding * tail}


def estimate(counters: Counters | Mapping[str, Any],
             profile: str | GpuProfile = "apple-m2") -> CostEstimate:
    """The modelled time of the run ``counters`` describe on ``profile``'s GPU."""
    c = counters if isinstance(counters, Counters) else Counters(**dict(counters))
    p = get_profile(profile)
    occ = occupancy(c, p)
    util = occ["utilization"]
    clock = p.clock_ghz * 1e9
    seconds: dict[str, float] = {}

    bandwidth = p.bandwidth_gbs * 1e9
    spatial = occ["busy_cores"] / p.gpu_cores
    # Counters from before sectors were counted have only the bytes.
    dram_bytes = (c.global_unique_read_sector_bytes + c.global_unique_write_sector_bytes
                  or c.global_unique_bytes)
    seconds["dram"] = dram_bytes / (bandwidth * p.bandwidth_efficiency) / spatial
    l2_bytes = c.global_transaction_bytes - SECTOR * c.global_load_sector_hits
    seconds["cache"] = l2_bytes / (p.gpu_cores * p.core_io_bytes_per_clock * clock) / util
    memory = max(seconds["dram"], seconds["cache"])
    seconds["threadgroup_memory"] = (c.shared_wavefronts / (
        p.gpu_cores * p.shared_wavefronts_per_clock * clock) / util)

    inflation = c.alu_warp_instr * p.simd_width / c.alu_lane_ops if c.alu_lane_ops else 1.0
    inflation = max(inflation, 1.0)
    # A contracted multiply-add is two flops in one ALU operation.
    lane_ops = c.flops - c.fma + c.int_ops + c.fdiv * p.fdiv_lane_ops + c.local_accesses
    seconds["alu"] = lane_ops * inflation / p.lanes_per_second / util
    seconds["sfu"] = (c.sfu / p.sfu_lanes_per_clock + c.sfu_fast / p.sfu_fast_lanes_per_clock) \
        * inflation / (p.gpu_cores * clock) / util
    slots = p.issue_slots_per_second * util  # SIMD-group instructions per second
    seconds["shuffles"] = max(c.warp_ops - c.warp_reductions, 0) * p.shuffle_clocks / slots
    seconds["simd_reductions"] = c.warp_reductions * p.simd_reduce_clocks / slots
    seconds["simdgroup_matrix"] = c.matrix_mma * p.mma_clocks / slots
    compute = sum(seconds[k] for k in ("alu", "sfu", "shuffles", "simd_reductions",
                                       "simdgroup_matrix"))

    total_warps = max(c.groups, 1) * max(c.warps_per_group, 1)
    chain = c.global_load_requests / total_warps  # loads each SIMD-group issues in turn
    seconds["latency"] = occ["waves"] * chain * p.memory_latency_ns * 1e-9 \
        / MEMORY_LEVEL_PARALLELISM
    seconds["launch"] = p.launch_overhead_us * 1e-6

    overlap = min(max(c.groups, 1), occ["concurrent_groups"])
    seconds["barriers"] = c.barriers * BARRIER_CLOCKS / clock / overlap
    # Updates of one address serialize; counters from before the hottest address was
    # counted fall back to the per-instruction worst case.
    hottest = c.atomic_hot_address or c.atomic_serial
    seconds["atomics"] = (c.atomics / ATOMIC_LANES_PER_CLOCK
                          + hottest * ATOMIC_SERIAL_CLOCKS) / clock
    sync = seconds["barriers"] + seconds["atomics"]

    terms = {"memory": max(memory, seconds["threadgroup_memory"]), "compute": compute,
             "latency": seconds["latency"] + seconds["launch"], "sync": sync}
    overlapped = [terms["memory"], compute, seconds["latency"]]
    # Throughput terms overlap, but not perfectly: the non-binding ones leak a little in,
    # which also keeps the time strictly increasing in every term (a search needs that).
    throughput = max(overlapped) + OVERLAP_LEAK * (sum(overlapped) - max(overlapped))
    total = throughput + sync + seconds["launch"]
    bound = max(BOUNDS, key=lambda b: terms[b])
    breakdown: dict[str, float] = {f"{k}_ms": v * 1e3 for k, v in seconds.items()}
    breakdown.update({k: float(v) for k, v in occ.items()})
    breakdown["divergence_inflation"] = inflation
    return CostEstimate(total * 1e3, bound, breakdown, p.display)
