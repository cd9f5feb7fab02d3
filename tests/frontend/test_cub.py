"""CUB's BlockReduce and WarpReduce as inference engines call them (``Reduce(v, cub::Sum{},
blockDim.x)`` over fewer threads than the collective is sized for, a typedef in a template,
``cub::Max()``, an int sum, a WarpReduce over an array of TempStorage): each kernel against
its numpy reference on every target, the original through the emulator's own CUB; a block
of another size than the collective's stops the run at the call; other CUB collectives and
methods are refused where they are written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.errors import KirError
from kir.frontends.cuda import load_cuda
from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("target", TARGETS)
def test_block_reduce_over_the_valid_threads_on_every_target(target):
    # 100 threads: a last warp of 4 lanes, the sum over them only
    check_everywhere(DATA / "cub_rms.cu", target, [{}, {"T": 2, "H": 37, "BS": 100}], seed=2)


@pytest.mark.parametrize("target", TARGETS)
def test_block_reduce_of_half_rows_on_every_target(target):
    check_everywhere(DATA / "cub_rms.cu", target, [{}], seed=3,
                     spec=DATA / "cub_rms_half.kir.toml")


@pytest.mark.parametrize("target", TARGETS)
def test_block_and_warp_reductions_of_a_template_kernel_on_every_target(target):
    check_everywhere(DATA / "cub_quant.cu", target, [{}, {"R": 2, "C": 45, "BS": 64}], seed=4)


@pytest.mark.parametrize("target", TARGETS)
def test_reductions_of_key_value_pairs_and_structs_on_every_target(target):
    # integer scores: ties everywhere, each broken toward the smaller index
    check_everywhere(DATA / "cub_argmax.cu", target, [{}, {"R": 2, "V": 77, "BS": 64}],
                     seed=9)


SIZED = """\
#include <cub/cub.cuh>
__global__ void total(const float* x, float* out, int n) {
    typedef cub::BlockReduce<float, 64> Reduce64;
    __shared__ typename Reduce64::TempStorage temp;
    float v = threadIdx.x < n ? x[threadIdx.x] : 0.0f;
    float t = Reduce64(temp).%s;
    if (threadIdx.x == 0) out[0] = t;
}
"""


def _total(call: str, threads: int, n: int = 40) -> float:
    kernel = load_cuda(SIZED % call, "total.cu",
                       launch=Launch(("1", "1", "1"), (threads, 1, 1), 0))
    x = np.arange(1, 129, dtype=np.float32)
    return float(run_kernel(kernel, {"x": x, "out": np.zeros(1, np.float32), "n": n},
                            {})["out"][0])


def test_the_valid_count_leaves_out_the_threads_past_it():
    assert _total("Sum(v)", 64) == sum(range(1, 41))
    assert _total("Sum(x[threadIdx.x], 40)", 64) == sum(range(1, 41))
    assert _total("Reduce(x[threadIdx.x], cub::Max(), 33)", 48) == 33.0
    assert _total("Reduce(x[threadIdx.x], cub::Min{}, 5)", 48) == 1.0


@pytest.mark.parametrize("call, threads, message", [
    ("Sum(v)", 32, "runs in blocks of exactly 64 threads"),  # partials no warp writes
    ("Sum(v)", 128, "runs in blocks of exactly 64 threads"),
    ("Sum(v, 40)", 96, "runs in blocks of at most 64 threads"),
])
def test_a_block_of_another_size_stops_the_run_at_the_call(call, threads, message):
    with pytest.raises(KirError, match=message) as info:
        _total(call, threads)
    assert (info.value.loc.line, info.value.loc.col) == (6, 5)


def test_a_function_object_or_lambda_of_the_users_combines_the_values():
    functor = ("template <typename T> struct AbsMax { __device__ T operator()(const T& a, "
               "const T& b) const { return fabsf(a) > fabsf(b) ? a : b; } };\n")
    source = functor + SIZED % "Reduce(-x[threadIdx.x], AbsMax<float>(), 40)"
    kernel = load_cuda(source, "total.cu", launch=Launch(("1", "1", "1"), (64, 1, 1), 0))
    x = np.arange(1, 65, dtype=np.float32)
    out = run_kernel(kernel, {"x": x, "out": np.zeros(1, np.float32), "n": 64}, {})["out"]
    assert out[0] == -40.0
    lam = "Reduce(v, [](float a, float b) { return a * b; }, 6)"  # 1 * 2 * ... * 6
    assert _total(lam, 64) == 720.0


def test_an_operator_object_called_directly():
    assert _total("Reduce(cub::Max()(v, 3.0f), cub::Min(), 40)", 64) == 3.0


@pytest.mark.parametrize("call, message", [
    ("Reduce(v, 3)", "must be cub::Sum"),
    ("Reduce(v, cub::ArgMax())", "compares two key-value pairs"),
    ("ExclusiveSum(v)", "'ExclusiveSum' not supported"),
])
def test_what_kir_does_not_read_is_refused_at_the_call(call, message):
    source = ("struct MaxOf { __device__ float operator()(float a, float b) const {"
              " return a > b ? a : b; } };\n" + SIZED % call)
    with pytest.raises(KirError, match=message) as info:
        load_cuda(source, "total.cu", launch=Launch(("1", "1", "1"), (64, 1, 1), 0))
    assert info.value.loc.line == 7


def test_one_barrier_and_shuffle_trees_per_block_reduction():
    # what the rules and the cost model then see: two warp trees around one shared array
    kernel = load_cuda(SIZED % "Sum(v)", "total.cu",
                       launch=Launch(("1", "1", "1"), (64, 1, 1), 0))
    text = print_kernel(kernel)
    assert text.count("barrier block") == 1
    assert "shared cub_partials: f32[2]" in text
    assert text.count("shuffle.down") == 10 and text.count("shuffle.idx") == 1
    assert " for " not in text


@pytest.mark.parametrize("target", TARGETS)
def test_block_scan_with_its_aggregate_on_every_target(target):
    # 48 threads: a last warp of 16 lanes writes its total from its last thread
    check_everywhere(DATA / "cub_offsets.cu", target, [{}, {"N": 77, "E": 40, "BS": 48,
                                                           "G": 5}], seed=6)


@pytest.mark.parametrize("target", TARGETS)
def test_block_and_warp_scans_with_operators_on_every_target(target):
    check_everywhere(DATA / "cub_scan_rows.cu", target, [{}], seed=7)


SCAN = """\
#include <cub/cub.cuh>
struct RunningTotal {
    int total;
    __device__ int operator()(int block_sum) { int old = total; total += block_sum; return old; }
};
__global__ void offsets(const int* c, int* out) {
    typedef cub::BlockScan<int, 128> Scan;
    __shared__ typename Scan::TempStorage temp;
    int v = c[threadIdx.x], o;
    RunningTotal running = {0};
    Scan(temp).%s;
    out[threadIdx.x] = o;
}
"""


def _offsets(call: str, threads: int) -> np.ndarray:
    kernel = load_cuda(SCAN % call, "offsets.cu",
                       launch=Launch(("1", "1", "1"), (threads, 1, 1), 0))
    c = np.arange(threads, dtype=np.int32) % 5
    return run_kernel(kernel, {"c": c, "out": np.zeros(threads, np.int32)}, {})["out"]


def test_a_scan_seeds_the_first_thread_with_the_initial_value():
    c = np.arange(128) % 5
    assert (_offsets("ExclusiveSum(v, o)", 128) == np.cumsum(c) - c).all()
    assert (_offsets("ExclusiveScan(v, o, 7, cub::Sum())", 128) == 7 + np.cumsum(c) - c).all()
    assert (_offsets("InclusiveScan(v, o, cub::Max())", 128) == np.maximum.accumulate(c)).all()


def test_a_block_scan_needs_the_block_it_is_sized_for():
    with pytest.raises(KirError, match="runs in blocks of exactly 128 threads") as info:
        _offsets("ExclusiveSum(v, o)", 96)
    assert info.value.loc.line == 11


@pytest.mark.parametrize("call, message", [
    ("ExclusiveSum(v, o, running)", "a block prefix callback"),
    ("Sum(v)", "'Sum' not supported .kir reads ExclusiveSum"),
])
def test_what_a_scan_does_not_read_is_refused_at_the_call(call, message):
    with pytest.raises(KirError, match=message) as info:
        load_cuda(SCAN % call, "offsets.cu", launch=Launch(("1", "1", "1"), (128, 1, 1), 0))
    assert info.value.loc.line == 11


HELPER = """\
#include <cub/cub.cuh>
typedef cub::BlockReduce<float, 128> FileReduce;

template <int BLOCK>
__device__ __forceinline__ float block_sum(float v) {
  typedef cub::BlockReduce<float, BLOCK> BR;
  __shared__ typename BR::TempStorage t;
  return BR(t).Sum(v);
}

__global__ void two_sums(const float* x, float* out) {
  __shared__ FileReduce::TempStorage fs;
  float v = x[blockIdx.x * 128 + threadIdx.x];
  float a = block_sum<128>(v);
  float b = FileReduce(fs).Reduce(v * v, cub::Sum());
  if (threadIdx.x == 0) { out[2 * blockIdx.x] = a; out[2 * blockIdx.x + 1] = b; }
}
"""


def test_a_collective_in_a_helper_and_a_file_scope_typedef_without_typename():
    kernel = load_cuda(HELPER, "sums.cu", launch=Launch(("3", "1", "1"), (128, 1, 1), 0))
    x = np.random.default_rng(1).integers(-4, 5, 384).astype(np.float32)
    out = run_kernel(kernel, {"x": x, "out": np.zeros(6, np.float32)}, {})["out"]
    rows = x.reshape(3, 128).astype(np.float64)
    assert (out[0::2] == rows.sum(axis=1)).all() and (out[1::2] == (rows ** 2).sum(axis=1)).all()
