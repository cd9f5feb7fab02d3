"""Warp exchanges only part of a warp runs, on CUDA (``backends.partial_warps``): kir's
CUDA shuffles name the whole warp, so one under a condition that splits a warp would wait
for lanes that are elsewhere (the emulator deadlocked on it; the interpreter passed it). It
is refused at the shuffle; Metal, where the lanes that run a SIMD-group function take part,
still emits it; lanes that returned, whole-warp conditions and flags the block shares are
fine."""

from __future__ import annotations

import pytest
from conftest import make_spec
from kir.backends import emit

from kir.errors import UnsupportedError
from kir.frontends.cuda import load_cuda
from kir.ir import Launch
from kir.spec import ArgSpec

BLOCK = 64


def _emit(source: str, target: str):
    kernel = load_cuda(source, "w.cu", launch=Launch(("1", "1", "1"), (BLOCK, 1, 1), 0))
    spec = make_spec({"x": ArgSpec("x", "f32", ("N",)),
                      "y": ArgSpec("y", "f32", ("N",), role="out")},
                     {"N": BLOCK, "G": 1}, block=(str(BLOCK), "1", "1"))
    return emit(kernel, spec.bind(), target)


HALF_WARP = """
__global__ void k(const float* x, float* y) {
    int lane = threadIdx.x & 31;
    float v = x[threadIdx.x];
    if (lane < 16) {
        for (int o = 8; o > 0; o >>= 1) v += __shfl_down_sync(0xffffu, v, o, 16);
    }
    y[threadIdx.x] = v;
}"""


def test_a_shuffle_among_half_a_warp_is_refused_for_cuda_at_the_shuffle():
    with pytest.raises(UnsupportedError, match="only some lanes of a warp") as raised:
        _emit(HALF_WARP, "cuda")
    assert raised.value.loc.line == 6 and "5:5" in raised.value.message
    assert "every lane of the warp" in raised.value.hint
    assert "simd_shuffle_down" in _emit(HALF_WARP, "metal").source


@pytest.mark.parametrize("guard", [
    "if (threadIdx.x >= 40) return;",             # the lanes that return wait nowhere
    "if (threadIdx.x < 32) {",                    # a whole warp
    "if (threadIdx.x < warpSize) {",
    "if ((blockIdx.x * blockDim.x + threadIdx.x) / 32 == 1) {",
])
def test_whole_warps_and_returned_lanes_are_fine(guard):
    close = "}" if guard.endswith("{") else ""
    source = f"""
__global__ void k(const float* x, float* y) {{
    float v = x[threadIdx.x];
    {guard}
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    y[threadIdx.x] = v;
    {close}
}}"""
    assert "__shfl_xor_sync" in _emit(source, "cuda").source


def test_a_loop_over_the_rows_of_a_warp_is_not_judged():
    """The probes' CSR SpMV: a warp a row over a grid-stride loop of rows (its bound a load
    from memory); the lane analysis cannot tell such trip counts are the warp's, and judging
    loops refused it (and three more correct kernels) on the H200 in round 29."""
    source = """
__global__ void k(const float* x, float* y) {
    const int lanes = threadIdx.x & 31;
    const int n = (int)x[0];
    for (int row = threadIdx.x / 32; row < n; row += blockDim.x / 32) {
        float v = x[row * 32 + lanes];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lanes == 0) y[row] = v;
    }
}"""
    assert "__shfl_xor_sync" in _emit(source, "cuda").source
