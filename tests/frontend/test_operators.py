"""Operators a file defines for its own types: ``helper_math.h``-style free operators on
``float3`` (``+``, binary and unary ``-``, ``*`` both ways round, ``+=`` through a
reference) and member operators of a struct, inlined where an operand is a vector or a
struct; what C++ would not accept stays refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.backends.emulate import emulator_available
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import KirError, UnsupportedError
from kir.interp import run_kernel
from kir.ir import Launch

PARTICLES = Path(__file__).parent / "data" / "particles.cu"


# (not emulate-original: the emulator's float3 is 16 bytes, so it refuses float3 buffers)
@pytest.mark.parametrize("target", [t for t in TARGETS if t != "emulate-original"])
def test_a_particle_step_through_user_operators_matches_numpy(target):
    check_everywhere(PARTICLES, target, [{}, {"N": 77}], seed=2)


def test_the_original_with_float3_buffers_is_refused_on_the_emulator_not_misread():
    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    with pytest.raises(UnsupportedError, match="'pos' is a float3 buffer"):
        check_on_target(load_kernel(PARTICLES), "emulate-original", seed=2)


def test_inlined_operators_have_c_names():
    names = {getattr(n, "name", "") for n in load_kernel(PARTICLES).kernel.walk()}
    assert any(n.startswith("operator_") for n in names)
    assert not any(set(n) & set("+-*/=<>!&|^~[]()") for n in names)


def run(src: str, args: dict):
    kernel = load_cuda(src, "o.cu", launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    return run_kernel(kernel, args, {})


def test_member_compound_operator_and_comparison():
    got = run("""
    struct Acc { float s; int n;
      __device__ Acc& operator+=(float v) { s += v; n += 1; return *this; }
      __device__ bool operator<(const Acc& o) const { return s < o.s; } };
    __global__ void f(const float* x, float* y) {
      Acc a{0.0f, 0}, b{100.0f, 0};
      for (int i = 0; i < 4; ++i) a += x[i];
      y[0] = a.s; y[1] = a.n; y[2] = (a < b) ? 1.0f : 0.0f; }""",
              {"x": np.array([1, 2, 3, 4], np.float32), "y": np.zeros(3, np.float32)})
    assert got["y"].tolist() == [10.0, 4.0, 1.0]


def test_an_operator_the_types_do_not_fit_is_a_located_error():
    with pytest.raises(KirError, match="cannot convert f32x4 to f32x3") as info:
        load_cuda("""inline __device__ float3 operator*(float3 a, float s) { return make_float3(a.x * s, a.y * s, a.z * s); }
    __global__ void f(float4* y) { y[0] = y[0] * y[1]; }""", "o.cu")
    assert info.value.loc.line == 2


def test_compound_assignment_a_struct_does_not_define_is_refused():
    with pytest.raises(KirError, match="defines no operator\\+=") as info:
        load_cuda("""struct C { float re, im;
      __device__ C operator+(const C& o) const { return {re + o.re, im + o.im}; } };
    __global__ void f(float* y) { C a{1.0f, 2.0f}; a += C{1.0f, 1.0f}; y[0] = a.re; }""", "o.cu")
    assert info.value.loc.line == 3
