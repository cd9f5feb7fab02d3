"""Races through global memory between the threads of one block (kir.interp.races).

The interpreter's lockstep hid them as it hid shared-memory races: an in-place stencil whose
threads read their neighbours' elements before anyone writes got the author's answer here
and, on a GPU, whatever order the warps ran in. Threads of one block are ordered only by a
barrier, for global memory as for shared. Exchanges between blocks (a last-block-done
reduction, with its fence and atomic counter) are not judged by these marks, and must pass.
"""

from __future__ import annotations

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda

from kir.errors import RaceError
from kir.interp import races, run_kernel
from kir.ir import Launch


def _kernel(source: str, blocks: int, threads: int):
    return load_cuda(source, "global_race.cu",
                     launch=Launch((str(blocks), "1", "1"), (threads, 1, 1), 0))


SMOOTH = """__global__ void smooth(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float left = i > 0 ? x[i - 1] : 0.0f;
    float right = i + 1 < n ? x[i + 1] : 0.0f;
    BARRIER
    x[i] = (left + x[i] + right) / 3.0f;
}
"""


def test_an_in_place_stencil_without_a_barrier_is_a_race():
    """Thread 31 overwrites x[31] after thread 32, of the next warp, read it (and 30):
    nothing orders two warps. (Within a warp the model is a converged warp whose lanes'
    reads of one statement come before their writes, as for shared memory.)"""
    kernel = _kernel(SMOOTH.replace("BARRIER", ""), 1, 64)
    with pytest.raises(RaceError) as info:
        run_kernel(kernel, {"x": np.arange(64, dtype=np.float32), "n": 64})
    message = str(info.value)
    assert message.startswith("global_race.cu:6:5: error: global-memory race on 'x'[31]: "
                              "block (0, 0, 0) thread (31, 0, 0) overwrites it after thread "
                              "(30, 0, 0) read it, with no barrier between"), message


def test_the_same_stencil_with_a_barrier_passes_and_smooths():
    kernel = _kernel(SMOOTH.replace("BARRIER", "__syncthreads();"), 1, 64)
    x = np.arange(64, dtype=np.float32)
    out = run_kernel(kernel, {"x": x.copy(), "n": 64})["x"]
    padded = np.concatenate([[0.0], x, [0.0]])
    np.testing.assert_allclose(out, (padded[:-2] + padded[1:-1] + padded[2:]) / 3, rtol=1e-6)


EXCHANGE = """__global__ void pairs(const float* x, float* partner, float* out) {
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    partner[i] = x[i] * 2.0f;
    BARRIER
    out[i] = partner[blockIdx.x * blockDim.x + (t ^ 1)];
}
"""


@pytest.mark.parametrize("barrier, ok", [("", False), ("__syncthreads();", True)])
def test_an_exchange_through_a_global_buffer_needs_a_barrier(barrier, ok):
    """Each thread reads the element its neighbour wrote to a global scratch buffer."""
    kernel = _kernel(EXCHANGE.replace("BARRIER", barrier), 2, 64)
    x = np.arange(128, dtype=np.float32)
    args = {"x": x, "partner": np.zeros(128, np.float32), "out": np.zeros(128, np.float32)}
    if not ok:
        with pytest.raises(RaceError, match=r"reads it after thread \(1, 0, 0\) wrote it"):
            run_kernel(kernel, args)
        return
    out = run_kernel(kernel, args)["out"]
    np.testing.assert_array_equal(out, 2 * x[np.arange(128) ^ 1])


def test_threads_of_a_block_writing_different_values_to_one_element_race():
    """A block sum written by every thread instead of one: all hold different partials."""
    source = """__global__ void last(const float* x, float* out) {
    out[blockIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
}
"""
    kernel = _kernel(source, 2, 32)
    with pytest.raises(RaceError, match="writes a different value to"):
        run_kernel(kernel, {"x": np.arange(64, dtype=np.float32),
                            "out": np.zeros(2, np.float32)})
    same = run_kernel(kernel, {"x": np.ones(64, np.float32), "out": np.zeros(2, np.float32)})
    assert same["out"].tolist() == [1.0, 1.0]  # the same value from every thread: no race


LAST_BLOCK = """__global__ void total(const float* x, float* partial, unsigned int* done,
                      float* out, int blocks) {
    __shared__ float s[64];
    __shared__ bool last;
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 64 + t];
    __syncthreads();
    for (int o = 32; o > 0; o >>= 1) {
        if (t < o) s[t] += s[t + o];
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = s[0];
        __threadfence();
        last = atomicAdd(done, 1u) == blocks - 1;
    }
    __syncthreads();
    if (last && t == 0) {
        float sum = 0.0f;
        for (int b = 0; b < blocks; ++b) sum += partial[b];
        out[0] = sum;
    }
}
"""


def test_a_last_block_done_reduction_across_blocks_passes():
    """The last block reads the partials the other blocks wrote: ordered by their fences
    and the atomic counter, which these marks do not follow, so never reported."""
    kernel = _kernel(LAST_BLOCK, 4, 64)
    x = (np.arange(256) % 5).astype(np.float32)
    out = run_kernel(kernel, {"x": x, "partial": np.zeros(4, np.float32),
                              "done": np.zeros(1, np.uint32), "out": np.zeros(1, np.float32),
                              "blocks": 4})
    assert out["out"][0] == x.sum()


def test_buffers_over_the_marking_budget_are_not_looked_at(monkeypatch):
    """Global marks cost seven numbers an element: a buffer past MAX_GLOBAL_ELEMENTS is not
    marked (validation runs at small check sizes), and the racy stencil then runs through."""
    monkeypatch.setattr(races, "MAX_GLOBAL_ELEMENTS", 32)
    kernel = _kernel(SMOOTH.replace("BARRIER", ""), 1, 64)
    out = run_kernel(kernel, {"x": np.arange(64, dtype=np.float32), "n": 64})["x"]
    assert out.shape == (64,)
    assert run_kernel(kernel, {"x": np.arange(64, dtype=np.float32), "n": 64},
                      races=False)["x"].tolist() == out.tolist()


def test_marks_touched_past_the_buffers_size_are_cleared_all_at_once():
    """A loop with no barrier touches a global buffer's elements over and over: the list of
    what to clear stops growing past the buffer's size, and a barrier clears all of it."""
    source = """__global__ void sweeps(float* x, int n, int rounds) {
    int i = threadIdx.x;
    for (int r = 0; r < rounds; ++r) x[i] = x[i] * 0.5f + 1.0f;
    __syncthreads();
    x[(i + 1) % n] = 0.0f;
}
"""
    kernel = _kernel(source, 1, 32)
    # Each thread rewrites its own element 100 times (no race), then after the barrier
    # writes its neighbour's, which nobody else touches since: no race either.
    out = run_kernel(kernel, {"x": np.zeros(32, np.float32), "n": 32, "rounds": 100})["x"]
    assert out.tolist() == [0.0] * 32
    without_barrier = source.replace("    __syncthreads();\n", "")
    with pytest.raises(RaceError, match="global-memory race on 'x'"):
        run_kernel(_kernel(without_barrier, 1, 32),
                   {"x": np.zeros(32, np.float32), "n": 32, "rounds": 100})
