"""A GEMM tutorial's 1-D blocktiling kernel (tests/rules/data/sgemm_1d_blocktiling.cu: TM
results a thread in a register array, the dot loop outside the result loop, operands walked
by pointers the k loop advances, no bounds checks): kir reads it and computes what numpy
does, on the interpreter and as emitted Metal on the CPU emulator; and the search's GEMM
rules do not yet take it (a known gap, BENCHMARKS.md round 23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.backends import TARGETS
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import check_on_target
from kir.rules import context_for

KERNEL = Path(__file__).parent / "data" / "sgemm_1d_blocktiling.cu"


@pytest.mark.parametrize("target", ["interp", "emulate-metal"])
@pytest.mark.parametrize("sizes", [{}, {"M": 64, "N": 192, "K": 16}])
def test_it_computes_the_gemm(target, sizes):
    loaded = load_kernel(KERNEL, sizes=sizes)
    outcome = check_on_target(loaded, target)
    assert outcome.reference_name == "reference gemm_refs:gemm_ab"
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.xfail(strict=True, reason="warp-tile-matmul and mma-tile read a k loop whose body "
                   "is one acc += a * b; a thread's TM results in a register array with the "
                   "dot loop outside the result loop are not recognized yet")
def test_the_warp_tiled_gemm_rule_takes_it():
    loaded = load_kernel(KERNEL)
    rule = load_registry(plugins=False)["warp-tile-matmul"]
    assert list(rule.sites(loaded.kernel, context_for(loaded, TARGETS["cuda"])))
