"""mma-tile: golden IR, interpreter semantics, refusals, example sweep, emulated targets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from kir.rewrites.mma_tile import MmaTile
from parallel_common import EXAMPLES, kernel, same_outputs, sweep_examples, text

from kir.driver.load import load_kernel
from kir.rules import NotApplicable, RuleContext

RULE = MmaTile()
CTX = RuleContext()

# Shared tiles with B stored transposed and padded (row stride 17): the B fragment loads
# transposed with stride 17.
SRC = r"""
__global__ void mm(const float* A, const float* B, float* C, int n) {
    __shared__ float As[16 * 16];
    __shared__ float Bt[16 * 17];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    float acc = 0.0f;
    for (int t = 0; t < n; t += 16) {
        As[ty * 16 + tx] = A[ty * n + t + tx];
        Bt[tx * 17 + ty] = B[(t + ty) * 16 + tx];
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += As[ty * 16 + k] * Bt[tx * 17 + k];
        __syncthreads();
    }
    C[ty * 16 + tx] = acc;
}
"""

EXPECTED = """\
kernel @mm(A: f32* global const, B: f32* global const, C: f32* global, n: i32)
    grid=("1", "1", "1") block=(16, 16, 1) shared_bytes=0 {
  shared As: f32[256]
  shared Bt: f32[272]
  shared mma_stage: f32[512]
  let tx: i32 = i32(thread.x)
  let ty: i32 = i32(thread.y)
  let acc: f32 = 0.0
  let mma_warp: i32 = i32(warp)
  let mma_half: i32 = mma_warp / 4
  let mma_row: i32 = mma_warp % 4 / 2 * 8
  let mma_col: i32 = mma_warp % 4 % 2 * 8
  matrix mma_acc: f32m8x8 = fill 0.0
  for L0 t: i32 = 0; t < n; t = t + 16 {
    As[ty * 16 + tx] = A[ty * n + t + tx]
    Bt[tx * 17 + ty] = B[(t + ty) * 16 + tx]
    barrier block
    for L1 mma_k: i32 = mma_half * 8; mma_k < 16; mma_k = mma_k + 16 {
      matrix mma_a: f32m8x8 = mload As[mma_row * 16 + mma_k] stride 16
      matrix mma_b: f32m8x8 = mload Bt[mma_k + mma_col * 17] stride 17 transposed
      mma mma_acc += mma_a * mma_b
    }
    barrier block
  }
  mstore mma_stage[mma_half * 256 + mma_row * 16 + mma_col] stride 16 = mma_acc
  barrier block
  acc = acc + (mma_stage[i32(thread.y) * 16 + i32(thread.x)] + \
mma_stage[256 + (i32(thread.y) * 16 + i32(thread.x))])
  C[ty * 16 + tx] = acc
}"""


def _mm(src: str = SRC, block=(16, 16, 1)):
    return kernel(src, block=block)


def test_golden_and_semantics() -> None:
    before = _mm()
    assert RULE.sites(before) == ["L1"]
    after = RULE.rewrite(before, "L1", {}, CTX)
    assert text(after) == EXPECTED
    rng = np.random.default_rng(1)
    args = {"A": rng.standard_normal(16 * 48).astype(np.float32),
            "B": rng.standard_normal(48 * 16).astype(np.float32),
            "C": np.zeros(256, np.float32), "n": np.int32(48)}
    same_outputs(before, after, args, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("old,new,reason", [
    ("k < 16; ++k", "k < 8; ++k", "block of T x T"),
    ("As[ty * 16 + k] * Bt[tx * 17 + k]", "As[ty * 16 + k] * As[tx * 16 + k] * 2.0f",
     "is not `acc = acc + x[..] * y[..]`"),
    ("As[ty * 16 + k] * Bt[tx * 17 + k]", "As[ty * 16 + k] * Bt[tx * 17 + k / 2]",
     "not affine"),
    ("As[ty * 16 + k] * Bt[tx * 17 + k]", "As[ty * 16 + k] * Bt[ty * 17 + k]", "As[thread.y]"),
])
def test_not_applicable(old: str, new: str, reason: str) -> None:
    result = RULE.rewrite(_mm(SRC.replace(old, new)), "L1", {}, CTX)
    assert isinstance(result, NotApplicable)
    assert reason in result.reason


def test_operands_in_either_order_and_layout() -> None:
    # Bt row-major indexed by thread.y is the A tile; As indexed by thread.x loads transposed.
    src = SRC.replace("As[ty * 16 + k] * Bt[tx * 17 + k]", "As[tx * 16 + k] * Bt[ty * 17 + k]")
    before = _mm(src)
    after = RULE.rewrite(before, "L1", {}, CTX)
    assert "mload Bt[mma_row * 17 + mma_k] stride 17\n" in text(after)
    assert "mload As[mma_k + mma_col * 16] stride 16 transposed" in text(after)
    rng = np.random.default_rng(2)
    args = {"A": rng.standard_normal(16 * 32).astype(np.float32),
            "B": rng.standard_normal(32 * 16).astype(np.float32),
            "C": np.zeros(256, np.float32), "n": np.int32(32)}
    same_outputs(before, after, args, rtol=1e-4, atol=1e-4)


def test_not_applicable_when_acc_is_read_inside_the_loop_nest() -> None:
    src = SRC.replace("__syncthreads();\n    }", "__syncthreads();\n        C[0] = acc;\n    }")
    result = RULE.rewrite(_mm(src), "L1", {}, CTX)
    assert isinstance(result, NotApplicable) and "used outside the inner product" in result.reason


def test_not_applicable_for_a_block_that_is_not_square() -> None:
    result = RULE.rewrite(_mm(block=(16, 8, 1)), "L1", {}, CTX)
    assert isinstance(result, NotApplicable) and "T x T" in result.reason


def test_sweep_over_examples() -> None:
    counts = sweep_examples([RULE])
    assert counts.get("same", 0) >= 2  # sgemm at both sizes


def _sgemm(sizes: dict):
    loaded = load_kernel(EXAMPLES / "sgemm.cu", sizes=sizes)
    new = RULE.rewrite(loaded.kernel, "L1", {}, CTX)
    assert not isinstance(new, NotApplicable)
    return dataclasses.replace(loaded, kernel=new)


@pytest.mark.parametrize("sizes", [{}, {"M": 70, "N": 50, "K": 37}])
def test_sgemm_within_tolerance_on_the_interpreter(sizes: dict) -> None:
    from kir.driver.runners import check_on_target

    outcome = check_on_target(_sgemm(sizes), "interp")
    assert outcome.result.ok, outcome.result


@pytest.mark.parametrize("target", ["emulate-metal", "emulate-cuda"])
def test_emulated_targets_equal_the_interpreter(target: str) -> None:
    from kir.backends.emulate import emulator_available

    from kir.driver.runners import RUNNERS, copy_inputs, run_interp

    ok, reason = emulator_available()
    if not ok:
        pytest.skip(f"CPU emulator unavailable: {reason}")
    loaded = _sgemm({"M": 40, "N": 24, "K": 37})
    inputs = loaded.bound.make_inputs(0)
    expected = run_interp(loaded, copy_inputs(inputs))["C"]
    got = RUNNERS[target](loaded, copy_inputs(inputs))["C"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
