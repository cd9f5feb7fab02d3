"""fast-math: precise intrinsics become their fast forms."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kir.frontends.cuda import load_cuda
from kir.interp import run_kernel
from kir.ir import Launch
from kir.printer import print_kernel
from kir.rulecheck import example_files, sweep
from kir.rules import NotApplicable, RuleContext
from kir.rewrites.fast_math import FastMath
from kir.verify import verify

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULE = FastMath()
SRC = """
__global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = expf(x[i]) + logf(x[i] + 2.0f) * sqrtf(x[i] + 1.0f) + __expf(x[i])
               + fmaxf(x[i], 0.0f);
    }
}
"""
HEAD = """kernel @k(x: f32* global const, y: f32* global, n: i32)
    grid=("ceil(n / 64)", "1", "1") block=(64, 1, 1) shared_bytes=0 {
  let i: i32 = i32(block.x * block_dim.x + thread.x)
  if i < n {
"""


def kernel():
    return load_cuda(SRC, "t.cu", launch=Launch(("ceil(n / 64)", "1", "1"), (64, 1, 1)))


def test_sites_list_each_precise_function_once():
    # exp occurs precise and fast; max has no fast form.
    assert RULE.sites(kernel()) == ["all", "exp", "log", "sqrt"]


def test_all_makes_every_precise_call_fast():
    out = RULE.apply(kernel(), "all", {}, RuleContext())
    verify(out)
    assert print_kernel(out, locations=False) == HEAD + (
        "    y[i] = fast.exp(x[i]) + fast.log(x[i] + 2.0) * fast.sqrt(x[i] + 1.0)"
        " + fast.exp(x[i]) + max(x[i], 0.0)\n  }\n}\n")
    assert RULE.sites(out) == []


def test_one_function_only():
    out = RULE.apply(kernel(), "log", {}, RuleContext())
    assert print_kernel(out, locations=False) == HEAD + (
        "    y[i] = exp(x[i]) + fast.log(x[i] + 2.0) * sqrt(x[i] + 1.0)"
        " + fast.exp(x[i]) + max(x[i], 0.0)\n  }\n}\n")


def test_semantics_on_interpreter():
    k = kernel()
    x = np.linspace(-0.5, 3.0, 100, dtype=np.float32)
    args = {"x": x, "y": np.zeros(100, np.float32), "n": 100}
    before = run_kernel(k, args, {"n": 100})["y"]
    after = run_kernel(RULE.apply(k, "all", {}, RuleContext()), args, {"n": 100})["y"]
    np.testing.assert_allclose(after, before, rtol=1e-6)


def test_not_applicable():
    k = kernel()
    bad = RULE.apply(k, "div", {}, RuleContext())
    assert isinstance(bad, NotApplicable) and "no fast form" in bad.reason
    none = RULE.apply(k, "tanh", {}, RuleContext())
    assert isinstance(none, NotApplicable) and "no precise f32 tanh" in none.reason


def test_sweep_over_examples():
    sizes = {
        "flash_attn.cu": [{"B": 1, "H": 1, "N": 64, "D": 16, "T": 32}],
        "layernorm.cu": [{"rows": 4, "cols": 64}, {"rows": 3, "cols": 37}],
        "reduce.cu": [{"n": 1000}],
        "selective_scan.cu": [{"B": 1, "L": 16, "D": 8, "S": 4}],
        "sgemm.cu": [{"M": 32, "N": 32, "K": 32, "TILE": 16}],
        "softmax.cu": [{"rows": 4, "cols": 64}, {"rows": 4, "cols": 33}],
    }
    results = sweep([RULE], example_files(EXAMPLES), sizes)
    bad = [(str(a.step), a.kernel_file, a.detail) for a in results
           if a.status in ("changed", "error")]
    checked = sum(a.status == "same" for a in results)
    print(f"fast-math: {checked} applications checked")
    assert not bad
    assert checked >= 4  # softmax, flash_attn, layernorm and selective_scan have exp calls
