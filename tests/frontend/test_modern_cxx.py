"""C++17 in device code: ``if constexpr`` on template values and ``<type_traits>``
queries (``std::is_same_v<T, float>``, ``std::is_same<T, half>::value``), and range-based
``for`` over arrays of known size (by value, by reference, over structs), run on the
interpreter against what C++ computes."""

from __future__ import annotations

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda

from kir.errors import KirError, UnsupportedError
from kir.interp import run_kernel
from kir.ir import Launch

TRAITS = """#include <type_traits>
#include <cuda_fp16.h>
template <typename T> __device__ float widen(T v) {
  if constexpr (std::is_same_v<T, float>) { return v * 1.0f; }
  else if constexpr (std::is_same<T, __half>::value) { return __half2float(v) + 100.0f; }
  else { return static_cast<float>(v) + 1000.0f; } }
__global__ void f(const float* a, const __half* b, const int* c, float* y) {
  y[0] = widen(a[0]); y[1] = widen(b[0]); y[2] = widen(c[0]);
  y[3] = std::is_floating_point_v<__half> + 2 * std::is_integral<unsigned>::value
         + 4 * std::is_signed_v<unsigned> + 8 * std::is_unsigned_v<int>; }"""


def run(src: str, args: dict):
    kernel = load_cuda(src, "m.cu", launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    return run_kernel(kernel, args, {})


def test_type_traits_choose_the_if_constexpr_branch_per_instance():
    got = run(TRAITS, {"a": np.array([2.0], np.float32), "b": np.array([3.0], np.float16),
                       "c": np.array([4], np.int32), "y": np.zeros(4, np.float32)})
    assert got["y"].tolist() == [2.0, 103.0, 1004.0, 3.0]


def test_range_for_by_value_by_reference_and_over_structs():
    got = run("""struct P { float a; int n; };
    __global__ void f(const float* x, float* y) {
      float v[3] = {x[0], x[1], x[2]};
      P ps[2];
      for (auto& e : v) e *= 2.0f;
      for (P& p : ps) { p.a = 1.5f; p.n = 2; }
      float s = 0.0f;
      for (float e : v) { e += 100.0f; s += e; }
      for (const auto& p : ps) s += p.a * p.n;
      y[0] = s; y[1] = v[0]; }""", {"x": np.array([1, 2, 3], np.float32),
                                    "y": np.zeros(2, np.float32)})
    assert got["y"].tolist() == [318.0, 2.0]


def test_range_for_keeps_loop_labels_in_source_order():
    kernel = load_cuda("""__global__ void f(float* y) {
      float v[2] = {1.0f, 2.0f};
      for (float e : v) { for (int k = 0; k < 2; ++k) y[k] += e; } }""", "m.cu")
    loops = [n for n in kernel.walk() if type(n).__name__ == "For"]
    assert [(lp.label, lp.var.startswith("range_i")) for lp in loops] == [("L0", True),
                                                                           ("L1", False)]


@pytest.mark.parametrize("body, message", [
    ("__global__ void f(float* y, int n) { for (float e : y) y[0] = e; }",
     "range-based for over something other than an array"),
    ("template <typename T> __device__ bool same() { return std::is_same_v<T>; }"
     "__global__ void f(float* y) { y[0] = same<float>(); }", "'is_same_v' takes 2 type"),
])
def test_what_kir_cannot_evaluate_is_a_located_error(body, message):
    with pytest.raises((KirError, UnsupportedError), match=message) as info:
        load_cuda(body, "m.cu")
    assert info.value.loc is not None


OVERLOADS = """#include <type_traits>
template <typename T, int width>
__global__ std::enable_if_t<(width > 0)> scale_vec(T* __restrict__ x, const float s, int n) {
  auto* __restrict__ v = reinterpret_cast<float4*>(x);
  for (int i = threadIdx.x; i < n / 4; i += blockDim.x) {
    float4 a = v[i];
    a.x *= s; a.y *= s; a.z *= s; a.w *= s;
    v[i] = a;
  }
}
template <typename T, int width>
__global__ std::enable_if_t<(width == 0)> scale_vec(T* __restrict__ x, const float s, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= s + 1.0f;
}
"""


@pytest.mark.parametrize("width, factor", [(4, 2.0), (0, 3.0)])
def test_kernel_overloads_told_apart_by_enable_if(width, factor):
    # vLLM's fused_add_rms_norm: one kernel name, overloads enabled by the width (SFINAE);
    # the scanner used to miss a kernel whose return type holds parentheses
    kernel = load_cuda(OVERLOADS, "o.cu", template_values={"T": "f32", "width": width},
                       launch=Launch(("1", "1", "1"), (64, 1, 1), 0))
    x = np.arange(256, dtype=np.float32)
    out = run_kernel(kernel, {"x": x.copy(), "s": np.float32(2.0), "n": 256}, {})["x"]
    assert (out == x * factor).all()


def test_auto_pointer_takes_a_pointer_only():
    source = OVERLOADS.replace("auto* __restrict__ v = reinterpret_cast<float4*>(x);",
                               "float4 f; auto* v = &f;")
    with pytest.raises(UnsupportedError, match=r"'auto\* v' initialized from something"):
        load_cuda(source, "o.cu", template_values={"T": "f32", "width": 4},
                  launch=Launch(("1", "1", "1"), (64, 1, 1), 0))


CONDITIONAL = """#include <type_traits>
template <typename T> __device__ T third(T v) {
  // the accumulator wide only for double input; a float accumulator rounds 1/3 to float
  using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
  acc_t a = v;
  return (T)(a / (acc_t)3); }
__global__ void f(const float* a, const double* b, double* y) {
  y[0] = third(b[0]); y[1] = (double)third(a[0]); }"""


def test_conditional_t_picks_the_type_its_constant_names():
    got = run(CONDITIONAL, {"a": np.array([1.0], np.float32), "b": np.array([1.0]),
                            "y": np.zeros(2)})
    assert got["y"][0] == 1.0 / 3.0
    assert got["y"][1] == float(np.float32(1.0) / np.float32(3.0)) != 1.0 / 3.0
    with pytest.raises(KirError, match="condition and two types"):
        run(CONDITIONAL.replace("double, float>", "double>"), {})
