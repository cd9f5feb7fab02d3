"""The model ranks the structures fast kernels have for the reasons Apple's published rates
give: SIMD-group matrices, float4 rows, SIMD reductions, uncontended atomics, registers."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import pytest

from kir.cost import estimate, get_profile, occupancy
from tests.cost import calibration as cal
from tests.cost.kernels import kernel, run
from tests.cost.test_model import BASE

VECTOR_ROWS = ("vectorize-strided{loop=L0,width=4}", "vectorize-strided{loop=L3,width=4}",
               "vectorize-strided{loop=L6,width=4}")


@lru_cache(maxsize=None)
def modelled(name: str, steps: tuple[str, ...], target: tuple[tuple[str, int], ...],
             base: tuple[tuple[str, int], ...] | None = None, profile: str = "apple-m2"):
    workload = cal.example(name, steps, dict(base) if base else None)()
    counters = workload.counters_at(dict(target))
    return counters, estimate(counters, profile)


def test_simdgroup_matrices_beat_scalar_fmas_on_a_tiled_matmul():
    # examples/sgemm.cu (TILE=16) and the same kernel after mma-tile, 1024^3 on an M2.
    size = (("M", 1024), ("N", 1024), ("K", 1024), ("TILE", 16))
    base = (("M", 64), ("N", 64), ("K", 64), ("TILE", 16))
    scalar_c, scalar = modelled("sgemm", (), size, base)
    mma_c, mma = modelled("sgemm", ("mma-tile{loop=L1}",), size, base)
    assert mma.time_ms * 1.5 < scalar.time_ms
    # The reason: the scalar kernel pays two threadgroup loads and an FMA per multiply-add
    # per lane; the 8x8 product does 512 per SIMD-group instruction.
    assert mma_c.matrix_flops == 2 * 1024 ** 3 and scalar_c.matrix_mma == 0
    assert mma.breakdown["threadgroup_memory_ms"] * 2 < scalar.breakdown["threadgroup_memory_ms"]
    assert mma.breakdown["alu_ms"] * 2 < scalar.breakdown["alu_ms"]
    # ... and the products are priced at metal-benchmarks' 20.14 clocks per 8x8x8 [PT].
    p = get_profile("apple-m2")
    expected = mma_c.matrix_mma * 20.14 / p.issue_slots_per_second / mma.breakdown["utilization"]
    assert mma.breakdown["simdgroup_matrix_ms"] == pytest.approx(expected * 1e3, rel=1e-9)


def test_simdgroup_matrix_flops_are_not_cheaper_than_fma_flops():
    # [PT]: an 8x8x8 product takes ~20.14 clocks for 512 FMAs a scheduler could issue in 16,
    # so a matrix kernel wins by feeding the ALUs with less traffic, never by a faster ALU.
    rates = {}
    for name in ("fma_micro", "mma_micro"):
        counters = cal.WORKLOADS[name]().counters_at(cal.MICRO)
        cost = estimate(counters, "apple-m1-max")
        rates[name] = (counters.flops + counters.matrix_flops) / cost.time_ms
    assert 0.7 < rates["mma_micro"] / rates["fma_micro"] < 1.0


def test_float4_rows_are_faster_when_bandwidth_bound():
    # Softmax rows of 4096 floats on an M2: the same DRAM traffic, a quarter of the load
    # instructions (shorter load chains per SIMD-group) and less index arithmetic.
    size = (("rows", 4096), ("cols", 4096))
    scalar_c, scalar = modelled("softmax", (), size)
    vector_c, vector = modelled("softmax", VECTOR_ROWS, size)
    assert scalar.bound == vector.bound == "memory"
    assert vector.breakdown["dram_ms"] == scalar.breakdown["dram_ms"]
    assert vector_c.global_load_requests * 4 == scalar_c.global_load_requests
    assert vector.breakdown["latency_ms"] < scalar.breakdown["latency_ms"] / 1.5
    assert vector.time_ms < scalar.time_ms


def test_float4_rows_are_much_faster_when_few_rows_cannot_hide_latency():
    size = (("rows", 10), ("cols", 4096))  # one 256-thread group per core of an M2
    _, scalar = modelled("softmax", (), size)
    _, vector = modelled("softmax", VECTOR_ROWS, size)
    assert scalar.bound == "latency"
    assert vector.time_ms * 1.15 < scalar.time_ms


def test_a_simd_reduction_beats_a_threadgroup_tree():
    # examples/reduce.cu: its shared-memory tree with a barrier per step, against the same
    # kernel after warp-reduce (simd_sum over the last 32 partials, 4 barriers fewer).
    size = (("n", 1 << 22),)
    tree_c, tree = modelled("reduce", (), size)
    simd_c, simd = modelled("reduce", ("warp-reduce{at=0}",), size)
    assert simd.time_ms < tree.time_ms
    assert simd_c.warp_reductions > 0 and simd_c.barriers < tree_c.barriers
    assert simd.breakdown["threadgroup_memory_ms"] < tree.breakdown["threadgroup_memory_ms"]


def test_contended_atomics_cost_more_than_spread_ones():
    same = kernel("same", "  atomic.add(y[0], x[i32(thread.x)])")
    spread = kernel("spread", "  atomic.add(y[i32(block.x) * 256 + i32(thread.x)], 1.0)")
    contended, _ = run(same, 64 * 256, 64)
    free, _ = run(spread, 64 * 256, 64)
    assert contended.atomics == free.atomics
    assert estimate(contended).breakdown["atomics_ms"] > 100 * estimate(free).breakdown[
        "atomics_ms"]
    assert estimate(contended).time_ms > estimate(free).time_ms


@pytest.mark.parametrize("registers, threads", [(16, 3072), (64, 1536), (128, 768)])
def test_registers_limit_resident_threads(registers, threads):
    # [PT]: 384 KB of registers per core, 768 to 3072 resident threads.
    occ = occupancy(dataclasses.replace(BASE, registers_per_thread=registers),
                    get_profile("apple-m2"))
    assert occ["resident_threads"] == threads
    assert occ["groups_per_core"] == threads // BASE.threads_per_group
