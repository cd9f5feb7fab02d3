"""vectorize-access: golden IR, semantics on the interpreter, refusals, example sweep."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from kir.frontends.cuda import load_cuda
from kir.rewrites.vectorize.vectorize_access import RULES

from kir.driver.rulecheck import sweep
from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
EXAMPLES = Path(__file__).parents[2] / "examples"

AXPY = """
__global__ void axpy(const float* x, float* y, float a, int n) {
    int base = threadIdx.x * n;
    for (int i = 0; i < n; i++) {
        y[base + i] = a * x[base + i] + y[base + i];
    }
}
"""

GOLDEN = """\
kernel @axpy(x: f32* global const, y: f32* global, a: f32, n: i32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
  let base: i32 = i32(thread.x * u32(n))
  for L0 i: i32 = 0; i < select(base % 4 == 0, n / 4 * 4, 0); i = i + 4 {
    y[base + i] = f32x4{a, a, a, a} * (x[base + i] as f32x4) + (y[base + i] as f32x4)
  }
  for L1 i_rest: i32 = select(base % 4 == 0, n / 4 * 4, 0); i_rest < n; i_rest = i_rest + 1 {
    y[base + i_rest] = a * x[base + i_rest] + y[base + i_rest]
  }
}
"""


def kernel(text: str = AXPY):
    return load_cuda(text, "t.cu", launch=Launch(("1", "1", "1"), (4, 1, 1)))


def run(k, n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    args = {"x": rng.standard_normal(4 * n).astype(np.float32),
            "y": rng.standard_normal(4 * n).astype(np.float32), "a": 1.5, "n": n}
    return run_kernel(k, args)["y"]


def test_golden():
    result = RULE.rewrite(kernel(), "L0", {"width": 4}, RuleContext(scalars={"n": 8}))
    assert not isinstance(result, NotApplicable), result
    verify(result)
    assert print_kernel(result, locations=False) == GOLDEN


def test_semantics_kept():
    for n, width in ((8, 4), (12, 4), (6, 2)):
        result = RULE.rewrite(kernel(), "L0", {"width": width}, RuleContext(scalars={"n": n}))
        np.testing.assert_array_equal(run(result, n), run(kernel(), n))


def test_sizes_the_spec_does_not_align_take_the_scalar_loop():
    """Built where the spec's n = 8 makes every row start aligned, the kernel checks the
    alignment at run time: at n = 6 (rows starting at 6, 12, 18) the vector loop does
    nothing and the remainder loop everything, with the original's results."""
    result = RULE.rewrite(kernel(), "L0", {"width": 4}, RuleContext(scalars={"n": 8}))
    assert not isinstance(result, NotApplicable), result
    for n in (6, 7, 8, 13):
        np.testing.assert_array_equal(run(result, n), run(kernel(), n))


def test_misaligned_base_is_refused():
    result = RULE.rewrite(kernel(), "L0", {"width": 4}, RuleContext(scalars={"n": 6}))
    assert isinstance(result, NotApplicable)
    assert "multiple of 4" in result.reason


def test_dependence_between_elements_is_refused():
    text = AXPY.replace("+ y[base + i];", "+ y[base + i + 4];")
    result = RULE.rewrite(kernel(text), "L0", {"width": 4}, RuleContext(scalars={"n": 8}))
    assert isinstance(result, NotApplicable)
    assert "different offsets" in result.reason


def test_examples_sweep():
    files = [EXAMPLES / f for f in ("sgemm.cu", "flash_attn.cu", "softmax.cu", "layernorm.cu")]
    sizes = {"sgemm.cu": [dict(M=32, N=32, K=32)],
             "flash_attn.cu": [dict(B=1, H=1, N=64, D=16), dict(B=1, H=1, N=40, D=16)],
             "softmax.cu": [dict(rows=4)]}
    results = sweep([RULE], files, sizes)
    same = [str(a.step) for a in results if a.status == "same"]
    assert "vectorize-access{loop=L1,width=4}" in same  # FA's K/V tile load
    bad = [(str(a.step), a.status, a.detail) for a in results
           if a.status in ("changed", "error")]
    assert not bad, bad
    print(f"{len(results)} applications checked")
