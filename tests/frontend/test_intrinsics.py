"""C math functions (tan, asin, acos, atan, atan2, log10, fmod, copysign), the float tests
isnan/isinf, CUDA's bit intrinsics (__popc, __clz, __ffs and their ll forms), bit views
(__int_as_float ...), rounding conversions and block votes (__syncthreads_count/_or/_and):
on every target against numpy, and the edge values one by one on the interpreter."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.interp import run_kernel
from kir.ir import Launch

MATH_BITS = Path(__file__).parent / "data" / "math_bits.cu"
FLOAT_BITS = Path(__file__).parent / "data" / "float_bits.cu"
BLOCK_VOTES = Path(__file__).parent / "data" / "block_votes.cu"
BIT_ATOMICS = Path(__file__).parent / "data" / "bit_atomics.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_math_and_bit_intrinsics_on_every_target(target):
    check_everywhere(MATH_BITS, target, [{}, {"N": 96}], seed=12)


def test_bit_intrinsics_at_their_edges():
    kernel = load_cuda("""__global__ void f(const unsigned* u, const unsigned long long* w,
                                             int* y) {
      for (int i = 0; i < 4; ++i) {
        y[6 * i] = __popc(u[i]); y[6 * i + 1] = __clz((int)u[i]); y[6 * i + 2] = __ffs((int)u[i]);
        y[6 * i + 3] = __popcll(w[i]); y[6 * i + 4] = __clzll((long long)w[i]);
        y[6 * i + 5] = __ffsll((long long)w[i]); } }""", "b.cu",
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    u = np.array([0, 1, 0x80000000, 12], np.uint32)
    w = np.array([0, 1 << 40, (1 << 64) - 1, 12], np.uint64)
    got = run_kernel(kernel, {"u": u, "w": w, "y": np.zeros(24, np.int32)}, {})["y"]
    assert got.reshape(4, 6).tolist() == [[0, 32, 0, 0, 64, 0], [1, 31, 1, 1, 23, 41],
                                          [1, 0, 32, 64, 0, 1], [2, 28, 3, 2, 60, 3]]


def test_float_tests_and_math_functions_at_their_edges():
    kernel = load_cuda("""__global__ void f(const float* x, float* y) {
      for (int i = 0; i < 3; ++i) { y[3 * i] = isnan(x[i]); y[3 * i + 1] = isinf(x[i]);
                                    y[3 * i + 2] = copysignf(2.0f, x[i]); } }""", "m.cu",
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    x = np.array([np.nan, -np.inf, -0.0], np.float32)
    got = run_kernel(kernel, {"x": x, "y": np.zeros(9, np.float32)}, {})["y"]
    assert got[[0, 1, 3, 4, 6, 7]].tolist() == [1, 0, 0, 1, 0, 0]
    assert math.copysign(1.0, got[8]) == -1.0 and got[5] == -2.0


def test_rounding_conversions_and_rounded_arithmetic():
    kernel = load_cuda("""__global__ void f(const float* x, int* r, float* y) {
      for (int i = 0; i < 4; ++i) {
        r[4 * i] = __float2int_rn(x[i]); r[4 * i + 1] = __float2int_rd(x[i]);
        r[4 * i + 2] = __float2int_ru(x[i]); r[4 * i + 3] = (int)__float2ll_rn(x[i] * 2.0f);
        y[3 * i] = __fmul_rn(x[i], 2.0f) + __fadd_rn(x[i], 1.0f);
        y[3 * i + 1] = __frcp_rn(x[i]); y[3 * i + 2] = __saturatef(x[i]); } }""", "r.cu",
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    x = np.array([2.5, -2.5, 0.25, 3.5], np.float32)
    got = run_kernel(kernel, {"x": x, "r": np.zeros(16, np.int32),
                              "y": np.zeros(12, np.float32)}, {})
    assert got["r"].reshape(4, 4).tolist() == [[2, 2, 3, 5], [-2, -3, -2, -5], [0, 0, 1, 0],
                                               [4, 3, 4, 7]]
    assert got["y"].reshape(4, 3).tolist() == [[8.5, 0.4000000059604645, 1.0],
                                               [-6.5, -0.4000000059604645, 0.0],
                                               [1.75, 4.0, 0.25], [11.5, 0.2857142984867096,
                                                                   1.0]]


def test_a_constants_bits_read_as_another_type():
    kernel = load_cuda("""__global__ void f(float* y, int* z) {
      y[0] = __int_as_float(0xff800000); y[1] = __uint_as_float(0x3f800000u);
      z[0] = __float_as_int(1.0f); z[1] = __float_as_uint(-0.0f) >> 31; }""", "b.cu",
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    got = run_kernel(kernel, {"y": np.zeros(2, np.float32), "z": np.zeros(2, np.int32)}, {})
    assert got["y"].tolist() == [-np.inf, 1.0] and got["z"].tolist() == [0x3F800000, 1]


@pytest.mark.parametrize("target", TARGETS)
def test_run_time_bit_views_on_every_target(target):
    check_everywhere(FLOAT_BITS, target, [{}, {"N": 77}], seed=13)


def test_a_bit_view_between_types_of_two_widths_is_refused_by_the_verifier():
    from kir.ir import Call, Const
    from kir.ir.types import F32, F64, I32
    from kir.ir.verify import _expr_problem

    assert _expr_problem(Call("bitcast", (Const(1.0, F64),), F32), {}, {})[0] \
        == "bitcast from f64 to f32: two scalars of one width"
    assert _expr_problem(Call("bitcast", (Const(1, I32),), F32), {}, {}) is None


@pytest.mark.parametrize("target", TARGETS)
def test_block_votes_count_or_and_on_every_target(target):
    check_everywhere(BLOCK_VOTES, target, [{}, {"N": 77}], seed=14)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("spec", ["bit_atomics.kir.toml", "bit_atomics_clear.kir.toml"])
def test_bitwise_atomics_on_every_target(target, spec):
    """atomicOr / atomicXor from zero, atomicAnd from all bits set (MLX gives every output
    of a kernel with atomics one initial value)."""
    check_everywhere(BIT_ATOMICS, target, [{}, {"N": 37}], seed=13,
                     spec=BIT_ATOMICS.parent / spec)


def test_a_bitwise_atomic_on_floats_is_a_located_error():
    from kir.errors import KirError

    with pytest.raises(KirError, match="atomic or on a f32 buffer") as info:
        load_cuda("__global__ void f(float* y) {\n  atomicOr(&y[0], 1.0f); }", "a.cu")
    assert info.value.loc.line == 2
