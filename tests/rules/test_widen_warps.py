"""Block-per-row kernels from warp-per-row ones: warp-reduce names the hand-written
butterflies, widen-warps gives each row a block, vectorize-strided gives its loops 128-bit
loads. Checked on the interpreter against the spec's reference at the default and ragged
sizes, and as emitted Metal and CUDA on the C++ emulator; and the search's hints reach the
structure on kernels written in two styles (the layer norm example; an in-place RMS norm
with bit-operation lanes, a grid-stride loop over rows and a templated xor butterfly)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kir.backends.emulate import emulator_available
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import check_on_target
from kir.ir import Alloc, Barrier, For, Shuffle
from kir.ir.printer import print_expr
from kir.rules import apply_trace, context_for, parse_step
from kir.search.hints import hints

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORPUS = Path(__file__).resolve().parents[1] / "corpus"
REGISTRY = load_registry(plugins=False)
TARGETS = ["interp", "emulate-metal", "emulate-cuda"]
LAYERNORM = ["warp-reduce{at=0}", "warp-reduce{at=0}", "widen-warps{dim=x,threads=256}",
             "vectorize-strided{loop=L0,width=4}", "vectorize-strided{loop=L2,width=4}",
             "vectorize-strided{loop=L4,width=4}"]
RMS_NORM = ["warp-reduce{at=0}", "widen-warps{dim=x,threads=64}"]


def _rewritten(path: Path, steps: list[str], sizes: dict | None = None):
    loaded = load_kernel(path, sizes=sizes)
    trace = [parse_step(text, REGISTRY) for text in steps]
    kernel = apply_trace(loaded.kernel, trace, REGISTRY, context_for(loaded), strict=True).kernel
    return dataclasses.replace(loaded, kernel=kernel)


def _skip_without_emulator(target: str) -> None:
    if target != "interp" and not emulator_available()[0]:
        pytest.skip(f"no C++20 compiler for the emulator: {emulator_available()[1]}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes", [{}, {"rows": 7, "cols": 200}])
def test_layer_norm_becomes_a_block_a_row(target, sizes):
    _skip_without_emulator(target)
    rows = _rewritten(EXAMPLES / "layernorm.cu", LAYERNORM, sizes)
    assert rows.kernel.launch.block == (256, 1, 1)
    assert rows.kernel.launch.grid[1] == "4"  # the 4 warps of a block became 4 blocks
    assert not any(isinstance(n, Shuffle) for n in rows.kernel.body.walk())
    assert sum(isinstance(n, Alloc) and n.space == "shared"
               for n in rows.kernel.body.walk()) == 2  # a slot array per reduction
    outcome = check_on_target(rows, target)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes", [{}, {"tokens": 5, "hidden": 33}])
def test_in_place_rms_norm_over_a_grid_stride_loop(target, sizes):
    """Rows come from a grid-stride loop, so the block reduction sits in a loop and closes
    with a barrier (the next row's slot writes wait for this row's reads); x is read and
    written at one index per loop, so each element stays with one thread."""
    _skip_without_emulator(target)
    rows = _rewritten(DATA / "rmsnorm_warp_rows.cu", RMS_NORM, sizes)
    assert rows.kernel.launch.block == (64, 1, 1)
    assert sum(isinstance(n, Barrier) for n in rows.kernel.body.walk()) == 2
    outcome = check_on_target(rows, target)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("path", [EXAMPLES / "layernorm.cu", DATA / "rmsnorm_warp_rows.cu"])
def test_hints_reach_a_block_a_row(path):
    loaded = load_kernel(path)
    found = {h.name: [str(s) for s in h.steps]
             for h in hints(loaded.kernel, REGISTRY, context_for(loaded))}
    for threads in (256, 512):
        steps = found[f"block-rows-{threads}"]
        assert f"widen-warps{{dim=x,threads={threads}}}" in steps
        assert steps.index("warp-reduce{at=0}") < steps.index(
            f"widen-warps{{dim=x,threads={threads}}}")
    if path.name == "layernorm.cu":
        assert found["block-rows-256"] == LAYERNORM + ["fast-math{at=all}"]


@pytest.mark.parametrize("target", TARGETS)
def test_cooperative_groups_layer_norm(target):
    """llm.c's layer norm (tests/corpus): cooperative groups' warp index and
    ``cg::reduce``, and lane 0's writes of the row's mean and rstd under
    ``thread_rank() == 0 && mean != nullptr``."""
    _skip_without_emulator(target)
    loaded = load_kernel(CORPUS / "llm_train.cu",
                         spec_path=CORPUS / "llm_train.layernorm_forward.kir.toml",
                         sizes={"N": 9, "C": 132})
    trace = [parse_step(text, REGISTRY) for text in [
        "widen-warps{dim=x,threads=128}", "vectorize-strided{loop=L2,width=4}"]]
    kernel = apply_trace(loaded.kernel, trace, REGISTRY, context_for(loaded), strict=True).kernel
    assert kernel.launch.grid[1] == "8"
    outcome = check_on_target(dataclasses.replace(loaded, kernel=kernel), target)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("target", TARGETS)
def test_online_softmax_a_block_a_row(target):
    """llm.c's softmax (tests/corpus): a warp a row carrying the online softmax's running
    max and sum through a helper's struct, combined by ``cg::reduce`` of the max and of
    ``sum * exp(max - row max)``. The pair splits over any set of threads, so the row goes
    to a block; and the block-rows hint now reaches it."""
    _skip_without_emulator(target)
    spec = CORPUS / "llm_train.softmax_forward.kir.toml"
    loaded = load_kernel(CORPUS / "llm_train.cu", spec_path=spec, sizes={"N": 9, "C": 130})
    found = {h.name: [str(s) for s in h.steps]
             for h in hints(loaded.kernel, REGISTRY, context_for(loaded))}
    assert "widen-warps{dim=x,threads=256}" in found["block-rows-256"]
    trace = [parse_step("widen-warps{dim=x,threads=128}", REGISTRY)]
    kernel = apply_trace(loaded.kernel, trace, REGISTRY, context_for(loaded), strict=True).kernel
    assert kernel.launch.grid[1] == "4"
    outcome = check_on_target(dataclasses.replace(loaded, kernel=kernel), target)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes", [{}, {"N": 5, "C": 72}])
def test_packs_of_eight_a_lane_become_packs_a_thread(target, sizes):
    """A bf16 layer norm whose lanes take 16-byte packs (``c = lane * 8; c += 32 * 8``,
    tests/rules/data/layernorm_packed_bf16.cu): each thread of the block takes a pack at a
    time (``c = thread.x * 8; c += block_dim.x * 8``), its pack's array its own."""
    _skip_without_emulator(target)
    rows = _rewritten(DATA / "layernorm_packed_bf16.cu", ["widen-warps{dim=x,threads=64}"],
                      sizes)
    firsts = {print_expr(lp.init) for lp in rows.kernel.body.stmts
              if isinstance(lp, For) and lp.label in ("L0", "L2", "L4")}
    assert firsts == {"i32(thread.x) * 8"}, firsts
    outcome = check_on_target(rows, target)
    assert outcome.result.ok, outcome.result.describe()


def test_a_lane_loop_stepping_other_than_its_chunks_is_not_widened():
    """``c = lane * 8`` stepping by 128 (not 32 * 8) is no lane-strided loop: no site."""
    from kir.frontends.cuda import load_cuda
    from kir.ir import Launch

    source = """__global__ void k(const float* x, float* y, int n) {
      for (int c = (threadIdx.x % 32) * 8; c < n; c += STEP)
        for (int k = 0; k < 8; ++k) y[c + k] = 2.0f * x[c + k]; }"""
    launch = Launch(("1", "1", "1"), (32, 1, 1), 0)
    widen = REGISTRY["widen-warps"]
    for step, sites in (("256", ["x"]), ("128", [])):
        kernel = load_cuda(source.replace("STEP", step), "k.cu", launch=launch)
        plan = widen.plan(kernel, "x")
        assert (not hasattr(plan, "reason")) == bool(sites), (step, plan)


METHOD_ROWS = Path(__file__).resolve().parents[1] / "frontend" / "data" / "method_rows.cu"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes", [{}, {"C": 132}])
def test_a_softmax_accumulator_merged_by_a_butterfly_becomes_a_block_a_row(target, sizes):
    """tests/frontend/data/method_rows.cu: a warp a row in a block of 32 (its lane is
    ``thread.x``), float4 packs a lane, an online max/sum accumulator pushed per element in
    a loop over the pack and merged across lanes by a butterfly of its ``merge``:
    warp-reduce makes the merge the pair's two reductions, then the row goes to a block
    (at C=132 most threads of 256 see no element: their pair (-inf, 0) adds nothing)."""
    _skip_without_emulator(target)
    rows = _rewritten(METHOD_ROWS, ["warp-reduce{at=0}", "widen-warps{dim=x,threads=256}"],
                      sizes)
    assert rows.kernel.launch.block == (256, 1, 1)
    assert not any(isinstance(n, Shuffle) for n in rows.kernel.body.walk())
    outcome = check_on_target(rows, target)
    assert outcome.result.ok, outcome.result.describe()


def test_hints_give_the_accumulator_softmax_a_block_a_row():
    loaded = load_kernel(METHOD_ROWS)
    found = {h.name: [str(s) for s in h.steps]
             for h in hints(loaded.kernel, REGISTRY, context_for(loaded))}
    assert found["block-rows-256"][:2] == ["warp-reduce{at=0}",
                                           "widen-warps{dim=x,threads=256}"]


TT_SOFTMAX = Path(__file__).resolve().parents[1] / "frontend" / "data" / "warp_softmax_tt.cu"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sizes", [{}, {"R": 7, "C": 72}])
def test_warps_in_the_rows_of_a_two_dimensional_block(target, sizes):
    """OneFlow's shape (tests/frontend/data/warp_softmax_tt.cu): a block of (32, 4), its
    lane thread.x and its warp thread.y, butterflies through inlined reduction functors,
    two elements a lane at a time: each warp's row goes to a block of its own."""
    _skip_without_emulator(target)
    steps = ["warp-reduce{at=0}", "warp-reduce{at=0}", "widen-warps{dim=x,threads=128}"]
    rows = _rewritten(TT_SOFTMAX, steps, sizes)
    assert rows.kernel.launch.block == (128, 1, 1) and rows.kernel.launch.grid[1] == "4"
    outcome = check_on_target(rows, target)
    assert outcome.result.ok, outcome.result.describe()
