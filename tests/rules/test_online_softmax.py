"""online-softmax: the max pass and the sum-of-exp pass fuse into one online pass."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from kir.rewrites.online_softmax import OnlineSoftmax
from loop_sizes import sweep_summary

from kir.analysis import map_stmts, used_vars
from kir.driver.load import load_kernel
from kir.interp import run_kernel
from kir.ir import Assign, Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULE = OnlineSoftmax()
CTX = RuleContext()
SRC = """
__global__ void sm(const float* x, float* y, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    float m = -1e30f;
    for (int c = 0; c < cols; c++) m = fmaxf(m, x[r * cols + c]);
    float s = 0.0f;
    for (int c = 0; c < SUM_STOP; c++) s += expf(x[r * cols + c] - m);
    for (int c = 0; c < cols; c++) y[r * cols + c] = expf(x[r * cols + c] - m) / s;
}
"""
LAUNCH = Launch(("rows", "1", "1"), (1, 1, 1))


def serial(stop: str = "cols"):
    return load_cuda(SRC.replace("SUM_STOP", stop), "t.cu", launch=LAUNCH)


EXPECTED = """kernel @sm(x: f32* global const, y: f32* global, cols: i32)
    grid=("rows", "1", "1") block=(1, 1, 1) shared_bytes=0 {
  let r: i32 = i32(block.x * block_dim.x + thread.x)
  let m: f32 = -1.0000000150474662e+30
  let s: f32 = 0.0
  for L0 c: i32 = 0; c < cols; c = c + 1 {
    let m_x: f32 = x[r * cols + c]
    let m_new: f32 = max(m, m_x)
    s = s * exp(m - m_new) + exp(m_x - m_new)
    m = m_new
  }
  let m_thread: f32 = m
  s = s * exp(m_thread - m)
  for L2 c_2: i32 = 0; c_2 < cols; c_2 = c_2 + 1 {
    y[r * cols + c_2] = exp(x[r * cols + c_2] - m) / s
  }
}
"""


def test_golden_serial_softmax():
    k = serial()
    assert RULE.sites(k) == ["L0"]
    out = RULE.rewrite(k, "L0", {}, CTX)
    verify(out)
    assert print_kernel(out, locations=False) == EXPECTED
    args = {"x": np.random.default_rng(1).uniform(-80, 80, (3, 50)).astype(np.float32),
            "y": np.zeros((3, 50), np.float32), "cols": 50}
    np.testing.assert_allclose(run_kernel(out, args, {"rows": 3})["y"],
                               run_kernel(k, args, {"rows": 3})["y"], rtol=1e-5, atol=1e-7)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def example():
    return load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 4, "cols": 333})


@pytest.mark.parametrize("scale", [1.0, 80.0, 100.0])
def test_softmax_example_block_reduction(example, scale):
    """Block-strided per-thread partials: the rescale before the block sum must be there.
    Inputs of +-80 and +-100 overflow exp if any sum were taken outside a max's frame."""
    k = example.kernel
    assert "L0" in RULE.sites(k)
    fused = RULE.rewrite(k, "L0", {}, CTX)
    verify(fused)
    x = np.random.default_rng(2).uniform(-scale, scale, (4, 333)).astype(np.float32)
    args = {"x": x, "y": np.zeros_like(x), "cols": 333}
    want = _softmax(x)
    before = run_kernel(k, args, {"rows": 4})["y"]
    after = run_kernel(fused, args, {"rows": 4})["y"]
    np.testing.assert_allclose(before, want, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(after, want, rtol=1e-4, atol=1e-7)


def test_rescale_is_what_makes_it_right(example):
    """Dropping the inserted rescale (the per-thread sums left in their own max's frame)
    gives wrong results: the test above can tell."""
    fused = RULE.rewrite(example.kernel, "L0", {}, CTX)
    def drop_rescale(s):
        rescale = isinstance(s, Assign) and "local_max_thread" in used_vars(s.value)
        return [] if rescale else None

    body = map_stmts(fused.body, drop_rescale)
    broken = dataclasses.replace(fused, body=body)
    assert broken != fused
    x = np.random.default_rng(3).uniform(-80, 80, (4, 333)).astype(np.float32)
    got = run_kernel(broken, {"x": x, "y": np.zeros_like(x), "cols": 333}, {"rows": 4})["y"]
    assert not np.allclose(got, _softmax(x), rtol=1e-3)


def test_not_applicable():
    k = serial()
    out = RULE.rewrite(k, "L1", {}, CTX)
    assert isinstance(out, NotApplicable) and "not a max pass" in out.reason
    other = RULE.rewrite(serial("cols - 1"), "L0", {}, CTX)
    assert isinstance(other, NotApplicable) and "same range" in other.reason
    assert RULE.sites(serial("cols - 1")) == []
    written = load_cuda(SRC.replace("SUM_STOP", "cols").replace(
        "float s = 0.0f;", "float s = 0.0f; y[0] = 1.0f;").replace("const float* x", "float* x")
        .replace("y[0]", "x[0]"), "t.cu", launch=LAUNCH)
    moved = RULE.rewrite(written, "L0", {}, CTX)
    assert isinstance(moved, NotApplicable) and "written between" in moved.reason
    assert isinstance(RULE.rewrite(k, "L9", {}, CTX), NotApplicable)


def test_sweep_over_examples():
    counts, bad = sweep_summary([RULE])  # every example at the shared small + ragged sizes
    checked = counts.get("same", 0)
    print(f"online-softmax: {checked} applications checked")
    assert not bad
    assert checked >= 2  # the softmax example at both sizes
