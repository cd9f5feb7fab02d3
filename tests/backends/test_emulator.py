"""The CPU emulator of emitted Metal / CUDA source (kir.backends.emulate)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from kir.backends.emulate import (
    EmulatorError,
    cuda_kernel,
    emulator_available,
    metal_kernel,
    run_original_cuda,
)

AVAILABLE, REASON = emulator_available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"CPU emulator unavailable: {REASON}")

RNG = np.random.default_rng(0)
F32 = np.float32


def test_availability_reports_a_reason() -> None:
    ok, reason = emulator_available()
    assert isinstance(ok, bool) and reason


# ---------------------------------------------------------------- Metal (MLX conventions)

def test_metal_elementwise_with_template_shape_and_scalar_input() -> None:
    kernel = metal_kernel("em_exp", ["scale", "inp"], ["out"], """
        uint elem = thread_position_in_grid.x;
        if (elem >= uint(inp_shape[0])) return;
        T tmp = inp[elem];
        out[elem] = metal::exp(tmp) * scale * K;
    """)
    x = RNG.standard_normal(1000).astype(F32)
    (out,) = kernel(inputs=[2.5, x], template=[("T", np.float32), ("K", 3)], grid=(1000, 1, 1),
                    threadgroup=(256, 1, 1), output_shapes=[x.shape], output_dtypes=[F32])
    np.testing.assert_allclose(out, np.exp(x) * 2.5 * 3, rtol=1e-6)
    generated = kernel.last_source
    assert "template <typename T, int K>" in generated
    assert "const constant float& scale [[buffer(0)]]" in generated
    assert "const device float* inp [[buffer(1)]]" in generated
    assert "const constant int* inp_shape [[buffer(2)]]" in generated
    assert "uint3 thread_position_in_grid [[thread_position_in_grid]]" in generated


METAL_ROW_SUM = """
    threadgroup float partial[256];
    uint t = thread_position_in_threadgroup.x;
    uint row = threadgroup_position_in_grid.y;
    float acc = 0.0f;
    for (uint j = t; j < N; j += 256) acc += x[row * N + j];
    partial[t] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = 128; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (t == 0) out[row] = partial[0];
"""


def test_metal_threadgroup_reduction_with_barriers() -> None:
    kernel = metal_kernel("em_rowsum", ["x"], ["out"], METAL_ROW_SUM)
    x = RNG.standard_normal((8, 1000)).astype(F32)
    (out,) = kernel(inputs=[x], template=[("N", 1000)], grid=(256, 8, 1), threadgroup=(256, 1, 1),
                    output_shapes=[(8,)], output_dtypes=[F32])
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_metal_simd_sum_and_shuffle_xor() -> None:
    kernel = metal_kernel("em_simd", ["x"], ["total", "butterfly", "lane_of"], """
        uint i = thread_position_in_grid.x;
        float v = x[i];
        float s = simd_sum(v);
        float b = v;
        for (ushort m = 16; m > 0; m >>= 1) b += simd_shuffle_xor(b, m);
        total[i] = s;
        butterfly[i] = b;
        lane_of[i] = simd_shuffle_xor(float(thread_index_in_simdgroup), ushort(1));
    """)
    x = RNG.integers(-8, 8, 128).astype(F32)  # integers: every summation order is exact
    total, butterfly, lane_of = kernel(inputs=[x], grid=(128, 1, 1), threadgroup=(64, 1, 1),
                                       output_shapes=[(128,)] * 3, output_dtypes=[F32] * 3)
    expected = np.repeat(x.reshape(4, 32).sum(axis=1), 32)
    np.testing.assert_array_equal(total, expected)
    np.testing.assert_array_equal(butterfly, expected)
    np.testing.assert_array_equal(lane_of, np.arange(128) % 32 ^ 1)


def test_kir_emitted_metal_and_cuda_run_unmodified() -> None:
    emitter = pytest.importorskip("kir.backends.emitter")
    from conftest import block_sum_kernel, block_sum_spec

    kernel, bound = block_sum_kernel(), block_sum_spec().bind({})
    x = RNG.integers(-3, 4, 1000).astype(F32)
    # the kernel adds each value's xor-16 partner before the block sum: every value counts twice
    expected = 2 * np.array([x[b * 256:(b + 1) * 256].sum() for b in range(4)], dtype=F32)
    for target, make in (("metal", metal_kernel), ("cuda", cuda_kernel)):
        emitted = emitter.emit(kernel, bound, target)
        run = make(emitted.name, list(emitted.input_names), list(emitted.output_names),
                   emitted.source, emitted.header)
        inputs = [x if kind == "buffer" else np.array(emitted.scalar(arg), np.int32)
                  for arg, kind in zip(emitted.input_args, emitted.input_kinds)]
        (out,) = run(inputs=inputs, template=list(emitted.template), grid=emitted.grid,
                     threadgroup=emitted.threadgroup, output_shapes=list(emitted.output_shapes),
                     output_dtypes=[F32], init_value=emitted.init_value)
        np.testing.assert_array_equal(out, expected, err_msg=target)


def test_metal_float_atomics_with_atomic_outputs() -> None:
    kernel = metal_kernel("em_atomic", ["x"], ["sum", "peak"], """
        uint i = thread_position_in_grid.x;
        atomic_fetch_add_explicit(&sum[i % 4], x[i], memory_order_relaxed);
        atomic_fetch_max_explicit(&peak[0], x[i], memory_order_relaxed);
    """, atomic_outputs=True)
    x = RNG.integers(0, 100, 512).astype(F32)
    total, peak = kernel(inputs=[x], grid=(512, 1, 1), threadgroup=(128, 1, 1),
                         output_shapes=[(4,), (1,)], output_dtypes=[F32, F32], init_value=0.0)
    np.testing.assert_array_equal(total, x.reshape(-1, 4).sum(axis=0))
    assert peak[0] == x.max()
    assert "device atomic<float>* sum" in kernel.last_source


TILED = """
    // out[i] = sum of the 64-element tile that holds i, read through threadgroup memory
    threadgroup float tile[64];
    uint t = thread_position_in_threadgroup.x;
    uint i = thread_position_in_grid.x;
    tile[t] = x[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = 0.0f;
    for (uint k = 0; k < 64; k++) s += tile[k];
    out[i] = s;
    group_size[i] = float(threads_per_threadgroup.x);
"""


def test_metal_partial_threadgroups_read_poison() -> None:
    kernel = metal_kernel("em_tiled", ["x"], ["out", "group_size"], TILED)
    x = np.ones(256, dtype=F32)
    whole, sizes = kernel(inputs=[x], grid=(128, 1, 1), threadgroup=(64, 1, 1),
                          output_shapes=[(128,)] * 2, output_dtypes=[F32] * 2)
    np.testing.assert_array_equal(whole, np.full(128, 64.0, F32))
    np.testing.assert_array_equal(sizes, 64.0)
    # 100 threads: the second group has 36 threads, tile[36:] is never written (NaN poison)
    ragged, sizes = kernel(inputs=[x], grid=(100, 1, 1), threadgroup=(64, 1, 1),
                           output_shapes=[(128,)] * 2, output_dtypes=[F32] * 2, init_value=-1.0)
    np.testing.assert_array_equal(sizes[:100], [64.0] * 64 + [36.0] * 36)  # the partial group
    np.testing.assert_array_equal(ragged[:64], np.full(64, 64.0, F32))
    assert np.isnan(ragged[64:100]).all()
    np.testing.assert_array_equal(ragged[100:], -1.0)


def test_metal_divergent_barrier_names_kernel_group_and_line() -> None:
    kernel = metal_kernel("em_divergent", ["x"], ["out"], """
        uint t = thread_position_in_threadgroup.x;
        if (t >= 16) return;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        out[t] = x[t];
    """)
    started = time.monotonic()
    with pytest.raises(EmulatorError) as info:
        kernel(inputs=[np.zeros(64, F32)], grid=(64, 1, 1), threadgroup=(32, 1, 1),
               output_shapes=[(64,)], output_dtypes=[F32])
    assert time.monotonic() - started < 5.0  # compile included; detection itself is instant
    error = info.value
    assert error.kind == "barrier"
    assert "em_divergent" in str(error) and "threadgroup (0,0,0)" in str(error)
    assert error.loc is not None and error.loc.line == 4 and error.loc.file == "em_divergent.metal"
    assert "threadgroup_barrier" in str(error)


def test_metal_compile_error_points_at_the_body_line() -> None:
    kernel = metal_kernel("em_typo", ["x"], ["out"], """
        uint i = thread_position_in_grid.x;
        out[i] = x[i] + undefined_name;
    """)
    with pytest.raises(EmulatorError) as info:
        kernel(inputs=[np.zeros(4, F32)], grid=(4, 1, 1), threadgroup=(4, 1, 1),
               output_shapes=[(4,)], output_dtypes=[F32])
    error = info.value
    assert error.kind == "compile"
    assert error.loc is not None and (error.loc.file, error.loc.line) == ("em_typo.metal", 3)
    assert "undefined_name" in str(error)


def test_infinite_loop_times_out_and_the_next_launch_works() -> None:
    kernel = metal_kernel("em_spin", ["x"], ["out"], """
        uint i = thread_position_in_grid.x;
        volatile float v = x[i];
        while (v == v) { }
        out[i] = v;
    """)
    started = time.monotonic()
    with pytest.raises(EmulatorError) as info:
        kernel(inputs=[np.zeros(4, F32)], grid=(4, 1, 1), threadgroup=(4, 1, 1),
               output_shapes=[(4,)], output_dtypes=[F32], timeout=1.0)
    assert info.value.kind == "timeout" and "timed out" in str(info.value)
    assert time.monotonic() - started < 10.0
    test_metal_elementwise_with_template_shape_and_scalar_input()  # a fresh worker takes over


def test_crash_is_an_error_not_a_dead_caller() -> None:
    """Only thread 2 of the second threadgroup faults: the error names that thread."""
    kernel = metal_kernel("em_crash", ["x"], ["out"], """
        uint i = thread_position_in_grid.x;
        device float* bad = (device float*)(uintptr_t)16;
        out[i] = i == 6 ? bad[i * 4096] : 0.0f;
    """)
    with pytest.raises(EmulatorError) as info:
        kernel(inputs=[np.zeros(8, F32)], grid=(8, 1, 1), threadgroup=(4, 1, 1),
               output_shapes=[(8,)], output_dtypes=[F32])
    assert info.value.kind == "crash" and "SIGSEGV" in str(info.value)
    assert "em_crash" in str(info.value)
    assert "threadgroup (1,0,0), thread (2,0,0)" in str(info.value)


# ---------------------------------------------------------------- CUDA (MLX cuda_kernel conventions)

CUDA_ROW_SUM = """
    __shared__ float partial[256];
    extern __shared__ float scratch[];
    int t = threadIdx.x;
    int row = blockIdx.y;
    float acc = 0.0f;
    for (int j = t; j < N; j += blockDim.x) acc += x[row * N + j];
    partial[t] = acc;
    scratch[t] = 1.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    float w = acc;
    for (int m = 16; m > 0; m >>= 1) w += __shfl_xor_sync(0xffffffffu, w, m);
    if (t % 32 == 0) atomicAdd(&warp_total[row], w);
    if (t == 0) { out[row] = partial[0]; ones[row] = scratch[255]; }
"""


def test_cuda_kernel_reduction_shuffles_atomics_and_dynamic_shared() -> None:
    kernel = cuda_kernel("cu_rowsum", ["x"], ["out", "warp_total", "ones"], CUDA_ROW_SUM,
                         shared_memory=256 * 4)
    x = RNG.integers(-4, 5, (4, 700)).astype(F32)
    out, warp_total, ones = kernel(
        inputs=[x], template=[("N", 700)], grid=(256, 4, 1), threadgroup=(256, 1, 1),
        output_shapes=[(4,), (4,), (4,)], output_dtypes=[F32] * 3, init_value=0.0)
    np.testing.assert_array_equal(out, x.sum(axis=1))
    np.testing.assert_array_equal(warp_total, x.sum(axis=1))
    np.testing.assert_array_equal(ones, 1.0)
    assert "__global__ void custom_kernel_cu_rowsum_700(" in kernel.last_source
    assert "constexpr int N = 700;" in kernel.last_source


def test_cuda_kernel_launches_whole_blocks_and_passes_shapes() -> None:
    kernel = cuda_kernel("cu_copy", ["x", "bias"], ["out"], """
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < x_shape[0] * x_shape[1]) out[i] = x[i] + (T)x_ndim + bias[0];
    """)
    x = RNG.standard_normal((10, 7)).astype(F32)
    (out,) = kernel(inputs=[x, np.array(0.5, F32)], template=[("T", np.float32)], grid=(70, 1, 1),
                    threadgroup=(32, 1, 1), output_shapes=[x.shape], output_dtypes=[F32])
    np.testing.assert_allclose(out, (x + 2) + 0.5, rtol=1e-6)
    assert "const __grid_constant__ Shape x_shape" in kernel.last_source
    assert "const float* bias" in kernel.last_source  # 0-d inputs are pointers in MLX's CUDA


def test_cuda_divergent_syncthreads_is_reported() -> None:
    kernel = cuda_kernel("cu_divergent", ["x"], ["out"], """
        int t = threadIdx.x;
        if (t < 8) {
            __syncthreads();
        }
        out[t] = x[t];
    """)
    with pytest.raises(EmulatorError) as info:
        kernel(inputs=[np.zeros(32, F32)], grid=(32, 1, 1), threadgroup=(32, 1, 1),
               output_shapes=[(32,)], output_dtypes=[F32])
    assert info.value.kind == "barrier"
    assert "cu_divergent" in str(info.value) and info.value.loc.line == 4


# ---------------------------------------------------------------- the user's original CUDA

ORIGINAL = r"""
#include <cstdio>
#include <cuda_runtime.h>

#define BLOCK 128

__device__ float square(float v) { return v * v; }

template <int SCALE>
__global__ void sum_squares(const float* __restrict__ x, float* out, int n) {
    __shared__ float part[BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? SCALE * square(x[i]) : 0.0f;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

int main() {
    float *x, *out;
    cudaMalloc(&x, 1000 * sizeof(float));
    cudaMalloc(&out, sizeof(float));
    sum_squares<2><<<(1000 + BLOCK - 1) / BLOCK, BLOCK>>>(x, out, 1000);
    cudaDeviceSynchronize();
    printf("done\n");
    return 0;
}
"""


def test_run_original_cuda_with_host_code_in_the_file() -> None:
    x = RNG.integers(-3, 4, 1000).astype(F32)
    out = np.zeros(1, F32)
    got_x, got_out, got_n = run_original_cuda(ORIGINAL, "sum_squares", [x, out, 1000],
                                              grid=(8,), block=(128,), template_args=[2])
    assert got_n is None
    np.testing.assert_array_equal(got_x, x)
    assert got_out[0] == 2 * np.sum(x * x)
    assert out[0] == 0.0  # the caller's arrays are not written


def test_run_original_cuda_with_a_launch_bounds_macro_and_a_host_instantiation() -> None:
    """ATen's ``C10_LAUNCH_BOUNDS_1(1024) __global__ void k(...)`` (a macro with parentheses
    before ``__global__``) is the kernel, not another one to blank; a host launcher template's
    explicit instantiation goes with the launcher (both failed to compile)."""
    source = ORIGINAL.replace(
        "template <int SCALE>\n__global__ void sum_squares",
        "#define LAUNCH_BOUNDS_1(n) __launch_bounds__((n))\n"
        "template <int SCALE>\nLAUNCH_BOUNDS_1(128) __global__ void sum_squares") + """
template <int S>
void launch_scaled(const float* x, float* out, int n) {
    sum_squares<S><<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, out, n);
}
template void launch_scaled<3>(const float*, float*, int);
"""
    x = RNG.integers(-3, 4, 1000).astype(F32)
    _, got_out, _ = run_original_cuda(source, "sum_squares", [x, np.zeros(1, F32), 1000],
                                      grid=(8,), block=(128,), template_args=[2])
    assert got_out[0] == 2 * np.sum(x * x)


def test_run_original_cuda_beside_another_kernels_explicit_instantiation() -> None:
    """A file instantiating another template kernel (``template __global__ void
    scale<float>(...);``): that kernel's definition is blanked, so is its instantiation
    (which failed to compile: "'scale' is not a function template")."""
    source = ORIGINAL + """
template <typename T>
__global__ void scale(T* y, const T* x, int n) { y[threadIdx.x] = x[threadIdx.x] * (T)2; }
template __global__ void scale<float>(float*, const float*, int);
"""
    x = RNG.integers(-3, 4, 1000).astype(F32)
    _, got_out, _ = run_original_cuda(source, "sum_squares", [x, np.zeros(1, F32), 1000],
                                      grid=(8,), block=(128,), template_args=[2])
    assert got_out[0] == 2 * np.sum(x * x)


def test_a_float_shuffled_from_a_lane_that_returned_is_nan() -> None:
    """Metal's SIMD ops act on the active lanes: lanes 8-31 return, and lanes 0-7 shuffling
    down by 8 read lanes not taking part (undefined): a float is NaN, as kir's interpreter
    reads it, an int the reader's own value. (CUDA's emulation stops at such a shuffle.)"""
    kernel = metal_kernel("em_idle", ["x"], ["out", "iout"], """
        uint i = thread_position_in_grid.x;
        if (thread_index_in_simdgroup >= 8) return;
        out[i] = x[i] + simd_shuffle_down(x[i], ushort(8));
        iout[i] = int(i) + simd_shuffle_down(int(i), ushort(8));
    """)
    x = np.arange(32, dtype=F32)
    out, iout = kernel(inputs=[x], grid=(32, 1, 1), threadgroup=(32, 1, 1),
                       output_shapes=[(32,), (32,)], output_dtypes=[F32, np.int32])
    assert np.isnan(out[:8]).all() and (iout[:8] == 2 * np.arange(8)).all()


def test_run_original_cuda_compile_error_maps_to_the_file() -> None:
    broken = ORIGINAL.replace("v * v", "v * w")
    with pytest.raises(EmulatorError) as info:
        run_original_cuda(broken, "sum_squares", [np.zeros(4, F32), np.zeros(1, F32), 4],
                          grid=(1,), block=(128,), template_args=[2], filename="sq.cu")
    assert info.value.loc is not None and (info.value.loc.file, info.value.loc.line) == ("sq.cu", 7)


# ---------------------------------------------------------------- dialect coverage

def test_metal_dialect_vectors_half_as_type_and_atomic_cas() -> None:
    kernel = metal_kernel("em_dialect", ["x", "h"], ["out", "count"], """
        uint i = thread_position_in_grid.x;
        float4 v = *((const device float4*)(x) + i);
        half hv = h[i];
        float s = metal::precise::sqrt(v.x * v.x) + metal::fast::exp(0.0f) + float(hv);
        float back = as_type<float>(as_type<uint>(s));
        int seen = atomic_load_explicit(&count[0], memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&count[0], &seen, seen + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {}
        atomic_store_explicit(&out[i], back + dot(v, float4(1.0f)) + simd_max(v.w),
                              memory_order_relaxed);
    """, atomic_outputs=True)
    x, h = np.arange(64, dtype=F32), np.arange(16).astype(np.float16)
    out, count = kernel(inputs=[x, h], grid=(16, 1, 1), threadgroup=(16, 1, 1),
                        output_shapes=[(16,), (1,)], output_dtypes=[F32, np.int32], init_value=0)
    v = x.reshape(16, 4)
    np.testing.assert_array_equal(out, v[:, 0] + 1 + h.astype(F32) + v.sum(axis=1) + v[:, 3].max())
    assert count[0] == 16


def test_cuda_dialect_builtins() -> None:
    kernel = cuda_kernel("cu_dialect", ["x"], ["out", "imax"], """
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        float4 v = reinterpret_cast<const float4*>(x)[i];
        __half hv = __float2half(v.x);
        float m = fmaxf(-FLT_MAX, __ldg(&x[4 * i]));
        float e = __expf(0.0f) + (INFINITY > 0.0f ? 1.0f : 0.0f);
        atomicMax(&imax[0], (int)v.w);
        atomicExch(&imax[1], 7);
        float4 w = make_float4(1.f, 2.f, 3.f, 4.f);
        out[i] = __uint_as_float(__float_as_uint(__half2float(hv))) + m + e + w.z;
    """)
    x = np.arange(64, dtype=F32)
    out, imax = kernel(inputs=[x], grid=(16, 1, 1), threadgroup=(16, 1, 1),
                       output_shapes=[(16,), (2,)], output_dtypes=[F32, np.int32], init_value=0)
    np.testing.assert_array_equal(out, x[::4] * 2 + 5)
    np.testing.assert_array_equal(imax, [63, 7])


def test_a_worker_is_retired_after_its_quota_of_kernel_libraries(monkeypatch) -> None:
    """A worker keeps every kernel library it loads mapped; after its quota a fresh one takes
    over (a long suite ran into the map count: "failed to map segment from shared object")."""
    from kir.backends.emulate import worker

    monkeypatch.setattr(worker, "MAX_LIBRARIES_PER_WORKER", 2)
    worker._shutdown()  # (a fresh worker: earlier tests' libraries count against the quota)
    pids = []
    for scale in (2, 3, 4):  # three distinct kernels, three libraries
        run_original_cuda(ORIGINAL, "sum_squares", [np.ones(256, F32), np.zeros(1, F32), 256],
                          grid=(2,), block=(128,), template_args=[scale])
        pids.append(worker._worker.process.pid if worker._worker is not None else None)
    assert pids[0] is not None and pids[1] is None  # retired after its second library
    assert pids[2] is not None and pids[2] != pids[0]


def test_the_failure_path_is_compiled_once_and_linked_into_each_kernel(tmp_path,
                                                                        monkeypatch) -> None:
    """kir_emu_runtime.cpp is compiled into one cached object that every kernel's shared object
    links (not generated again in each kernel); a kernel still reports an out-of-bounds index
    at its line through the handler that object defines, and with it the group's threads."""
    from kir.backends.emulate import toolchain

    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path))
    body = """
        uint t = thread_position_in_threadgroup.x;
        threadgroup float tile[8];
        tile[t] = x[t];
        out[t] = tile[t];
    """
    kernels = [metal_kernel(f"em_linked_{n}", ["x"], ["out"], body) for n in range(2)]
    kernels[0](inputs=[np.ones(8, F32)], grid=(8, 1, 1), threadgroup=(8, 1, 1),
               output_shapes=[(8,)], output_dtypes=[F32])
    with pytest.raises(EmulatorError) as info:
        kernels[1](inputs=[np.ones(16, F32)], grid=(16, 1, 1), threadgroup=(16, 1, 1),
                   output_shapes=[(16,)], output_dtypes=[F32])
    assert "out-of-bounds array access at em_linked_1.metal:4:" in str(info.value)
    assert "index 8 is out of bounds for 'float [8]'" in str(info.value)
    assert "threadgroup (0,0,0)" in str(info.value) and "thread(s)" in str(info.value)
    runtimes = list(tmp_path.glob("runtime-*/kir_emu_runtime.o"))
    assert len(runtimes) == 1
    assert len(list(tmp_path.glob("em_linked_*.so"))) == 2
    assert toolchain.RUNTIME_SOURCE == runtimes[0].name.replace(".o", ".cpp")
