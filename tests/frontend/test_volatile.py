"""Volatile memory is refused: it is how pre-Volta code lets a warp's lanes exchange values
without a barrier (the unrolled tail of a shared-memory reduction). kir's output does not
keep the lanes in step, so accepting it computed wrong values: the emitted tail of such a
reduction gave a 65-times-too-small sum on the emulator's CUDA and Metal while the
interpreter (lockstep) passed."""

from __future__ import annotations

import pytest
from kir.frontends.cuda import load_cuda

from kir.errors import UnsupportedError
from kir.ir import Launch

LAUNCH = Launch(("2", "1", "1"), (64, 1, 1), 0)
TAIL = """    if (tid < 32) {{
        {vs}[tid] += {vs}[tid + 32];
        {vs}[tid] += {vs}[tid + 16];
    }}"""


def _kernel(decls: str, tail: str, helper: str = "") -> str:
    return (helper + "__global__ void k(const float* x, float* out) {\n"
            "    __shared__ " + decls + "\n"
            "    unsigned int tid = threadIdx.x;\n"
            "    s[tid] = x[blockIdx.x * 64 + tid];\n"
            "    __syncthreads();\n" + tail + "\n"
            "    if (tid == 0) out[blockIdx.x] = s[0];\n}\n")


@pytest.mark.parametrize("source, line", [
    # a device function taking the shared array as a volatile pointer (the classic tail)
    (_kernel("float s[64];", "    if (tid < 32) tail(s, tid);",
             "__device__ void tail(volatile float* v, unsigned int tid) {\n"
             "    v[tid] += v[tid + 32];\n    v[tid] += v[tid + 16];\n}\n"), 1),
    # a volatile local pointer to it
    (_kernel("float s[64];", "    volatile float* vs = s;\n" + TAIL.format(vs="vs")), 6),
    # the shared array itself declared volatile
    (_kernel("volatile float s[64];", TAIL.format(vs="s")), 2),
], ids=["helper-parameter", "local-pointer", "shared-array"])
def test_volatile_memory_is_refused_where_it_is_declared(source, line):
    with pytest.raises(UnsupportedError, match="volatile pointer or array") as info:
        load_cuda(source, "v.cu", launch=LAUNCH)
    assert info.value.loc.line == line, info.value
    assert "__shfl_down_sync" in info.value.hint and "__syncwarp()" in info.value.hint


def test_a_volatile_scalar_local_is_still_taken():
    """One thread's own variable: volatile changes nothing kir could get wrong."""
    kernel = load_cuda("__global__ void k(float* out) {\n    volatile float v = 2.0f;\n"
                       "    out[threadIdx.x] = v;\n}\n", "v.cu", launch=LAUNCH)
    assert kernel.name == "k"
