"""Explicit specializations of function templates (``template <> __global__ void k(half*
...)``, ``template <> __device__ half2 gelu(half2)``), chosen for the template arguments
they specialize, and vector types as template arguments (``k<half2>``: T is the vector),
as FasterTransformer-style kernels write them."""

from __future__ import annotations

import numpy as np
from kir.frontends.cuda import list_kernels, load_cuda

from kir.interp import run_kernel
from kir.ir import Launch

LAUNCH = Launch(("1", "1", "1"), (8, 1, 1), 0)

KERNELS = """#include <cuda_fp16.h>
template <typename T>
__device__ T twice(T x) { return x + x; }

template <>
__device__ half2 twice(half2 x) { return __hmul2(x, __float2half2_rn(3.0f)); }

template <typename T>
__global__ void bump(T* out, const T* in) {
    out[threadIdx.x] = twice(in[threadIdx.x]) + in[threadIdx.x];
}

template <>
__global__ void bump(half* out, const half* in) {
    out[threadIdx.x] = in[threadIdx.x] - (half)1.0f;
}
"""


def _run(kernel, x):
    return run_kernel(kernel, {"in": x, "out": np.zeros_like(x)}, {})["out"]


def test_one_name_for_a_template_and_its_specialization():
    assert list_kernels(KERNELS, "s.cu") == ["bump"]


def test_the_primary_for_other_types():
    k = load_cuda(KERNELS, "s.cu", launch=LAUNCH, template_values={"T": "f32"})
    np.testing.assert_array_equal(_run(k, np.arange(8, dtype=np.float32)),
                                  3 * np.arange(8, dtype=np.float32))


def test_the_global_specialization_for_its_types():
    k = load_cuda(KERNELS, "s.cu", launch=LAUNCH, template_values={"T": "f16"})
    x = np.arange(8, dtype=np.float16)
    np.testing.assert_array_equal(_run(k, x), x - 1)


def test_a_vector_template_argument_and_the_device_specialization():
    """``bump<half2>`` from the file's launch: T is half2 (not its elements' dtype), and
    ``twice(half2)`` is the specialization (3x), not the primary (2x)."""
    source = KERNELS + """
void run(half2* out, const half2* in) { bump<half2><<<1, 4>>>(out, in); }
"""
    k = load_cuda(source, "s.cu", launch=Launch(("1", "1", "1"), (4, 1, 1), 0))
    assert str(k.params[0].type).startswith("f16")
    x = np.arange(8, dtype=np.float16)
    np.testing.assert_array_equal(_run(k, x), 4 * x)
