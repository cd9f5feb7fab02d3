"""Shared-memory exchanges that are not races pass the interpreter's race marks
(kir.interp.races) and compute the right values: the synchronization patterns real kernels
use, written in the styles of public code. A false report here would refuse a correct
kernel at the door."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda

from kir.interp import run_kernel
from kir.ir import Launch


def _run(source: str, grid: int, block: int, args: dict, shared_bytes: int = 0) -> dict:
    kernel = load_cuda(source, "legal.cu", launch=Launch((str(grid), "1", "1"),
                                                         (block, 1, 1), shared_bytes))
    return run_kernel(kernel, args)


RNG = np.random.default_rng(7)


def test_ping_pong_tiles_with_one_barrier_an_iteration():
    """Double buffering: tile k+1 is loaded into the other buffer while tile k is read; the
    one barrier an iteration orders both the load before its reads and the reads before
    the buffer's next load, two iterations on."""
    source = """
#define TILE 64
__global__ void running_dot(const float* __restrict__ a, const float* __restrict__ b,
                            float* __restrict__ out, int tiles) {
    __shared__ float buf[2][TILE];
    int t = threadIdx.x;
    buf[0][t] = b[t];
    __syncthreads();
    float acc = 0.0f;
    for (int k = 0; k < tiles; ++k) {
        if (k + 1 < tiles) buf[(k + 1) & 1][t] = b[(k + 1) * TILE + t];
        float partial = 0.0f;
        for (int j = 0; j < TILE; ++j) partial += buf[k & 1][j];
        acc += partial * a[k * TILE + t];
        __syncthreads();
    }
    out[blockIdx.x * TILE + t] = acc;
}
"""
    tiles = 5
    a = RNG.standard_normal(tiles * 64).astype(np.float32)
    b = RNG.standard_normal(tiles * 64).astype(np.float32)
    out = _run(source, 1, 64, {"a": a, "b": b, "out": np.zeros(64, np.float32),
                               "tiles": tiles})["out"]
    want = (b.reshape(tiles, 64).sum(axis=1)[:, None] * a.reshape(tiles, 64)).sum(axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


SCAN = """
__global__ void scan(const int* in, int* out) {
    extern __shared__ int s[];
    unsigned tid = threadIdx.x;
    s[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    for (unsigned offset = 1; offset < blockDim.x; offset <<= 1) {
        int add = tid >= offset ? s[tid - offset] : 0;
        __syncthreads();
        s[tid] += add;
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + tid] = s[tid];
}
"""


def test_hillis_steele_scan_reads_then_writes_between_two_barriers():
    source = SCAN
    x = RNG.integers(0, 9, 2 * 128).astype(np.int32)
    out = _run(source, 2, 128, {"in": x, "out": np.zeros_like(x)}, 128 * 4)["out"]
    np.testing.assert_array_equal(out, np.cumsum(x.reshape(2, 128), axis=1).ravel())


def test_shared_histogram_with_atomics_then_a_barrier():
    source = """
__global__ void histogram(const unsigned char* data, unsigned int* bins, int n) {
    __shared__ unsigned int local[16];
    if (threadIdx.x < 16) local[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i] & 15], 1u);
    __syncthreads();
    if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}
"""
    data = RNG.integers(0, 256, 3000).astype(np.uint8)
    bins = _run(source, 3, 96, {"data": data, "bins": np.zeros(16, np.uint32),
                                "n": 3000})["bins"]
    np.testing.assert_array_equal(bins, np.bincount(data & 15, minlength=16))


# The classic coalesced transpose through a padded tile (TILE_DIM 16, BLOCK_ROWS 4).
TRANSPOSE = (Path(__file__).parent / "spec_init" / "data" / "transpose.cu").read_text()


def test_padded_transpose_tile():
    kernel = load_cuda(TRANSPOSE, "transpose.cu", launch=Launch(("4", "4", "1"), (16, 4, 1), 0))
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    out = run_kernel(kernel, {"idata": x.ravel(), "odata": np.zeros(64 * 64, np.float32)})
    np.testing.assert_array_equal(out["odata"].reshape(64, 64), x.T)


# GPU Gems 3's work-efficient scan: up-sweep and down-sweep over a padded tree, a barrier
# a level, indices through a bank-conflict macro.
BLELLOCH = """
#define NUM_BANKS 32
#define LOG_NUM_BANKS 5
#define CONFLICT_FREE_OFFSET(n) ((n) >> LOG_NUM_BANKS)

__global__ void prescan(float *g_odata, const float *g_idata, int n) {
    extern __shared__ float temp[];
    int thid = threadIdx.x;
    int offset = 1;
    int ai = thid;
    int bi = thid + (n / 2);
    int bankOffsetA = CONFLICT_FREE_OFFSET(ai);
    int bankOffsetB = CONFLICT_FREE_OFFSET(bi);
    temp[ai + bankOffsetA] = g_idata[blockIdx.x * n + ai];
    temp[bi + bankOffsetB] = g_idata[blockIdx.x * n + bi];
    for (int d = n >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (thid < d) {
            int a = offset * (2 * thid + 1) - 1;
            int b = offset * (2 * thid + 2) - 1;
            a += CONFLICT_FREE_OFFSET(a);
            b += CONFLICT_FREE_OFFSET(b);
            temp[b] += temp[a];
        }
        offset *= 2;
    }
    if (thid == 0) { temp[n - 1 + CONFLICT_FREE_OFFSET(n - 1)] = 0; }
    for (int d = 1; d < n; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (thid < d) {
            int a = offset * (2 * thid + 1) - 1;
            int b = offset * (2 * thid + 2) - 1;
            a += CONFLICT_FREE_OFFSET(a);
            b += CONFLICT_FREE_OFFSET(b);
            float t = temp[a];
            temp[a] = temp[b];
            temp[b] += t;
        }
    }
    __syncthreads();
    g_odata[blockIdx.x * n + ai] = temp[ai + bankOffsetA];
    g_odata[blockIdx.x * n + bi] = temp[bi + bankOffsetB];
}
"""


def test_blelloch_scan_over_a_padded_tree():
    kernel = load_cuda(BLELLOCH, "legal.cu", launch=Launch(("2", "1", "1"), (128, 1, 1),
                                                           (256 + 8) * 4))
    x = RNG.integers(0, 9, 2 * 256).astype(np.float32)
    out = run_kernel(kernel, {"g_odata": np.zeros(512, np.float32), "g_idata": x,
                              "n": 256})["g_odata"]
    rows = x.reshape(2, 256)
    np.testing.assert_array_equal(out.reshape(2, 256), np.cumsum(rows, axis=1) - rows)


def test_block_sum_through_warp_partials():
    """Warps reduce with shuffles, lane 0 of each writes its partial, one barrier, and the
    first warp reduces the partials; thread 0 publishes the total to every thread through
    shared memory after a second barrier."""
    source = """
__inline__ __device__ float warpReduceSum(float val) {
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        val += __shfl_down_sync(0xffffffff, val, offset);
    return val;
}
__global__ void normalize(const float* x, float* y, int cols) {
    __shared__ float partial[32];
    __shared__ float total;
    int row = blockIdx.x, lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += x[row * cols + c];
    sum = warpReduceSum(sum);
    if (lane == 0) partial[wid] = sum;
    __syncthreads();
    sum = (threadIdx.x < blockDim.x / warpSize) ? partial[lane] : 0.0f;
    if (wid == 0) sum = warpReduceSum(sum);
    if (threadIdx.x == 0) total = sum;
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[row * cols + c] = x[row * cols + c] / total;
}
"""
    x = RNG.uniform(0.5, 1.5, (3, 500)).astype(np.float32)
    y = _run(source, 3, 256, {"x": x.ravel(), "y": np.zeros(x.size, np.float32),
                              "cols": 500})["y"]
    np.testing.assert_allclose(y.reshape(3, 500), x / x.sum(axis=1, keepdims=True),
                               rtol=1e-5)


BITONIC = """
__global__ void bitonic(float* values) {
    __shared__ float s[256];
    unsigned int tid = threadIdx.x;
    s[tid] = values[blockIdx.x * 256 + tid];
    __syncthreads();
    for (unsigned int k = 2; k <= 256; k <<= 1) {
        for (unsigned int j = k >> 1; j > 0; j >>= 1) {
            unsigned int partner = tid ^ j;
            if (partner > tid) {
                bool up = (tid & k) == 0;
                float a = s[tid], b = s[partner];
                if ((a > b) == up) { s[tid] = b; s[partner] = a; }
            }
            __syncthreads();
        }
    }
    values[blockIdx.x * 256 + tid] = s[tid];
}
"""


def test_bitonic_sort_in_shared_memory():
    source = BITONIC
    x = RNG.standard_normal(2 * 256).astype(np.float32)
    out = _run(source, 2, 256, {"values": x.copy()})["values"]
    np.testing.assert_array_equal(out.reshape(2, 256), np.sort(x.reshape(2, 256), axis=1))


@pytest.mark.parametrize("threads", [32, 48])
def test_every_thread_storing_one_flag(threads):
    """A flag every thread sets to the same value with no barrier, then reads (a benign
    race by the letter: whichever write landed, it holds the value each thread wrote);
    with 48 threads the block also has a partial warp."""
    source = """
__global__ void mark(const int* x, int* out) {
    __shared__ int any_negative;
    any_negative = 0;
    __syncthreads();
    if (x[blockIdx.x * blockDim.x + threadIdx.x] < 0) any_negative = 1;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = any_negative;
}
"""
    x = np.ones(2 * threads, np.int32)
    x[threads + 5] = -1
    out = _run(source, 2, threads, {"x": x, "out": np.zeros_like(x)})["out"]
    np.testing.assert_array_equal(out, np.repeat([0, 1], threads))


@pytest.mark.parametrize("source, barrier, grid, block, shared", [
    (SCAN, 1, ("1", "1", "1"), (128, 1, 1), 512),  # the one between read and write
    (SCAN, 2, ("1", "1", "1"), (128, 1, 1), 512),  # the one after the write
    (TRANSPOSE, 0, ("4", "4", "1"), (16, 4, 1), 0),
    (BITONIC, 1, ("1", "1", "1"), (256, 1, 1), 0),
    (BLELLOCH, 1, ("1", "1", "1"), (128, 1, 1), 264 * 4),  # the down-sweep's first
], ids=["scan-middle", "scan-last", "transpose", "bitonic", "blelloch"])
def test_each_barrier_dropped_is_a_race(source, barrier, grid, block, shared):
    """The same kernels with one ``__syncthreads()`` left out: each is reported."""
    from kir.errors import RaceError

    parts = source.split("__syncthreads();")
    broken = "__syncthreads();".join(parts[:barrier + 1]) + "".join(
        "__syncthreads();" * bool(i) + p for i, p in enumerate(parts[barrier + 1:]))
    assert broken.count("__syncthreads();") == source.count("__syncthreads();") - 1
    kernel = load_cuda(broken, "legal.cu", launch=Launch(grid, block, shared))
    args = {p.name: np.zeros(4096, p.type.elem.numpy if hasattr(p.type.elem, "numpy")
                             else np.float32)
            for p in kernel.params if p.is_buffer}
    for name, value in args.items():
        value[:] = RNG.integers(0, 50, value.size)
    args.update({p.name: 256 for p in kernel.params if not p.is_buffer})  # the scan's n
    with pytest.raises(RaceError):
        run_kernel(kernel, args)
