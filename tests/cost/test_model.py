"""The Apple-GPU cost model moves in the right directions, and its profiles hold together."""

from __future__ import annotations

import dataclasses

import pytest

from kir.cost import PROFILES, CostEstimate, estimate, get_profile, occupancy
from kir.errors import KirError
from kir.interp import Counters
from tests.cost.kernels import (
    COPY,
    GID,
    STRIDED,
    exp_kernel,
    kernel,
    per_block,
    run,
    shared_stride,
)

N = 1 << 16


def test_strided_copy_is_modelled_slower_than_coalesced():
    coalesced, _ = run(COPY, N, N // 256)
    strided, _ = run(STRIDED, N, N // 256, scalar=N // 32)
    fast, slow = estimate(coalesced), estimate(strided)
    # Every sector is still read once from DRAM (neighbouring warps use the rest of it),
    # but each warp-instruction moves 32 sectors over the core's 32-byte bus instead of 4.
    assert slow.breakdown["cache_ms"] > 4 * fast.breakdown["cache_ms"]
    assert slow.breakdown["dram_ms"] == fast.breakdown["dram_ms"]
    assert slow.time_ms > fast.time_ms


def test_sparse_reads_pay_for_whole_sectors():
    dense, _ = run(COPY, N, N // 256)
    sparse, _ = run(kernel("sparse", GID + "  y[i] = x[i * 8 % n]"), N, N // 256)
    assert sparse.global_unique_read_bytes == N * 4 // 8
    assert sparse.global_unique_read_sector_bytes == N * 4  # one 32-byte sector per float
    # Same bytes written; 1/8 of the bytes read but every sector of x still crosses DRAM.
    assert estimate(sparse).breakdown["dram_ms"] == estimate(dense).breakdown["dram_ms"]


def test_one_block_is_slower_than_many_for_the_same_work():
    one, _ = run(per_block(N), N, 1)
    many, _ = run(per_block(N // 64), N, 64)
    assert one.flops == many.flops and one.global_load_bytes == many.global_load_bytes
    slow, fast = estimate(one), estimate(many)
    assert slow.time_ms > 5 * fast.time_ms
    assert slow.breakdown["utilization"] < fast.breakdown["utilization"]


def test_parallelism_helps_up_to_the_core_count():
    times = []
    for groups in (1, 2, 5, 10):
        counters, _ = run(per_block(N // groups), N, groups)
        times.append(estimate(counters, "apple-m2").time_ms)
    assert times == sorted(times, reverse=True) and times[0] > times[-1]


def test_fast_exp_is_cheaper_than_precise():
    precise, _ = run(exp_kernel(False, repeat=64), 4096, 16)
    fast, _ = run(exp_kernel(True, repeat=64), 4096, 16)
    assert estimate(fast).time_ms < estimate(precise).time_ms
    assert estimate(precise).breakdown["sfu_ms"] > estimate(fast).breakdown["sfu_ms"]


def test_bank_conflicts_are_slower():
    clean, _ = run(shared_stride(1), 4096, 128)
    conflicted, _ = run(shared_stride(32), 4096, 128)
    assert estimate(conflicted).breakdown["threadgroup_memory_ms"] \
        > 10 * estimate(clean).breakdown["threadgroup_memory_ms"]
    assert estimate(conflicted).time_ms > estimate(clean).time_ms


BASE = Counters(threads_per_group=256, groups=512, grid=(512, 1, 1),
                global_load_bytes=1 << 24, global_store_bytes=1 << 24,
                global_load_requests=1 << 17, global_store_requests=1 << 17,
                global_load_sectors=1 << 19, global_store_sectors=1 << 19,
                global_unique_read_bytes=1 << 24, global_unique_write_bytes=1 << 24,
                flops=1 << 22, int_ops=1 << 22, alu_lane_ops=1 << 23, alu_warp_instr=1 << 18,
                shared_wavefronts=1 << 16, barriers=1024, sfu=1 << 20)


@pytest.mark.parametrize("field", [
    "global_load_sectors", "global_unique_read_bytes", "flops", "fdiv", "sfu", "sfu_fast",
    "shared_wavefronts", "barriers", "atomics", "atomic_serial", "alu_warp_instr",
    "global_load_requests", "warp_ops", "warp_reductions", "matrix_mma",
    "atomic_hot_address", "global_unique_read_sector_bytes",
])
def test_more_work_never_models_faster(field):
    # Roofline: a resource that does not bind may grow without cost, but never makes the
    # kernel faster, and enough of it always shows.
    base = getattr(BASE, field) or 1 << 16
    times = [estimate(dataclasses.replace(BASE, **{field: base * f})).time_ms
             for f in (1, 2, 8, 64, 1024, 1 << 16)]
    assert times == sorted(times)
    assert times[-1] > times[0]


def test_more_registers_never_model_faster():
    times = [estimate(dataclasses.replace(BASE, flops=1 << 28, registers_per_thread=r)).time_ms
             for r in (8, 16, 32, 64, 128, 256)]
    assert times == sorted(times) and times[-1] > times[0]


def test_threadgroup_memory_limits_occupancy():
    light = occupancy(BASE, get_profile("m2"))
    heavy = occupancy(dataclasses.replace(BASE, threadgroup_bytes=32 * 1024), get_profile("m2"))
    assert heavy["groups_per_core"] < light["groups_per_core"]
    assert heavy["concurrent_groups"] == 2 * PROFILES["apple-m2"].gpu_cores


def test_bigger_gpu_is_faster_on_big_memory_bound_work():
    assert estimate(BASE, "apple-m2-max").time_ms < estimate(BASE, "apple-m2").time_ms
    assert estimate(BASE, "apple-m4-max").time_ms < estimate(BASE, "apple-m1").time_ms


def test_estimate_is_labelled_modelled_and_names_its_bound():
    result = estimate(BASE)
    assert isinstance(result, CostEstimate) and result.modelled
    assert result.bound in ("memory", "compute", "latency", "sync")
    assert "modelled" in result.describe() and "Apple M2" in result.describe()
    assert estimate(BASE.as_dict()).time_ms == result.time_ms


def test_profiles_are_consistent():
    names = {"apple-m1", "apple-m1-pro", "apple-m1-max", "apple-m2", "apple-m2-pro",
             "apple-m2-max", "apple-m3", "apple-m3-max", "apple-m4", "apple-m4-pro",
             "apple-m4-max"}
    assert names <= set(PROFILES)
    for p in PROFILES.values():
        computed = p.gpu_cores * p.alus_per_core * 2 * p.clock_ghz / 1000
        assert p.fp32_tflops == pytest.approx(computed, rel=0.05), p.name
        assert p.threadgroup_memory == 32 * 1024 and p.max_threads_per_group == 1024
        assert p.simd_width == 32 and p.bandwidth_gbs > 50
    assert get_profile("M2 Max") is PROFILES["apple-m2-max"]
    assert get_profile("model:apple-m3") is PROFILES["apple-m3"]
    with pytest.raises(KirError, match="unknown GPU profile"):
        get_profile("apple-m9")
