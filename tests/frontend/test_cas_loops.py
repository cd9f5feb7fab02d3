"""Atomics built from ``atomicCAS`` retry loops (``kir.frontends.cuda.cas_loops``): helpers in
three styles read as the float atomic max, min and add they implement — on every target
against numpy, through nvcc — the old value they return, the text forms recognized and not,
and the located refusal of a loop kir does not read."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from kir.backends import emit
from kir.frontends.cuda import load_cuda
from kir.frontends.cuda.cas_loops import CasLoop, cas_loop
from tests.frontend.everywhere import TARGETS, check_everywhere
from tests.nvcc_build import nvcc_sm90

from kir.driver.load import load_kernel
from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import Atomic, For, Launch

DATA = Path(__file__).parent / "data"
STATS = DATA / "cas_atomics.cu"
ONE = Launch(("1", "1", "1"), (1, 1, 1), 0)

GUIDE_DOUBLE_ADD = """
__device__ double atomicAdd(double* address, double val) {
    unsigned long long int* address_as_ull = (unsigned long long int*)address;
    unsigned long long int old = *address_as_ull, assumed;
    do {
        assumed = old;
        old = atomicCAS(address_as_ull, assumed,
                        __double_as_longlong(val + __longlong_as_double(assumed)));
    // Note: uses integer comparison to avoid hang in case of NaN (since NaN != NaN)
    } while (assumed != old);
    return __longlong_as_double(old);
}"""

MAX_HELPER = """
__device__ float fatomic_max(float* addr, float value) {
    int* bits = (int*)addr;
    int old = *bits, assumed;
    do {
        assumed = old;
        old = atomicCAS(bits, assumed, __float_as_int(NEW));
    } while (assumed != old);
    return __int_as_float(old);
}"""


@pytest.mark.parametrize("target", TARGETS)
def test_channel_stats_match_numpy(target):
    check_everywhere(STATS, target, [{}, {"R": 7, "C": 5}], seed=31)


def test_helpers_lower_to_the_atomics_they_build():
    kernel = load_kernel(STATS).kernel
    atomics = [n for n in kernel.body.walk() if isinstance(n, Atomic)]
    assert [(a.op, a.buffer) for a in atomics] == [("max", "amax"), ("min", "vmin"),
                                                   ("add", "total")]
    assert len([n for n in kernel.body.walk() if isinstance(n, For)]) == 1  # no retry loops


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_channel_stats_cuda_compiles(tmp_path):
    loaded = load_kernel(STATS)
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)


def test_the_old_value_is_returned():
    kernel = load_cuda(MAX_HELPER.replace("NEW", "fmaxf(value, __int_as_float(assumed))") + """
    __global__ void f(float* out) {
        out[1] = fatomic_max(out, 3.0f);
        out[2] = fatomic_max(&out[0], -1.0f);
    }""", "m.cu", launch=ONE)
    got = run_kernel(kernel, {"out": np.array([1.5, 0, 0], np.float32)}, {})["out"]
    np.testing.assert_array_equal(got, [3.0, 1.5, 3.0])


@pytest.mark.parametrize("new, op", [
    ("fmaxf(value, __int_as_float(assumed))", "max"),
    ("fmaxf(__int_as_float(assumed), value)", "max"),
    ("max(value, __int_as_float(assumed))", "max"),
    ("fminf(__int_as_float(assumed), value)", "min"),
    ("__int_as_float(assumed) + value", "add"),
    ("value", "exch"),
    ("value > __int_as_float(assumed) ? value : __int_as_float(assumed)", "max"),
    ("(__int_as_float(assumed) < value) ? __int_as_float(assumed) : value", "min"),
    ("value > __int_as_float(assumed) ? __int_as_float(assumed) : value", "min"),
])
def test_forms_read(new, op):
    assert cas_loop(MAX_HELPER.replace("NEW", new)) == CasLoop(op, "f32", 0, 1)


def test_the_guide_double_add_and_other_layouts():
    assert cas_loop(GUIDE_DOUBLE_ADD) == CasLoop("add", "f64", 0, 1)
    swapped = MAX_HELPER.replace("float* addr, float value", "float value, float* addr")
    assert cas_loop(swapped.replace("NEW", "fmaxf(value, __int_as_float(assumed))")) == \
        CasLoop("max", "f32", 1, 0)
    qualified = MAX_HELPER.replace("atomicCAS", "::atomicCAS").replace("NEW", "::fmaxf(value, __int_as_float(assumed))")
    assert cas_loop(qualified) == CasLoop("max", "f32", 0, 1)


@pytest.mark.parametrize("new", [
    "value * __int_as_float(assumed)",            # a product: no such atomic
    "fmaxf(2.0f * value, __int_as_float(assumed))",  # the argument changed first
    "fmaxf(value, __longlong_as_double(assumed))",  # bits read as a double
    "fmaxf(value, value)",                        # the old value unused
])
def test_forms_not_read(new):
    assert cas_loop(MAX_HELPER.replace("NEW", new)) is None


def test_more_in_the_body_is_not_read():
    extra = MAX_HELPER.replace("do {", "counter[0] += 1;\n    do {").replace(
        "NEW", "fmaxf(value, __int_as_float(assumed))")
    assert cas_loop(extra) is None
    assert cas_loop("__device__ float f(float* a, float v) { return v; }") is None


def test_a_loop_kir_does_not_read_is_refused_at_the_call():
    source = MAX_HELPER.replace("NEW", "value * __int_as_float(assumed)") + """
    __global__ void f(float* out, const float* x) {
        fatomic_max(out, x[0]);
    }"""
    with pytest.raises(KirError, match="atomicCAS loop kir does not read") as info:
        load_cuda(source, "p.cu", launch=ONE)
    assert info.value.loc.line == source.splitlines().index(
        "        fatomic_max(out, x[0]);") + 1
    assert "atomicMax" in info.value.hint


def test_a_float_helper_on_an_int_buffer_is_refused():
    source = MAX_HELPER.replace("NEW", "fmaxf(value, __int_as_float(assumed))") + """
    __global__ void f(int* out) {
        fatomic_max(out, 1.0f);
    }"""
    with pytest.raises(KirError, match="atomic on f32 values, called on a i32 buffer"):
        load_cuda(source, "q.cu", launch=ONE)


def test_an_integer_atomic_through_the_other_signedness():
    """``atomicAdd((unsigned long long*)&acc[i], (unsigned long long)v)`` over a signed 64-bit
    buffer (CUDA has no signed 64-bit atomicAdd): the same bits, so the atomic adds to the
    buffer as it is and the old value reads back unsigned; a max or min through such a
    pointer compares by the other signedness and is refused."""
    source = """
    __global__ void f(const long long* x, long long* acc, unsigned long long* old) {
        old[threadIdx.x] = atomicAdd((unsigned long long*)&acc[0],
                                     (unsigned long long)x[threadIdx.x]);
    }"""
    kernel = load_cuda(source, "s.cu", launch=Launch(("1", "1", "1"), (4, 1, 1), 0))
    x = np.array([5, -7, 11, -2], np.int64)
    got = run_kernel(kernel, {"x": x, "acc": np.array([100], np.int64),
                              "old": np.zeros(4, np.uint64)}, {})
    assert got["acc"][0] == 100 + x.sum()
    # each thread's old value is the sum before its own addition (the interpreter runs
    # the threads' atomics in lane order), read back as unsigned
    prefix = 100 + np.concatenate([[0], np.cumsum(x)[:-1]])
    assert got["old"].tolist() == prefix.astype(np.uint64).tolist()
    with pytest.raises(KirError, match="comparison depends on the signedness"):
        load_cuda(source.replace("atomicAdd", "atomicMax"), "m.cu", launch=ONE)
