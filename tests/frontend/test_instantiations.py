"""Template arguments a file gives its own kernel (``kir.frontends.cuda.instantiations``): an
explicit instantiation or a launch in host code binds what the spec leaves out (a spec's
value wins); type arguments may name the file's own function objects; ``true``/``false``
defaults; the round-to-nearest conversion intrinsics."""

from __future__ import annotations

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda

from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import Launch

LAUNCH = Launch(("1", "1", "1"), (8, 1, 1), 0)

SCALE = """
template <typename T, int FACTOR, bool NEGATE = false>
__global__ void scale(const T* x, T* y) {
    T v = x[threadIdx.x] * (T)FACTOR;
    y[threadIdx.x] = NEGATE ? -v : v;
}
"""


def _run(kernel, x):
    return run_kernel(kernel, {"x": x, "y": np.zeros_like(x)}, {})["y"]


def test_explicit_instantiation_binds_the_template():
    k = load_cuda(SCALE + "template __global__ void scale<float, 3, true>(const float*, float*);",
                  "s.cu", launch=LAUNCH)
    assert str(k.params[0].type).startswith("f32")
    np.testing.assert_array_equal(_run(k, np.arange(8, dtype=np.float32)),
                                  -3 * np.arange(8, dtype=np.float32))


def test_a_launch_in_host_code_binds_it_too():
    host = """
    void run(const float* x, float* y) { scale<float, 2><<<1, 8>>>(x, y); }"""
    k = load_cuda(SCALE + host, "s.cu", launch=LAUNCH)
    np.testing.assert_array_equal(_run(k, np.ones(8, np.float32)), np.full(8, 2.0))


def test_the_first_instantiation_and_the_spec_win():
    two = SCALE + """
    template __global__ void scale<float, 5>(const float*, float*);
    template __global__ void scale<double, 7>(const double*, double*);"""
    k = load_cuda(two, "s.cu", launch=LAUNCH)
    np.testing.assert_array_equal(_run(k, np.ones(8, np.float32)), np.full(8, 5.0))
    given = load_cuda(two, "s.cu", launch=LAUNCH, template_values={"FACTOR": 11})
    np.testing.assert_array_equal(_run(given, np.ones(8, np.float32)), np.full(8, 11.0))


def test_macro_instantiations_per_dtype():
    macro = SCALE + """
    #define INSTANTIATE(T, F) template __global__ void scale<T, F>(const T*, T*);
    INSTANTIATE(float, 4)"""
    k = load_cuda(macro, "s.cu", launch=LAUNCH)
    np.testing.assert_array_equal(_run(k, np.ones(8, np.float32)), np.full(8, 4.0))


def test_a_function_object_named_by_the_instantiation():
    src = """
    struct LeakyRelu { float slope; __device__ float operator()(float v) const {
        return v > 0.f ? v : v * slope; } };
    template <typename Act>
    __global__ void act(const float* x, float* y, Act f) { y[threadIdx.x] = f(x[threadIdx.x]); }
    template __global__ void act<LeakyRelu>(const float*, float*, LeakyRelu);"""
    k = load_cuda(src, "a.cu", launch=LAUNCH)
    x = np.linspace(-2, 2, 8).astype(np.float32)
    got = run_kernel(k, {"x": x, "y": np.zeros(8, np.float32), "f_slope": np.float32(0.5)},
                     {})["y"]
    np.testing.assert_allclose(got, np.where(x > 0, x, 0.5 * x))


def test_without_an_instantiation_the_error_names_the_parameter():
    with pytest.raises(KirError, match="missing value for template parameter 'FACTOR'"):
        load_cuda(SCALE, "s.cu", launch=LAUNCH, template_values={"T": "f32"})


def test_bool_defaults_and_round_to_nearest_conversions():
    src = """#include <cuda_bf16.h>
    template <bool CLAMP = true>
    __global__ void cvt(const float* x, __nv_bfloat16* y, float* z) {
        float v = CLAMP ? fminf(x[threadIdx.x], 1.0f) : x[threadIdx.x];
        y[threadIdx.x] = __float2bfloat16_rn(v);
        z[threadIdx.x] = __int2half_rn(__half2int_rz(__float2half(v * 3.7f)));
    }"""
    k = load_cuda(src, "c.cu", launch=LAUNCH)
    x = np.linspace(-3, 3, 8).astype(np.float32)
    out = run_kernel(k, {"x": x, "y": np.zeros(8, np.float32), "z": np.zeros(8, np.float32)}, {})
    v = np.minimum(x, 1.0)
    np.testing.assert_allclose(out["y"], v, rtol=1e-2)
    np.testing.assert_array_equal(out["z"], np.trunc((v * np.float32(3.7)).astype(np.float16)))


def test_coverage_uses_the_files_instantiation_not_stand_ins(tmp_path):
    """benchmarks/frontend_coverage.py lowers a kernel without a spec with stand-ins for its
    template arguments; those the file instantiates keep the file's values (a stand-in type
    for a function object is not callable)."""
    from kir.driver.coverage import lower_one

    path = tmp_path / "act.cu"
    path.write_text("""
    struct Twice { __device__ float operator()(float v) const { return 2.f * v; } };
    template <typename Act, int N>
    __global__ void act(const float* x, float* y, Act f) { y[threadIdx.x] = f(x[threadIdx.x]) + N; }
    template __global__ void act<Twice, 3>(const float*, float*, Twice);
    """)
    outcome = lower_one(path, "act", None)
    assert outcome.error is None, outcome.error
    assert outcome.assumed == ""


def test_enumerators_as_template_arguments():
    """An instantiation's value argument that only the file's scope gives (an enumerator of
    an enum class, a plain enum's constant) is read there."""
    src = """
    enum class Act : int { None = 0, Relu = 1 };
    enum Mode { MODE_SUM = 0, MODE_MAX = 1 };
    template <Act A, Mode M>
    __global__ void act(const float* x, float* y) {
        float v = x[threadIdx.x];
        if constexpr (A == Act::Relu) v = v > 0.f ? v : 0.f;
        y[threadIdx.x] = M == MODE_MAX ? v * 10.f : v;
    }
    template __global__ void act<Act::Relu, MODE_MAX>(const float*, float*);"""
    k = load_cuda(src, "e.cu", launch=LAUNCH)
    x = np.linspace(-1, 1, 8).astype(np.float32)
    np.testing.assert_allclose(_run(k, x), np.maximum(x, 0) * 10, rtol=1e-6)


def test_launch_arguments_named_by_host_constants():
    """``k<BM, TM><<<...>>>`` where the launcher declares ``constexpr int BM = ...``: the
    host variables' values (siboehm's GEMM launchers, vLLM's ``HEAD_SIZE``)."""
    host = """
    void launch(const float* x, float* y) {
        constexpr int BASE = 3;
        const unsigned int FACTOR = BASE * 2 + 1;
        scale<float, FACTOR><<<1, 8>>>(x, y);
    }"""
    k = load_cuda(SCALE + host, "s.cu", launch=LAUNCH)
    np.testing.assert_array_equal(_run(k, np.ones(8, np.float32)), np.full(8, 7.0))


def test_a_launch_inside_a_host_template_takes_its_instantiation():
    """``template <typename T> void invoke(...) { k<T, 4><<<...>>>(...); }`` instantiated
    once in the file (a call with explicit arguments, or an explicit instantiation), as
    FasterTransformer's ``invokeGeneralLayerNorm<T>`` is."""
    host = """
    template <typename T, int F>
    void invoke(const T* x, T* y) { scale<T, F, true><<<1, 8>>>(x, y); }
    template void invoke<double, 6>(const double*, double*);"""
    k = load_cuda(SCALE + host, "s.cu", launch=LAUNCH)
    assert str(k.params[0].type).startswith("f64")
    np.testing.assert_array_equal(_run(k, np.ones(8, np.float64)), np.full(8, -6.0))


def test_the_original_kernel_gets_the_files_template_values(tmp_path):
    """The original kernel on the emulator is built with the values the frontend read from
    the file (it was built with C++'s default for a defaulted enumerator, and crashed)."""
    from kir.backends.emulate import emulator_available
    from kir.driver.load import load_kernel
    from kir.driver.runners import check_on_target

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    (tmp_path / "red.cu").write_text("""
enum class Reduction { None = 0, Sum = 1 };
template <typename T, Reduction R = Reduction::None>
__global__ void loss(const T* x, T* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if constexpr (R == Reduction::Sum) atomicAdd(out, x[i]);
    else out[i] = x[i];
}
void run(const float* x, float* out, int n) {
    loss<float, Reduction::Sum><<<(n + 127) / 128, 128>>>(x, out, n);
}
""")
    (tmp_path / "red.kir.toml").write_text("""
kernel = "loss"
sizes = { n = 1000 }
launch = { grid = ["ceil(n / 128)"], block = [128] }
[args]
x = { dtype = "f32", shape = ["n"] }
out = { dtype = "f32", shape = [1], role = "out", init = 0 }
n = { value = "n", dtype = "i32" }
""")
    outcome = check_on_target(load_kernel(tmp_path / "red.cu"), "emulate-original", seed=1)
    assert outcome.result.ok, outcome.result.describe()
