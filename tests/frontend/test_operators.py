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


HELPER_MATH = """\
inline __host__ __device__ float3 make_float3(float4 a) { return make_float3(a.x, a.y, a.z); }
inline __host__ __device__ float3 operator+(float3 a, float3 b) {
    return make_float3(a.x + b.x, a.y + b.y, a.z + b.z);
}
inline __host__ __device__ float3 fminf(float3 a, float3 b) {
    return make_float3(fminf(a.x, b.x), fminf(a.y, b.y), fminf(a.z, b.z));
}
__global__ void k(const float4* pos, float* out, const float* s) {
    int i = threadIdx.x;
    float3 q = make_float3(pos[i]) + make_float3(s[i], 1.0f, 2.0f);
    float3 m = fminf(q, make_float3(fminf(s[i], 0.5f), 0.0f, 9.0f));
    out[3 * i] = m.x; out[3 * i + 1] = m.y; out[3 * i + 2] = m.z;
}
"""


def test_a_files_overloads_of_builtins_leave_the_others_to_cuda():
    # helper_math.h overloads make_float3 and fminf: make_float3(x, y, z) and fminf(a, b)
    # on floats are still CUDA's (they were "no overload takes 3 arguments")
    kernel = load_cuda(HELPER_MATH, "hm.cu", launch=Launch(("1", "1", "1"), (8, 1, 1), 0))
    rng = np.random.default_rng(0)
    pos = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
    s = rng.uniform(-1, 1, 8).astype(np.float32)
    out = run_kernel(kernel, {"pos": pos.ravel(), "out": np.zeros(24, np.float32), "s": s},
                     {})["out"].reshape(8, 3)
    q = pos[:, :3] + np.stack([s, np.ones(8), 2 * np.ones(8)], axis=1)
    m = np.minimum(q, np.stack([np.minimum(s, 0.5), np.zeros(8), 9 * np.ones(8)], axis=1))
    assert np.allclose(out, m.astype(np.float32), rtol=0, atol=1e-6)


PACKED = """\
template <typename T, int N>
struct PackedVec {
    T v[N];
    __device__ PackedVec& operator+=(const PackedVec& other) {
        for (int k = 0; k < N; ++k) v[k] += other.v[k];
        return *this;
    }
    __device__ PackedVec& operator*=(const PackedVec& other) {
        for (int k = 0; k < N; ++k) v[k] *= other.v[k];
        return *this;
    }
    __device__ PackedVec& operator*=(const float scale) {
        for (int k = 0; k < N; ++k) v[k] = (T)((float)v[k] * scale);
        return *this;
    }
};
__global__ void k(const float* x, const float* w, float* out) {
    PackedVec<float, 4> a, b;
    for (int k = 0; k < 4; ++k) { a.v[k] = x[4 * threadIdx.x + k]; b.v[k] = w[k]; }
    a += b;
    a *= 0.5f;
    a *= b;
    for (int k = 0; k < 4; ++k) out[4 * threadIdx.x + k] = a.v[k];
}
"""


def test_member_operators_of_a_struct_template_overloaded_by_argument_type():
    # vLLM's PackedVec: operator*= taking a PackedVec and one taking a float; the first
    # overload was taken for both ("argument for 'other' must be a struct PackedVec")
    kernel = load_cuda(PACKED, "p.cu", launch=Launch(("1", "1", "1"), (4, 1, 1), 0))
    x = np.arange(16, dtype=np.float32)
    w = np.array([1, 2, 3, 4], np.float32)
    out = run_kernel(kernel, {"x": x, "w": w, "out": np.zeros(16, np.float32)}, {})["out"]
    assert (out == ((x.reshape(4, 4) + w) * 0.5 * w).ravel()).all()
