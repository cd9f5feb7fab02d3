"""fast-math: precise intrinsics become their fast forms."""

from __future__ import annotations

import numpy as np
from kir.frontends.cuda import load_cuda
from kir.rewrites.fast_math import FastMath
from loop_sizes import sweep_summary

from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

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
    out = RULE.rewrite(kernel(), "all", {}, RuleContext())
    verify(out)
    assert print_kernel(out, locations=False) == HEAD + (
        "    y[i] = fast.exp(x[i]) + fast.log(x[i] + 2.0) * fast.sqrt(x[i] + 1.0)"
        " + fast.exp(x[i]) + max(x[i], 0.0)\n  }\n}\n")
    assert RULE.sites(out) == []


def test_one_function_only():
    out = RULE.rewrite(kernel(), "log", {}, RuleContext())
    assert print_kernel(out, locations=False) == HEAD + (
        "    y[i] = exp(x[i]) + fast.log(x[i] + 2.0) * sqrt(x[i] + 1.0)"
        " + fast.exp(x[i]) + max(x[i], 0.0)\n  }\n}\n")


def test_semantics_on_interpreter():
    k = kernel()
    x = np.linspace(-0.5, 3.0, 100, dtype=np.float32)
    args = {"x": x, "y": np.zeros(100, np.float32), "n": 100}
    before = run_kernel(k, args, {"n": 100})["y"]
    after = run_kernel(RULE.rewrite(k, "all", {}, RuleContext()), args, {"n": 100})["y"]
    np.testing.assert_allclose(after, before, rtol=1e-6)


def test_not_applicable():
    k = kernel()
    bad = RULE.rewrite(k, "div", {}, RuleContext())
    assert isinstance(bad, NotApplicable) and "no fast form" in bad.reason
    none = RULE.rewrite(k, "tanh", {}, RuleContext())
    assert isinstance(none, NotApplicable) and "no precise f32 tanh" in none.reason


def test_sweep_over_examples():
    counts, bad = sweep_summary([RULE])  # every example at the shared small + ragged sizes
    checked = counts.get("same", 0)
    print(f"fast-math: {checked} applications checked")
    assert not bad
    assert checked >= 4  # softmax, flash_attn, layernorm and selective_scan have exp calls
