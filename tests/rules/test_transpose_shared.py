"""transpose-shared: golden IR, semantics on the interpreter, refusals, example sweep."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from kir.frontends.cuda import load_cuda
from kir.rewrites.shared_tiles.transpose_shared import RULES

from kir.driver.rulecheck import sweep
from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
EXAMPLES = Path(__file__).parents[2] / "examples"

# A 32 x 32 tile transpose through shared memory: stored transposed, the second loop reads
# consecutive addresses across the warp.
TRANSPOSE = """
__global__ void tr(const float* a, float* b) {
    __shared__ float tile[32 * 32];
    int x = threadIdx.x;
    for (int r = 0; r < 32; r++) {
        tile[r * 32 + x] = a[r * 32 + x];
    }
    __syncthreads();
    for (int r = 0; r < 32; r++) {
        b[r * 32 + x] = tile[x * 32 + r];
    }
}
"""

GOLDEN = """\
kernel @tr(a: f32* global const, b: f32* global)
    grid=("1", "1", "1") block=(32, 1, 1) shared_bytes=0 {
  shared tile: f32[1024]
  let x: i32 = i32(thread.x)
  for L0 r: i32 = 0; r < 32; r = r + 1 {
    tile[x * 32 + r] = a[r * 32 + x]
  }
  barrier block
  for L1 r_1: i32 = 0; r_1 < 32; r_1 = r_1 + 1 {
    b[r_1 * 32 + x] = tile[r_1 * 32 + x]
  }
}
"""


def kernel(text: str = TRANSPOSE):
    return load_cuda(text, "t.cu", launch=Launch(("1", "1", "1"), (32, 1, 1)))


def test_sites():
    assert RULE.sites(kernel()) == ["tile"]


def test_golden():
    result = RULE.rewrite(kernel(), "tile", {}, RuleContext())
    assert not isinstance(result, NotApplicable), result
    verify(result)
    assert print_kernel(result, locations=False) == GOLDEN


def test_semantics_kept():
    a = np.arange(1024, dtype=np.float32)
    before = run_kernel(kernel(), {"a": a, "b": np.zeros(1024, np.float32)})
    after = run_kernel(RULE.rewrite(kernel(), "tile", {}, RuleContext()),
                       {"a": a, "b": np.zeros(1024, np.float32)})
    np.testing.assert_array_equal(after["b"], before["b"])
    np.testing.assert_array_equal(after["b"], a.reshape(32, 32).T.ravel())


def test_column_not_bounded_is_refused():
    # x + r can reach 62: the column part is not below any row pitch.
    result = RULE.rewrite(kernel(TRANSPOSE.replace("tile[x * 32 + r]", "tile[x + r]")), "tile",
                          {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "t[r * C + c]" in result.reason


def test_single_row_is_refused():
    text = TRANSPOSE.replace("tile[32 * 32]", "tile[32]").replace("tile[r * 32 + x]", "tile[x]")
    text = text.replace("tile[x * 32 + r]", "tile[x]")
    result = RULE.rewrite(kernel(text), "tile", {}, RuleContext())
    assert isinstance(result, NotApplicable)


def test_not_shared_is_refused():
    result = RULE.rewrite(kernel(), "a", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "no shared array" in result.reason


def test_examples_sweep():
    files = [EXAMPLES / f for f in ("sgemm.cu", "flash_attn.cu", "softmax.cu", "reduce.cu")]
    sizes = {"sgemm.cu": [dict(M=32, N=32, K=32), dict(M=20, N=20, K=20)],
             "flash_attn.cu": [dict(B=1, H=1, N=64, D=16)]}
    results = sweep([RULE], files, sizes)
    steps = {str(a.step) for a in results}
    assert {"transpose-shared{buffer=As}", "transpose-shared{buffer=Bs}"} <= steps
    bad = [(str(a.step), a.status, a.detail) for a in results if a.status != "same"]
    assert not bad, bad
    print(f"{len(results)} applications checked")
