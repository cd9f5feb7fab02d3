"""``__device__`` functions returning pointers, and data-free structs converting to a pointer
(``SharedMemory<T>()``, how templated CUDA code reaches dynamic shared memory as ``T*``): the
conversion operator is inlined like a function returning a pointer, and a dynamic shared
array declared as raw memory of another type of the same size takes the cast's type."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.backends.emulate import emulator_available
from kir.frontends.cuda import load_cuda

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import UnsupportedError
from kir.interp.run import run_kernel

REDUCE = Path(__file__).parent / "data" / "shared_view_reduce.cu"
VIEW = """
template <class T> struct Pool {
  __device__ inline operator T*() { extern __shared__ int raw[]; return (T*)raw; }
  __device__ inline operator const T*() const { extern __shared__ int raw[]; return (T*)raw; }
};
"""


@pytest.mark.parametrize("target", ["interp", "emulate-cuda", "emulate-metal",
                                    "emulate-original"])
def test_a_samples_style_reduction_through_a_shared_memory_struct(target):
    """Both instances of the bool template (one chunk a step, or two), and ragged n."""
    if target != "interp" and not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    for sizes in ({}, {"POW2": 2}, {"n": 3001}):
        outcome = check_on_target(load_kernel(REDUCE, sizes=sizes), target, seed=4)
        assert outcome.result.ok, (sizes, outcome.result.describe())


def test_functions_return_pointers_into_one_buffer_each():
    kernel = load_cuda("""
    __device__ float* row_of(float* base, int r, int ld) { return base + r * ld; }
    __device__ const float* pick(const float* a, int i) { if (i > 2) return a + 1; return a; }
    __global__ void k(float* y, const float* x) {
        float* r = row_of(y, 1, 4);
        r[2] = pick(x, 3)[0] + pick(x, 0)[0];
    }""", "p.cu")
    out = run_kernel(kernel, {"y": np.zeros(8, np.float32),
                              "x": np.array([1, 2, 3], np.float32)}, {})
    np.testing.assert_array_equal(out["y"], [0, 0, 0, 0, 0, 0, 3, 0])
    with pytest.raises(UnsupportedError, match="two buffers"):
        load_cuda("""
        __device__ float* either(float* a, float* b, int i) { if (i) return a; return b; }
        __global__ void k(float* y, float* z) { either(y, z, 1)[0] = 1.0f; }""", "p.cu")


def test_the_pool_struct_gives_the_dynamic_shared_array_as_t_each_time():
    kernel = load_cuda(VIEW + """
    __global__ void k(float* y) {
        float* s = Pool<float>();
        s[threadIdx.x] = (float)threadIdx.x;
        __syncthreads();
        const float* t = Pool<float>();
        y[threadIdx.x] = t[3 - threadIdx.x];
    }""", "v.cu", launch=None)
    shared = [a for a in kernel.body.walk() if type(a).__name__ == "Alloc"]
    assert [(str(a.elem), a.dynamic) for a in shared] == [("f32", True)]


def test_what_the_pool_struct_cannot_be_is_refused():
    with pytest.raises(UnsupportedError, match="used as|reinterpreting"):
        load_cuda(VIEW + """
        __global__ void k(float* y) {
            extern __shared__ int raw[];
            raw[0] = 1;
            float* s = Pool<float>();
            y[0] = s[0];
        }""", "v.cu")
    with pytest.raises(UnsupportedError, match="used as a pointer"):
        load_cuda("""
        template <class T> struct Holder { int n;
          __device__ operator T*() { extern __shared__ int raw[]; return (T*)raw; } };
        __global__ void k(float* y) { float* s = Holder<float>(); y[0] = s[0]; }""", "v.cu")


SAMPLES_DOUBLE = Path(__file__).parent / "data" / "reduce_shared_double.cu"


@pytest.mark.parametrize("target", ["interp", "emulate-cuda", "emulate-original"])
def test_a_pool_declared_int_cast_to_double(target):
    """The samples' ``SharedMemory<T>`` declares the pool as ``int`` and casts it to ``T*``:
    for ``double``, an element of another size, from the pool's start (it was refused: "a f64
    pointer into i32 buffer"); double outputs run on the CUDA emulator too (a KeyError). Metal
    has no double: not a target here."""
    from tests.frontend.everywhere import check_everywhere

    check_everywhere(SAMPLES_DOUBLE, target, [{}, {"n": 300}], seed=9)
