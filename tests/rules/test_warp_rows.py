"""Warp-per-row kernels from thread-per-row ones: widen-threads, then distribute-loop on each
row loop. Checked on the interpreter against the reference at the default and ragged sizes,
and as emitted Metal and CUDA on the C++ emulator (the rules are only worth having if what
they build runs right on both targets)."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from kir.backends.emulate import emulator_available
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import check_on_target
from kir.rules import apply_trace, context_for, parse_step

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REGISTRY = load_registry(plugins=False)
FA2 = ["split-shared{buffer=sram}", "interchange-loops{loop=L0}",
       "parallelize-loop{loop=L2,dim=z}", "promote-to-registers{buffer=Q}",
       "promote-to-registers{buffer=l}", "promote-to-registers{buffer=m}",
       "promote-to-registers{buffer=O}", "promote-to-registers{buffer=sram_Qi}",
       "promote-to-registers{buffer=sram_S}", "cooperative-load{loop=L1}",
       "hoist-invariant{loop=L0}"]
WARPS = ["widen-threads{dim=x}", "distribute-loop{loop=L7}", "distribute-loop{loop=L3}"]
TARGETS = ["interp", "emulate-metal", "emulate-cuda"]


@functools.lru_cache(maxsize=None)
def _attention_hints(path: Path) -> dict[str, tuple[str, ...]]:
    """The hints of a FlashAttention kernel at H=1, N=80 (built once a module: building
    every recipe is most of a test's time, and each target's test wants the same)."""
    from kir.search.hints import hints

    loaded = load_kernel(path, sizes={"H": 1, "N": 80})
    return {h.name: tuple(str(s) for s in h.steps)
            for h in hints(loaded.kernel, REGISTRY, context_for(loaded))}


def _rewritten(path: Path, steps: list[str], sizes: dict | None = None):
    loaded = load_kernel(path, sizes=sizes)
    trace = [parse_step(text, REGISTRY) for text in steps]
    kernel = apply_trace(loaded.kernel, trace, REGISTRY, context_for(loaded), strict=True).kernel
    return dataclasses.replace(loaded, kernel=kernel)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes", [{}, {"rows": 37, "cols": 33}])
def test_thread_per_row_softmax_becomes_warp_per_row(target, sizes):
    if target != "interp" and not emulator_available()[0]:
        pytest.skip(f"no C++20 compiler for the emulator: {emulator_available()[1]}")
    rows = _rewritten(DATA / "softmax_thread_rows.cu", [
        "widen-threads{dim=x}", "distribute-loop{loop=L0}", "distribute-loop{loop=L1}",
        "distribute-loop{loop=L2}"], sizes)
    assert rows.kernel.launch.block == (1024, 1, 1)
    outcome = check_on_target(rows, target)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("target", TARGETS)
def test_flash_attention_rows_spread_over_warps(target):
    if target != "interp" and not emulator_available()[0]:
        pytest.skip(f"no C++20 compiler for the emulator: {emulator_available()[1]}")
    fa = _rewritten(EXAMPLES / "flash_attn.cu", FA2 + WARPS, {"H": 1, "N": 80})
    text = str(fa.kernel.launch.block)
    assert text == "(1024, 1, 1)"
    outcome = check_on_target(fa, target)
    assert outcome.result.ok, outcome.result.describe()


def test_warp_rows_are_faster_on_the_cost_model():
    """The reason to spread rows: 32 times the threads. The Apple cost model (modelled)
    prices the spread attention kernel well below the thread-per-row one."""
    from kir.measure.model import ModelEvaluator

    base = load_kernel(EXAMPLES / "flash_attn.cu", sizes={"H": 1, "N": 64})
    with ModelEvaluator(base) as evaluator:
        rows = evaluator.evaluate(_rewritten(EXAMPLES / "flash_attn.cu", FA2,
                                             {"H": 1, "N": 64}).kernel)
        warps = evaluator.evaluate(_rewritten(EXAMPLES / "flash_attn.cu", FA2 + WARPS,
                                              {"H": 1, "N": 64}).kernel)
    assert rows.ok and warps.ok
    assert warps.time_ms < rows.time_ms / 2


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", [EXAMPLES / "flash_attn.cu", DATA / "flash_attn_rows.cu"])
@pytest.mark.parametrize("recipe", ["flash-attention-2-constant-lane-per-key",
                                    "flash-attention-2-constant-lane-per-key-float4"])
def test_flash_attention_a_key_a_lane(target, path, recipe):
    """The lane-per-key hints on both FlashAttention kernels (the example, and one written
    with a K/V tile loop per thread row): distribute-loop spreads the loops over the key
    tile, so a lane computes whole scores, a warp max and a warp sum combine the row once
    a tile, warp barriers order the score row's shared writes and reads, and the K tile's
    rows are padded (pitch 65). The float4 variant pads by 4 (pitch 68) and reads the query
    and key rows and the probabilities as float4 vectors (vectorize-loads), from shared
    arrays the emitters declare 16-byte aligned. Checked at a ragged sequence length on
    every target."""
    from kir.ir import Barrier, Load, WarpReduce

    if target != "interp" and not emulator_available()[0]:
        pytest.skip(f"no C++20 compiler for the emulator: {emulator_available()[1]}")
    steps = list(_attention_hints(path)[recipe])
    vector = recipe.endswith("float4")
    assert f"pad-shared{{buffer=sram_Kj,pad={4 if vector else 1}}}" in steps
    fa = _rewritten(path, steps, {"H": 1, "N": 80})
    body = list(fa.kernel.body.walk())
    assert {n.op for n in body if isinstance(n, WarpReduce)} == {"max", "sum"}
    assert any(isinstance(n, Barrier) and n.scope == "warp" for n in body)
    vectors = {n.buffer for n in body if isinstance(n, Load) and str(n.type) == "f32x4"}
    assert vectors == ({"sram_Qi", "sram_Kj", "sram_S"} if vector else set())
    outcome = check_on_target(fa, target)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", [EXAMPLES / "flash_attn.cu", DATA / "flash_attn_rows.cu"])
@pytest.mark.parametrize("rows", [4, 2])
def test_flash_attention_a_warp_several_rows(target, path, rows):
    """The lane-per-key float4 hint with merge-threads along x on top: one warp does the
    work of ``rows`` warps (copies whole warps apart keep their lanes, so the shuffles and
    warp barriers stay), the score and P.V loops jammed where every row of the warp is in
    bounds and each row alone under its own bounds check elsewhere. N=80 leaves the last
    block's rows partly out of bounds, so both versions run; checked on every target."""
    from kir.ir import Binary, If

    if target != "interp" and not emulator_available()[0]:
        pytest.skip(f"no C++20 compiler for the emulator: {emulator_available()[1]}")
    steps = list(_attention_hints(path)[
        f"flash-attention-2-constant-lane-per-key-float4-rows-{rows}"])
    assert steps[-1] == f"merge-threads{{dim=x,factor={rows}}}"
    fa = _rewritten(path, steps, {"H": 1, "N": 80})
    assert fa.kernel.launch.block == (1024 // rows, 1, 1)
    versioned = [n for n in fa.kernel.body.walk() if isinstance(n, If) and n.orelse
                 and isinstance(n.cond, Binary) and n.cond.op == "&&"]
    assert versioned, "the rows' bounds check must be versioned around the jammed loops"
    outcome = check_on_target(fa, target)
    assert outcome.result.ok, outcome.result.describe()
