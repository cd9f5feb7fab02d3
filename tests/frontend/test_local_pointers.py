"""The address of a local passed to a helper that writes its outputs through it
(``rope_yarn(theta, ..., &cos_theta, &sin_theta)``, ``bump(&count)``), as ggml and the
vendor samples write them: ``*p`` and ``p[0]`` name the caller's local; indexing past it is
refused where written. Unsized arrays with an initializer take its count."""

from __future__ import annotations

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda

from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import Launch

LAUNCH = Launch(("1", "1", "1"), (8, 1, 1), 0)

SOURCE = """
__constant__ float c_gain[] = {0.5f, 2.0f};
static __device__ void polar(float theta, float r, float* cos_t, float* sin_t) {
    *cos_t = cosf(theta) * r;
    sin_t[0] = sinf(theta) * r;
}
static __device__ void bump(int* count) { (*count)++; *count += 2; }
__global__ void k(const float* x, float* y) {
    const int weights[] = {3, 4, 5};
    int i = threadIdx.x;
    float c, s;
    polar(x[i], c_gain[1], &c, &s);
    int n = weights[2];
    bump(&n);
    y[i] = c * c_gain[0] + s + n;
}
"""


def test_helpers_write_the_callers_locals():
    kernel = load_cuda(SOURCE, "p.cu", launch=LAUNCH)
    x = np.linspace(-2, 2, 8).astype(np.float32)
    out = run_kernel(kernel, {"x": x, "y": np.zeros(8, np.float32)}, {})["y"]
    np.testing.assert_allclose(out, np.cos(x) * 2 * 0.5 + np.sin(x) * 2 + 8, rtol=1e-6)


def test_indexing_past_a_local_is_refused():
    source = """static __device__ void two(float* o) { o[0] = 1.0f; o[1] = 2.0f; }
__global__ void k(float* y) { float v; two(&v); y[0] = v; }
"""
    with pytest.raises(KirError, match="indexed past it") as info:
        load_cuda(source, "q.cu", launch=LAUNCH)
    assert info.value.loc.line == 1


CHUNKS = """\
template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedArray { T data[N]; };
__global__ void rows(const float* __restrict__ x, float* __restrict__ out) {
    using AccessType = AlignedArray<float, 4>;
    float row_chunk[8];
    AccessType* row_chunk_vec_ptr = reinterpret_cast<AccessType*>(&row_chunk);
    const AccessType* src = reinterpret_cast<const AccessType*>(x + threadIdx.x * 8);
    for (int ii = 0; ii < 2; ++ii) row_chunk_vec_ptr[ii] = src[ii];
    float s = 0.f;
    for (int i = 0; i < 8; ++i) s += row_chunk[i] * (i + 1);
    out[threadIdx.x] = s;
}
"""


def test_the_address_of_a_local_array_cast_to_packs_of_it():
    # vLLM's top-k gating softmax loads a row chunk as AlignedArray packs through &row_chunk
    kernel = load_cuda(CHUNKS, "rows.cu", launch=LAUNCH)
    x = np.arange(64, dtype=np.float32)
    out = run_kernel(kernel, {"x": x, "out": np.zeros(8, np.float32)}, {})["out"]
    assert (out == x.reshape(8, 8) @ np.arange(1, 9, dtype=np.float32)).all()
