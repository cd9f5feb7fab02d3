"""Counters extrapolated from small runs match an exact count at a larger size."""

from __future__ import annotations

import dataclasses

import pytest

from kir.cost import estimate
from kir.cost.extrapolate import extrapolate
from kir.errors import KirError
from tests.cost import calibration as cal
from tests.cost import calibration_kernels as kernels

# Counts that drive the model; launch constants are copied, the grid is exact.
CHECKED = ("flops", "fma", "int_ops", "global_load_bytes", "global_load_sectors",
           "global_store_bytes", "global_unique_read_bytes", "global_unique_write_bytes",
           "global_unique_read_sector_bytes", "shared_wavefronts", "barriers", "matrix_mma",
           "matrix_loads", "warp_ops", "sfu", "groups")


def _close(predicted, exact, rel: float) -> None:
    for name in CHECKED:
        want, got = getattr(exact, name), getattr(predicted, name)
        assert got == pytest.approx(want, rel=rel, abs=2), name


@pytest.mark.parametrize("workload, base, target", [
    (lambda: cal.Workload(kernels.gemm_simd_8x8(), kernels.gemm_inputs,
                          {"M": 32, "N": 32, "K": 32}), None, {"M": 128, "N": 64, "K": 256}),
    (lambda: cal.Workload(kernels.stream_sum(), kernels.sum_inputs, {"groups": 4, "per_thread": 2}),
     None, {"groups": 24, "per_thread": 16}),
    (lambda: cal.Workload(kernels.attention_simd(), kernels.attention_inputs, {"N": 32, "BH": 1}),
     None, {"N": 256, "BH": 3}),
])
def test_extrapolated_counts_match_an_exact_count(workload, base, target):
    w = workload()
    predicted = w.counters_at(target)
    exact = w.count({**w.base, **target})
    _close(predicted, exact, rel=0.02)
    assert predicted.grid == exact.grid
    assert estimate(predicted).time_ms == pytest.approx(estimate(exact).time_ms, rel=0.02)


def test_one_moved_run_per_size_gives_a_power_law():
    w = cal.Workload(kernels.gemm_naive(), kernels.gemm_inputs, {"M": 32, "N": 32, "K": 32})
    predicted = w.counters_at({"M": 128, "N": 64, "K": 64}, runs_per_size=1)
    exact = w.count({"M": 128, "N": 64, "K": 64})
    # flops are 2 M N K + M N (C += A B): the power law in K is off by the M N term
    assert predicted.flops == pytest.approx(exact.flops, rel=0.01)
    assert predicted.global_unique_read_bytes == exact.global_unique_read_bytes


def test_bad_runs_are_refused():
    w = cal.Workload(kernels.gemm_naive(), kernels.gemm_inputs, {"M": 32, "N": 32, "K": 32})
    base = ({"M": 32, "N": 32, "K": 32}, w.count({"M": 32, "N": 32, "K": 32}))
    both = ({"M": 64, "N": 64, "K": 32}, w.count({"M": 64, "N": 64, "K": 32}))
    with pytest.raises(KirError, match="exactly one size"):
        extrapolate(base, [both], {"M": 64, "N": 64, "K": 32})
    with pytest.raises(KirError, match="no run that moves K"):
        extrapolate(base, [], {"M": 32, "N": 32, "K": 64})


def test_counts_at_the_base_are_the_exact_count():
    w = cal.Workload(kernels.gemm_naive(), kernels.gemm_inputs, {"M": 32, "N": 32, "K": 32})
    assert dataclasses.asdict(w.counters_at({})) == dataclasses.asdict(w.count(w.base))
