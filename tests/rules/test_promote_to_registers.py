"""promote-to-registers: golden IR, semantics on the interpreter, refusals, example sweep."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.backends import TARGETS
from kir.frontends.cuda import load_cuda
from kir.rewrites.promote_to_registers import RULES

from kir.driver.rulecheck import sweep
from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).parents[2] / "examples"
LAUNCH = Launch(("2", "1", "1"), (8, 1, 1))

# Each thread accumulates into its own element of acc across the loop (case 1), and a row of
# four outputs (case 2).
SNIPPET = """
__global__ void k(const float* x, float* acc, float* row, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < n; i++) {
        acc[t] = acc[t] + x[i * 16 + t];
        for (int c = 0; c < 4; c++) {
            row[t * 4 + c] += x[i * 16 + t] * c;
        }
    }
}
"""

GOLDEN_SCALAR = """\
kernel @k(x: f32* global const, acc: f32* global, row: f32* global, n: i32)
    grid=("2", "1", "1") block=(8, 1, 1) shared_bytes=0 {
  let t: i32 = i32(block.x * block_dim.x + thread.x)
  let acc_reg: f32
  if 0 < n {
    acc_reg = acc[t]
  }
  for L0 i: i32 = 0; i < n; i = i + 1 {
    acc_reg = acc_reg + x[i * 16 + t]
    for L1 c: i32 = 0; c < 4; c = c + 1 {
      row[t * 4 + c] = row[t * 4 + c] + x[i * 16 + t] * f32(c)
    }
  }
  if 0 < n {
    acc[t] = acc_reg
  }
}
"""

GOLDEN_ARRAY = """\
kernel @k(x: f32* global const, acc: f32* global, row: f32* global, n: i32)
    grid=("2", "1", "1") block=(8, 1, 1) shared_bytes=0 {
  let t: i32 = i32(block.x * block_dim.x + thread.x)
  local row_reg: f32[4]
  if 0 < n {
    for L2 r: i32 = 0; r < 4; r = r + 1 {
      row_reg[r] = row[t * 4 + r]
    }
  }
  for L0 i: i32 = 0; i < n; i = i + 1 {
    acc[t] = acc[t] + x[i * 16 + t]
    for L1 c: i32 = 0; c < 4; c = c + 1 {
      row_reg[c] = row_reg[c] + x[i * 16 + t] * f32(c)
    }
  }
  if 0 < n {
    for L3 r: i32 = 0; r < 4; r = r + 1 {
      row[t * 4 + r] = row_reg[r]
    }
  }
}
"""


def snippet_kernel(text: str = SNIPPET):
    return load_cuda(text, "t.cu", launch=LAUNCH)


def run(kernel, n: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    args = {"x": rng.standard_normal(16 * n).astype(np.float32),
            "acc": rng.standard_normal(16).astype(np.float32),
            "row": rng.standard_normal(64).astype(np.float32), "n": n}
    return run_kernel(kernel, args)


def test_sites_on_snippet():
    assert RULE.sites(snippet_kernel()) == ["x", "acc", "row"]


def test_golden_scalar_case():
    result = RULE.rewrite(snippet_kernel(), "acc", {}, RuleContext())
    assert not isinstance(result, NotApplicable), result
    verify(result)
    assert print_kernel(result, locations=False) == GOLDEN_SCALAR


def test_golden_array_case():
    result = RULE.rewrite(snippet_kernel(), "row", {}, RuleContext())
    assert not isinstance(result, NotApplicable), result
    verify(result)
    assert print_kernel(result, locations=False) == GOLDEN_ARRAY


def test_semantics_kept_including_zero_trips():
    kernel = snippet_kernel()
    for site in ("acc", "row"):
        result = RULE.rewrite(kernel, site, {}, RuleContext())
        for n in (0, 1, 5):
            want, got = run(kernel, n), run(result, n)
            for name in ("acc", "row"):
                np.testing.assert_allclose(got[name], want[name], rtol=1e-6)


def test_shared_index_not_private_is_refused():
    # Every thread reads acc[i]: not thread-private, promoting would hide other threads' data.
    text = SNIPPET.replace("acc[t] = acc[t] + x[i * 16 + t];", "acc[0] = acc[0] + x[i];")
    result = RULE.rewrite(snippet_kernel(text), "acc", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "thread" in result.reason


def test_variant_index_is_refused():
    text = SNIPPET.replace("acc[t] = acc[t] + x[i * 16 + t];",
                           "acc[t * 4 + i] = acc[t * 4 + i] + 1.0f;")
    result = RULE.rewrite(snippet_kernel(text), "acc@L0", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "neither loop-invariant" in result.reason


def test_only_conditional_access_is_refused():
    # The element is touched only when x is positive: hoisting the load could read an
    # element the loop never reads.
    text = SNIPPET.replace("acc[t] = acc[t] + x[i * 16 + t];",
                           "if (x[i * 16 + t] > 0.0f) { acc[t] = acc[t] + 1.0f; }")
    result = RULE.rewrite(snippet_kernel(text), "acc@L0", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "every iteration" in result.reason


def test_unspecialized_range_is_refused():
    text = SNIPPET.replace("c < 4", "c < n")
    result = RULE.rewrite(snippet_kernel(text), "row", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "specialized" in result.reason


def test_flash_attention_rows_sweep():
    """FA with the query-tile loop outside (FA-2 order): l, m and O's row go to registers."""
    path = DATA / "flash_attn_rows.cu"
    sizes = [dict(B=1, H=1, N=64, D=16), dict(B=1, H=1, N=40, D=16)]
    results = sweep([RULE], [path], {path.name: sizes})
    sites = {str(a.step) for a in results}
    assert {"promote-to-registers{buffer=l}", "promote-to-registers{buffer=m}",
            "promote-to-registers{buffer=O}"} <= sites
    bad = [(str(a.step), a.status, a.detail) for a in results if a.status != "same"]
    assert not bad, bad
    print(f"{len(results)} applications checked on {path.name}")


def test_examples_sweep():
    """On the examples as written (FA-1 loop order) no access is loop-invariant per thread;
    every application the sweep finds must keep results."""
    files = [EXAMPLES / f for f in ("sgemm.cu", "flash_attn.cu", "softmax.cu", "layernorm.cu",
                                    "reduce.cu", "selective_scan.cu")]
    sizes = {"sgemm.cu": [dict(M=32, N=32, K=32), dict(M=20, N=20, K=20)],
             "flash_attn.cu": [dict(B=1, H=1, N=64, D=16), dict(B=1, H=1, N=40, D=16)]}
    results = sweep([RULE], files, sizes)
    bad = [(str(a.step), a.status, a.detail) for a in results
           if a.status in ("changed", "error")]
    assert not bad, bad
    print(f"{len(results)} applications checked on the examples")


# ------------------------------------------------ each access keeps its own inner loop variable

# A thread-private shared row written in one loop and read (and updated) in two others, each
# with its own loop variable: B_reg must be indexed by the variable of the loop around each
# access (a, b or c), never by the first access's.
PRIVATE_ROW = """
__global__ void k(const float* x, float* out, int n) {
    __shared__ float row[32];
    int t = threadIdx.x;
    for (int i = 0; i < n; i++) {
        for (int a = 0; a < 4; a++) {
            row[t * 4 + a] = x[(i * 8 + t) * 4 + a];
        }
        float s = 0.0f;
        for (int b = 0; b < 4; b++) {
            s += row[t * 4 + b] * (b + 1);
        }
        for (int c = 0; c < 4; c++) {
            row[t * 4 + c] = row[t * 4 + c] * s + c;
            out[(i * 8 + t) * 4 + c] = row[t * 4 + c];
        }
    }
}
"""
PRIVATE_LAUNCH = Launch(("1", "1", "1"), (8, 1, 1))


def _run_private_row(kernel, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    args = {"x": rng.standard_normal(32 * max(n, 1)).astype(np.float32),
            "out": np.zeros(32 * max(n, 1), np.float32), "n": n}
    return run_kernel(kernel, args)


def test_shared_row_read_in_loops_with_different_variables():
    kernel = load_cuda(PRIVATE_ROW, "t.cu", launch=PRIVATE_LAUNCH)
    result = RULE.rewrite(kernel, "row", {}, RuleContext())
    assert not isinstance(result, NotApplicable), result
    verify(result)
    # Every access of row_reg in the loops uses the variable of its own loop.
    text = print_kernel(result, locations=False)
    for var in ("a", "b", "c"):
        assert f"row_reg[{var}]" in text, text
    for n in (0, 1, 3):
        want, got = _run_private_row(kernel, n), _run_private_row(result, n)
        np.testing.assert_array_equal(got["out"], want["out"])


def test_break_in_the_row_loop_is_refused():
    # The only access that would touch the whole row may stop early: the hoisted load could
    # touch elements the loop never touches.
    text = SNIPPET.replace("row[t * 4 + c] += x[i * 16 + t] * c;",
                           "if (c == n) { break; }\n            row[t * 4 + c] += x[i * 16 + t];")
    result = RULE.rewrite(snippet_kernel(text), "row@L0", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "every iteration" in result.reason


def test_continue_in_the_loop_is_refused():
    text = SNIPPET.replace("acc[t] = acc[t] + x[i * 16 + t];",
                           "if (i == 0) { continue; }\n        acc[t] = acc[t] + x[i * 16 + t];")
    result = RULE.rewrite(snippet_kernel(text), "acc@L0", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "break or continue" in result.reason


def test_buffer_read_in_the_loop_header_is_refused():
    text = SNIPPET.replace("i < n;", "i < n + int(acc[0] * 0.0f);")
    result = RULE.rewrite(snippet_kernel(text), "acc@L0", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "header" in result.reason


# FA-1 with the shared tiles split, the tile loops swapped and the query tiles in blocks: Qi's
# row is written in L3 (variable x_1) and read in the dot product L5 (x_2); S's row is written
# in L4 (y), updated in L6 (y_1) and read in L8 (y_2).
FA_PREFIX = ["split-shared{buffer=sram}", "interchange-loops{loop=L0}",
             "parallelize-loop{loop=L2,dim=z}"]


def _fa_rewritten(steps, sizes):
    from kir.driver.load import load_kernel
    from kir.driver.registry import load_registry
    from kir.rules import apply_trace, context_for, parse_step

    registry = load_registry(plugins=False)
    loaded = load_kernel(EXAMPLES / "flash_attn.cu", sizes=sizes)
    done = apply_trace(loaded.kernel, [parse_step(s, registry) for s in steps], registry,
                       context_for(loaded, TARGETS["cuda"]), strict=True)
    return loaded, done.kernel


@pytest.mark.parametrize("sizes", [{}, {"N": 200}], ids=["spec", "N200"])
@pytest.mark.parametrize("buffers", [["sram_Qi"], ["sram_S"], ["sram_Qi", "sram_S"]],
                         ids=["Qi", "S", "Qi+S"])
def test_flash_shared_rows_keep_results(sizes, buffers):
    from kir.driver.runners import copy_inputs, reference_outputs, run_interp
    from kir.spec.compare import compare_outputs

    steps = FA_PREFIX + [f"promote-to-registers{{buffer={b}}}" for b in buffers]
    loaded, out = _fa_rewritten(steps, sizes)
    verify(out)
    _, before = _fa_rewritten(FA_PREFIX, sizes)
    bound = loaded.bound
    inputs = bound.make_inputs(0)
    original = run_interp(loaded, copy_inputs(inputs))
    want, _ = reference_outputs(loaded, copy_inputs(inputs))
    got = run_kernel(out, copy_inputs(inputs), bound.sizes)
    unpromoted = run_kernel(before, copy_inputs(inputs), bound.sizes)
    tolerance = lambda o: bound.tolerance(bound.spec.args[o].dtype)  # noqa: E731
    for expected in (original, want):
        result = compare_outputs(got, expected, tolerance)
        assert result.ok, result.describe()
    # Registers instead of shared memory change no arithmetic: bit-identical results.
    for name in ("O", "l", "m"):
        np.testing.assert_array_equal(got[name], unpromoted[name])
