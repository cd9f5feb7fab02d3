"""cache-in-registers: a row each thread rereads in several lane-strided loops is read from
global memory once, into registers. Checked: what it rebuilds (golden shape), that results
stay bit for bit the same at the sizes cached for, at smaller ones and at larger ones (the
remainder loops), on the interpreter and both emulated targets, that nvcc compiles it, the
refusals, and that it fires on row kernels written in other styles (kir's corpus: a vLLM-style
RMS norm, llm.c's warp-a-row layer norm and softmax) and not again on its own result."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from kir.rewrites.cache_in_registers import MAX_ELEMENTS

from kir.backends import TARGETS, emit
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import RUNNERS, copy_inputs, run_interp
from kir.ir import Declare, Load
from kir.ir.verify import verify
from kir.rules import NotApplicable, apply_trace, context_for, parse_step
from tests.nvcc_build import nvcc_sm90

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES, CORPUS = ROOT / "examples", ROOT / "tests" / "corpus"
REGISTRY = load_registry(plugins=False)
RULE = REGISTRY["cache-in-registers"]
STEP = "cache-in-registers{buffer=x}"
# The layer norm a block a row (512 threads), each pass one float4 a lane: 4 float4s a thread
# at 8192 columns.
BLOCK_ROWS = ["warp-reduce{at=0}", "warp-reduce{at=0}", "widen-warps{dim=x,threads=512}",
              "vectorize-strided{loop=L0,width=4}", "vectorize-strided{loop=L2,width=4}",
              "vectorize-strided{loop=L4,width=4}"]


def _load(path: Path, sizes: dict, spec: Path | None = None):
    return load_kernel(path, spec_path=spec, sizes=sizes)


def _steps(loaded, steps: list[str], target: str = "cuda"):
    ctx = context_for(loaded, TARGETS[target])
    return apply_trace(loaded.kernel, [parse_step(s, REGISTRY) for s in steps], REGISTRY, ctx,
                       strict=True).kernel


def _same(loaded, before, after, runner=run_interp, seed: int = 1) -> None:
    inputs = loaded.bound.make_inputs(seed)
    want = runner(dataclasses.replace(loaded, kernel=before), copy_inputs(inputs))
    got = runner(dataclasses.replace(loaded, kernel=after), copy_inputs(inputs))
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_softmax_rows_read_once_into_registers():
    loaded = _load(EXAMPLES / "softmax.cu", {"rows": 4, "cols": 8192})
    out = _steps(loaded, [STEP])
    verify(out)
    # 32 register variables a thread; the first pass loads each once, the later passes read
    # x from global memory only in their remainder loops and where the row is longer than
    # what was cached.
    slots = [n for n in out.body.stmts if isinstance(n, Declare) and n.name.startswith("x_reg")]
    assert len(slots) == 8192 // 256 + 1  # and x_reg_end
    loads = [n for n in out.body.walk() if isinstance(n, Load) and n.buffer == "x"]
    assert len(loads) == 32 + 2 * 32 + 3  # the fill, the fallbacks, the remainders
    _same(loaded, loaded.kernel, out)


@pytest.mark.parametrize("cols", [8192, 300, 8191, 9000])
def test_results_are_the_same_bit_for_bit_at_other_row_lengths(cols):
    """Cached for 8192 columns; a shorter row leaves registers unused, a longer one runs
    the remainder loops from global memory."""
    out = _steps(_load(EXAMPLES / "softmax.cu", {"rows": 3, "cols": 8192}), [STEP])
    loaded = _load(EXAMPLES / "softmax.cu", {"rows": 3, "cols": cols})
    _same(loaded, loaded.kernel, out)


@pytest.mark.parametrize("cols", [8192, 100, 8200])
def test_float4_block_rows_layer_norm(cols):
    """After vectorize-strided (float4 passes and their scalar tails, misaligned rows at 100
    and 8200 columns... each pass's vector loop guarded by its own alignment check)."""
    at = _load(EXAMPLES / "layernorm.cu", {"rows": 8, "cols": 8192})
    before = _steps(at, BLOCK_ROWS)
    after = _steps(at, [*BLOCK_ROWS, STEP])
    assert len([n for n in after.body.walk() if isinstance(n, Declare)
                and n.name.startswith("x_reg") and n.init is None]) == 8192 // (512 * 4)
    _same(_load(EXAMPLES / "layernorm.cu", {"rows": 5, "cols": cols}), before, after)


def test_on_both_emulated_targets():
    from kir.backends.emulate import emulator_available

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    for target in ("cuda", "metal"):
        at = _load(EXAMPLES / "layernorm.cu", {"rows": 4, "cols": 2048})
        before = _steps(at, BLOCK_ROWS, target)
        after = _steps(at, [*BLOCK_ROWS, STEP], target)
        _same(at, before, after, RUNNERS[f"emulate-{target}"])


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_nvcc_keeps_the_row_in_registers(tmp_path):
    """The cached iterations are written out into variables: no local memory in the PTX."""
    at = _load(EXAMPLES / "layernorm.cu", {"rows": 8, "cols": 8192})
    ptx = nvcc_sm90(emit(_steps(at, [*BLOCK_ROWS, STEP]), at.bound, "cuda"), tmp_path,
                    ptx=True)
    assert "ld.global.nc.v4.f32" in ptx or "ld.global.v4.f32" in ptx
    assert ".local" not in ptx


@pytest.mark.parametrize("spec,sizes,site", [
    ("infer_norm.rms_norm", {"T": 4, "H": 4096}, "input"),
    ("llm_train.layernorm_forward", {"N": 8, "C": 768}, "inp"),
    ("llm_train.softmax_forward", {"N": 8, "C": 1024}, "inp"),
])
def test_row_kernels_written_in_other_styles(spec, sizes, site):
    source = CORPUS / (spec.split(".")[0] + ".cu")
    loaded = _load(source, sizes, CORPUS / f"{spec}.kir.toml")
    ctx = context_for(loaded, TARGETS["cuda"])
    assert site in RULE.sites(loaded.kernel, ctx)
    out = _steps(loaded, [f"cache-in-registers{{buffer={site}}}"])
    _same(loaded, loaded.kernel, out)
    # Its own remainder loops are not cached again.
    assert site not in RULE.sites(out, ctx) or \
        isinstance(RULE.rewrite(out, site, {}, ctx), NotApplicable)


def _refusal(source: str, sizes: dict, site: str = "x") -> str:
    loaded = _load(EXAMPLES / "softmax.cu", sizes)
    from kir.frontends.cuda import load_cuda

    kernel = load_cuda(source, "t.cu", launch=loaded.kernel.launch)
    ctx = context_for(loaded, TARGETS["cuda"])
    result = RULE.rewrite(kernel, site, {}, ctx)
    assert isinstance(result, NotApplicable), result
    return result.reason


TWO_PASSES = """
__global__ void k(float* x, float* y, int cols) {
    float* row = x + blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 256) s += row[c];
    for (int c = threadIdx.x; c < cols; c += 256) y[blockIdx.x * cols + c] = row[c] / s;
}
"""


def test_refusals():
    sizes = {"rows": 4, "cols": 8192}
    # One pass: nothing is reread.
    one = TWO_PASSES.replace("row[c] / s", "s")
    assert "nothing is reread" in _refusal(one, sizes)
    # The kernel writes the row it reads (in place).
    inplace = TWO_PASSES.replace("y[blockIdx.x * cols + c]", "row[c]")
    assert "writes x" in _refusal(inplace, sizes)
    # The first pass reads the row only under a condition.
    guarded = TWO_PASSES.replace("s += row[c]", "if (c % 2) s += row[c]")
    assert "under a condition" in _refusal(guarded, sizes)
    # Too long a row for a thread's registers: 8192 / 32 lanes.
    wide = TWO_PASSES.replace("256", "32")
    assert f"over the {MAX_ELEMENTS}" in _refusal(wide, sizes)
