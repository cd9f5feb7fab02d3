"""A pointer chosen at run time between buffers (``T* p = is_q ? q + a : k + b;``,
``kir.frontends.cuda.pointer_choice``): the rest of the block lowered once per buffer,
checked against numpy on every target; a choice repeated on the same condition keeps only
the copies that can run; and the refusals that stay — a barrier after the choice, lanes of
one warp choosing differently before a shuffle, arms with side effects — located."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.errors import UnsupportedError
from kir.frontends.cuda import load_cuda
from kir.interp import run_kernel
from kir.ir import If, Launch, Store

DATA = Path(__file__).parent / "data"
KERNELS = DATA / "pointer_choice.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_a_destination_picked_among_three_buffers(target):
    check_everywhere(KERNELS, target, [{}, {"T": 3, "HD": 20}], seed=2)


@pytest.mark.parametrize("target", TARGETS)
def test_a_warp_a_head_norm_choosing_its_row_and_weights(target):
    check_everywhere(KERNELS, target, [{}, {"T": 2, "QH": 3, "KH": 1}], seed=3,
                     spec=DATA / "pointer_choice_norm.kir.toml")


def _lower(body: str, block: int = 64):
    return load_cuda(body, "choice.cu", launch=Launch(("1", "1", "1"), (block, 1, 1), 0))


def test_a_choice_on_a_condition_already_decided_keeps_one_branch():
    """The row and the weights are both chosen by ``is_q``: two copies, not four."""
    kernel = load_kernel(KERNELS, spec_path=DATA / "pointer_choice_norm.kir.toml").kernel
    ifs = [s for s in kernel.body.walk() if isinstance(s, If)
           and getattr(s.cond, "name", "").startswith("chosen")]
    assert len(ifs) == 1
    stores = [s.buffer for s in kernel.body.walk() if isinstance(s, Store)]
    assert sorted(stores) == ["k", "k", "q", "q"]


def test_the_condition_is_evaluated_once_before_either_arm():
    kernel = _lower("""
__global__ void k(const float* x, float* a, float* b, int* n) {
    int i = threadIdx.x;
    float* d = (n[i] += 1, i & 1) ? a + i / 2 : b + i / 2;
    d[0] = x[i];
}""")
    x = np.arange(64, dtype=np.float32)
    out = run_kernel(kernel, {"x": x, "a": np.zeros(32, np.float32),
                              "b": np.zeros(32, np.float32), "n": np.zeros(64, np.int32)}, {})
    np.testing.assert_array_equal(out["a"], x[1::2])
    np.testing.assert_array_equal(out["b"], x[0::2])
    np.testing.assert_array_equal(out["n"], np.ones(64, np.int32))


def test_a_barrier_after_the_choice_keeps_the_refusal():
    with pytest.raises(UnsupportedError, match="depends on a condition") as raised:
        _lower("""
__global__ void k(const float* x, float* a, float* b) {
    __shared__ float s[64];
    int i = threadIdx.x;
    float* d = i < 7 ? a : b;
    s[i] = x[i];
    __syncthreads();
    d[i] = s[63 - i];
}""")
    assert raised.value.loc is not None and raised.value.loc.line == 5


def test_lanes_of_one_warp_choosing_differently_before_a_shuffle_are_refused():
    with pytest.raises(UnsupportedError, match="lanes of a warp") as raised:
        _lower("""
__global__ void k(const float* x, float* a, float* b) {
    int i = threadIdx.x;
    float* d = (i & 1) ? a : b;
    float v = x[i];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    d[i] = v;
}""")
    assert raised.value.loc.line == 4 and "warp" in raised.value.hint


def test_a_warp_uniform_choice_before_a_shuffle_is_kept():
    kernel = _lower("""
__global__ void k(const float* x, float* a, float* b) {
    int i = threadIdx.x;
    float* d = (i >> 5) ? a : b;
    float v = x[i];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    d[i & 31] = v;
}""")
    x = np.arange(64, dtype=np.float32)
    out = run_kernel(kernel, {"x": x, "a": np.zeros(32, np.float32),
                              "b": np.zeros(32, np.float32)}, {})
    pairs = x + x.reshape(-1, 2)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(out["b"], pairs[:32])
    np.testing.assert_array_equal(out["a"], pairs[32:])


def test_arms_with_side_effects_keep_the_refusal():
    with pytest.raises(UnsupportedError, match="depends on a condition"):
        _lower("""
__global__ void k(float* a, float* b) {
    int i = threadIdx.x;
    float* p = a;
    float* d = (i & 1) ? p++ : b;
    d[i] = 1.0f;
}""")
