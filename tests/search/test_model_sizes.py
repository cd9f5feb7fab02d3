"""The cost model prices candidates at the compiled sizes when they are validated at smaller
check sizes: which sizes it counts at, how close the extrapolated price is to an exact count
at the compiled sizes (where the interpreter still reaches them), when it declines to
extrapolate, and that the structure a big size rewards (a warp-tiled matmul) now wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.cost import estimate
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.interp import Counters, run_kernel
from kir.measure.model_sizes import counted_sizes
from kir.measure.model import ModelEvaluator
from kir.rules import apply_trace, context_for, parse_step
from kir.spec import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SGEMM = EXAMPLES / "sgemm.cu"
REGISTRY = load_registry(plugins=False)
CHECK = {"M": 64, "N": 48, "K": 32}


def test_counted_sizes_halve_the_compiled_sizes_down_to_the_check_sizes():
    spec = load_spec(EXAMPLES / "sgemm.kir.toml")
    compiled = {"M": 2048, "N": 2048, "K": 2048, "TILE": 16}
    sets, why = counted_sizes(spec, {"M": 128, "N": 96, "K": 64, "TILE": 16}, compiled)
    assert not why
    # 2048 halves to 128 (not below the check value 96 for N): whole 64- and 128-wide tiles.
    assert sets == [{"M": 128, "N": 128, "K": 64, "TILE": 16},
                    {"M": 256, "N": 128, "K": 64, "TILE": 16},
                    {"M": 128, "N": 256, "K": 64, "TILE": 16},
                    {"M": 128, "N": 128, "K": 128, "TILE": 16}]
    # An odd compiled size stops halving where it becomes odd.
    sets, _ = counted_sizes(spec, {"M": 64, "N": 48, "K": 32, "TILE": 16},
                            {"M": 1000, "N": 48, "K": 32, "TILE": 16})
    assert sets[0]["M"] == 125 and sets[1]["M"] == 250 and len(sets) == 2


def test_counted_sizes_grow_to_hold_a_candidates_whole_blocks():
    loaded = load_kernel(SGEMM, sizes={"M": 2048, "N": 2048, "K": 2048})
    kernel = apply_trace(loaded.kernel, [parse_step(s, REGISTRY) for s in COARSENED],
                         REGISTRY, context_for(loaded)).kernel
    check = {**CHECK, "TILE": 16}
    plain, _ = counted_sizes(loaded.spec, check, loaded.bound.sizes)
    grown, _ = counted_sizes(loaded.spec, check, loaded.bound.sizes, kernel)
    assert (plain[0]["M"], plain[0]["N"]) == (64, 64)
    assert (grown[0]["M"], grown[0]["N"]) == (256, 128)  # one block of 256 x 128
    assert grown[0]["K"] == plain[0]["K"] == 32  # the grid does not depend on K


def test_a_template_size_that_differs_is_not_extrapolated():
    spec = load_spec(EXAMPLES / "sgemm.kir.toml")
    sets, why = counted_sizes(spec, {"M": 64, "N": 48, "K": 32, "TILE": 16},
                              {"M": 256, "N": 256, "K": 256, "TILE": 32})
    assert sets == [] and "TILE is a template size" in why


def _exact_ms(kernel, sizes: dict) -> float:
    loaded = load_kernel(SGEMM, sizes=sizes)
    counters = Counters()
    run_kernel(kernel, loaded.bound.make_inputs(0), dict(loaded.bound.sizes), counters=counters)
    return estimate(counters, "apple-m2").time_ms


COARSENED = ["warp-tile-matmul{loop=L1,config=128x128x16/2x4}",
             "coarsen-threads{dim=y,factor=2}"]


@pytest.mark.parametrize("steps", [[], ["warp-tile-matmul{loop=L1,config=64x64x16/2x2}"],
                                   COARSENED], ids=["unrewritten", "warp-tiled", "coarsened"])
def test_the_price_at_the_compiled_sizes_is_near_an_exact_count_there(steps):
    """Exact counts at 512 x 512 x 256 (the interpreter still reaches them) against the
    price from counts at smaller sizes. The coarsened kernel's blocks are 256 rows tall: its
    counted sizes grow to hold whole blocks (at the check sizes' 64 rows the one block
    would not grow with M, and the model saw a size-independent kernel)."""
    compiled = {"M": 512, "N": 512, "K": 256}
    loaded = load_kernel(SGEMM, sizes=compiled)
    kernel = apply_trace(loaded.kernel, [parse_step(s, REGISTRY) for s in steps], REGISTRY,
                         context_for(loaded)).kernel
    with ModelEvaluator(loaded, check_sizes=CHECK, workers=1) as evaluator:
        assert evaluator.time_sizes == {**compiled, "TILE": 16}
        assert "modelled at the compiled sizes M=512, N=512, K=256" in evaluator.model_note
        verdict = evaluator.evaluate(kernel)
    assert verdict.ok, verdict.reason
    exact = _exact_ms(kernel, compiled)
    assert abs(verdict.time_ms / exact - 1) < 0.2, (verdict.time_ms, exact)


def test_at_the_compiled_sizes_the_warp_tiled_matmul_wins():
    """Counted at the check sizes alone, a 64 x 64 block tile covers the 64 x 48 matrix with
    one ragged block, and the model priced it 2.2x slower than the unrewritten kernel; priced
    at 2048^3 it is more than twice as fast."""
    compiled = {"M": 2048, "N": 2048, "K": 2048}
    loaded = load_kernel(SGEMM, sizes=compiled)
    tiled = apply_trace(loaded.kernel, [parse_step(
        "warp-tile-matmul{loop=L1,config=64x64x16/2x2}", REGISTRY)], REGISTRY,
        context_for(loaded)).kernel
    with ModelEvaluator(loaded, check_sizes=CHECK, workers=1) as evaluator:
        base, rebuilt = evaluator.evaluate(loaded.kernel), evaluator.evaluate(tiled)
    assert base.ok and rebuilt.ok
    assert rebuilt.time_ms < base.time_ms / 2
