"""``__half2``: kir's f16x2 vector, its cuda_fp16.h intrinsics lowered lane by lane and its
operators (``a * b`` on two ``__half2``), on every target against numpy, and the intrinsics'
lanes one by one on the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import Launch

BIAS_ACT = Path(__file__).parent / "data" / "half2_bias_act.cu"
BF16_PAIRS = Path(__file__).parent / "data" / "bf16_pairs.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_bias_activation_on_half_pairs_matches_numpy(target):
    check_everywhere(BIAS_ACT, target, [{}, {"R": 3, "P": 21}], seed=6)


def test_each_intrinsic_lane_by_lane():
    kernel = load_cuda("""#include <cuda_fp16.h>
    __global__ void f(const __half2* a, const __half2* b, float* out) {
      __half2 p = a[0], q = b[0];
      float2 s = __half22float2(__hadd2(p, q));
      float2 d = __half22float2(p - q);
      float2 m = __half22float2(__hmin2(p, q));
      float2 r = __half22float2(__lowhigh2highlow(p));
      out[0] = s.x; out[1] = s.y; out[2] = d.x; out[3] = d.y;
      out[4] = m.x; out[5] = m.y; out[6] = r.x; out[7] = r.y;
      out[8] = __low2float(__floats2half2_rn(0.25f, 8.0f));
      out[9] = __high2float(__half2half2(__float2half(3.0f)));
      out[10] = __half2float(__hfma(__low2half(p), __high2half(q), __float2half(1.0f))); }""",
                       "h.cu", launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    got = run_kernel(kernel, {"a": np.array([1.5, -2.0], np.float16),
                              "b": np.array([0.5, 4.0], np.float16),
                              "out": np.zeros(11, np.float32)}, {})["out"]
    assert got.tolist() == [2.0, 2.0, 1.0, -6.0, 0.5, -2.0, -2.0, 1.5, 0.25, 3.0, 7.0]


def test_a_half2_intrinsic_given_the_wrong_type_is_a_located_error():
    with pytest.raises(KirError, match="'__hadd2' takes a __half2, not f32x2") as info:
        load_cuda("""#include <cuda_fp16.h>
    __global__ void f(float2* a, __half2* y) { y[0] = __hadd2(a[0], y[0]); }""", "h.cu")
    assert info.value.loc.line == 2


@pytest.mark.parametrize("target", TARGETS)
def test_bias_gelu_on_bf16_pairs_matches_numpy(target):
    """``__nv_bfloat162``: cuda_bf16.h's overloaded arithmetic and its bfloat16-named
    conversions, rounded to bf16 where the kernel rounds (the reference mirrors them)."""
    check_everywhere(BF16_PAIRS, target, [{}, {"R": 3, "C": 7}], seed=7)


def test_a_bf16_pair_given_to_a_half_conversion_is_a_located_error():
    with pytest.raises(KirError, match="'__half22float2' takes a __half2, not bf16x2") as info:
        load_cuda("""#include <cuda_bf16.h>
    __global__ void f(const __nv_bfloat162* a, float2* y) { y[0] = __half22float2(a[0]); }""",
                  "b.cu")
    assert info.value.loc.line == 2


COMPARES = """\
#include <cuda_fp16.h>
__global__ void k(const __half* a, const __half* b, int* out) {
    int i = threadIdx.x;
    __half x = a[i], y = b[i];
    out[i] = __heq(x, y) | __hne(x, y) << 1 | __hlt(x, y) << 2 | __hle(x, y) << 3
           | __hgt(x, y) << 4 | __hge(x, y) << 5 | __hequ(x, y) << 6 | __hneu(x, y) << 7
           | __hltu(x, y) << 8 | __hleu(x, y) << 9 | __hgtu(x, y) << 10 | __hgeu(x, y) << 11
           | (int)(__half_as_ushort(x) == __half_as_ushort(__ushort_as_half(
                 __half_as_ushort(x)))) << 12;
}
"""


def test_half_comparisons_ordered_and_unordered_with_nan():
    kernel = load_cuda(COMPARES, "c.cu", launch=Launch(("1", "1", "1"), (5, 1, 1), 0))
    nan = np.float16("nan")
    a = np.array([1, 2, 3, nan, 1], np.float16)
    b = np.array([2, 2, 1, 1, nan], np.float16)
    out = run_kernel(kernel, {"a": a, "b": b, "out": np.zeros(5, np.int32)}, {})["out"]
    for k in range(5):
        x, y = float(a[k]), float(b[k])
        either = np.isnan(x) or np.isnan(y)
        want = [x == y, x != y and not either, x < y, x <= y, x > y, x >= y,
                x == y or either, x != y, x < y or either, x <= y or either,
                x > y or either, x >= y or either, True]
        assert out[k] == sum(int(w) << j for j, w in enumerate(want)), k
