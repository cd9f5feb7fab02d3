"""Volatile shared memory as warp-synchronous code means it (frontends/cuda/lockstep.py):
each store through a volatile pointer or array into shared memory is one lockstep step of
the warp (the value, a warp barrier, the store, a warp barrier). Before, kir refused such
code: accepted as plain stores, the emitted tail of a reduction gave a 65-times-too-small
sum on the emulator's CUDA and Metal while the interpreter (lockstep) passed. Now the
classic reduction's tail (through a helper's volatile parameter, a volatile local pointer,
a volatile shared array) is right on every target kir emits; volatile global memory is
refused where it is declared."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import check_everywhere

from kir.errors import KirError, UnsupportedError
from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel

LAUNCH = Launch(("2", "1", "1"), (64, 1, 1), 0)
TAIL_KERNEL = Path(__file__).parent / "data" / "volatile_tail.cu"
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


CASES = {
    # a device function taking the shared array as a volatile pointer (the classic tail)
    "helper-parameter": _kernel("float s[64];", "    if (tid < 32) tail(s, tid);",
                                "__device__ void tail(volatile float* v, unsigned int tid) {\n"
                                "    v[tid] += v[tid + 32];\n    v[tid] += v[tid + 16];\n}\n"),
    # a volatile local pointer to it
    "local-pointer": _kernel("float s[64];", "    volatile float* vs = s;\n"
                             + TAIL.format(vs="vs")),
    # the shared array itself declared volatile
    "shared-array": _kernel("volatile float s[64];", TAIL.format(vs="s")),
}


@pytest.mark.parametrize("name", CASES)
def test_a_volatile_tail_steps_the_warp_in_lockstep(name):
    kernel = load_cuda(CASES[name], "v.cu", launch=LAUNCH)
    text = print_kernel(kernel)
    assert text.count("barrier warp") >= 4  # two per store of the tail
    x = np.arange(128, dtype=np.float32)
    out = run_kernel(kernel, {"x": x, "out": np.zeros(2, np.float32)}, {})["out"]
    # lane 0 adds lanes 32 and then 16 of the sums before (lockstep), not their later values
    rows = x.reshape(2, 64)
    assert out.tolist() == [float(r[0] + r[32] + r[16] + r[48]) for r in rows]


@pytest.mark.parametrize("target", ["interp", "emulate-cuda", "emulate-metal"])
def test_the_classic_reduction_with_its_volatile_tail(target):
    # (emulate-original runs the ORIGINAL tail on the emulator, whose lanes do not run in
    # lockstep, as Volta's need not: it gets the wrong sum that the refusal used to prevent)
    check_everywhere(TAIL_KERNEL, target, [{}, {"N": 777, "BS": 64, "G": 3}], seed=1)


def test_volatile_global_memory_is_refused_where_it_is_declared():
    source = ("__global__ void k(float* flags, float* out) {\n"
              "    volatile float* f = flags;\n    while (f[0] == 0.0f) {}\n"
              "    out[threadIdx.x] = f[1];\n}\n")
    with pytest.raises(UnsupportedError, match="volatile pointer 'f' into global") as info:
        load_cuda(source, "v.cu", launch=LAUNCH)
    assert info.value.loc.line == 2 and "poll" in info.value.hint


def test_a_volatile_scalar_local_is_still_taken():
    """One thread's own variable: volatile changes nothing kir could get wrong."""
    kernel = load_cuda("__global__ void k(float* out) {\n    volatile float v = 2.0f;\n"
                       "    out[threadIdx.x] = v;\n}\n", "v.cu", launch=LAUNCH)
    assert kernel.name == "k"


ONE_LANE = """__global__ void k(const float* x, float* out) {
    __shared__ float s[64];
    volatile float* vs = s;
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) { float t = vs[1] + vs[2]; vs[0] = t; }
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}"""


def test_a_store_some_lanes_skip_keeps_no_warp_barrier():
    # (with its barriers, the emitted kernel deadlocked: lanes 1-31 never reach them)
    kernel = load_cuda(ONE_LANE, "one.cu", launch=LAUNCH)
    text = print_kernel(kernel)
    branch = text[text.index("if thread.x == 0"):]
    assert "barrier warp" not in branch[:branch.index("}")]
    out = run_kernel(kernel, {"x": np.arange(128, dtype=np.float32),
                              "out": np.zeros(64, np.float32)}, {})["out"]
    assert out[:3].tolist() == [3.0, 1.0, 2.0]


def test_lanes_exchanging_through_a_store_some_lanes_skip_are_a_race():
    source = ONE_LANE.replace(
        "if (threadIdx.x == 0) { float t = vs[1] + vs[2]; vs[0] = t; }",
        "if (threadIdx.x < 16) { vs[threadIdx.x] += vs[threadIdx.x + 16];\n"
        "        vs[threadIdx.x] += vs[threadIdx.x + 8]; }")
    kernel = load_cuda(source, "half.cu", launch=LAUNCH)
    with pytest.raises(KirError, match="shared-memory race on 's'"):
        run_kernel(kernel, {"x": np.arange(128, dtype=np.float32),
                            "out": np.zeros(64, np.float32)}, {})
