"""CUDA's integer intrinsics (``__dp4a``, ``__byte_perm``, ``__brev``, ``__umulhi``, funnel
shifts, ``__sad``, ``__mul24`` ...) and an ``int`` read over four int8 values, bit for bit
against Python integers on every target, the original kernels included (the emulator's own
byte-by-byte definitions of the intrinsics check kir's shift-and-mask lowering)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, assert_call_refused, check_everywhere

from kir.driver.load import load_kernel
from kir.errors import KirError
from kir.ir import Launch, Load

DATA = Path(__file__).parent / "data"
GEMV = DATA / "int8_gemv_dp4a.cu"
INTRINSICS = DATA / "int_intrinsics.cu"
ONE = Launch(("1", "1", "1"), (1, 1, 1), 0)


@pytest.mark.parametrize("target", TARGETS)
def test_int8_gemv_through_dp4a(target):
    check_everywhere(GEMV, target, [{}, {"M": 37, "K": 128}], seed=5)


@pytest.mark.parametrize("target", TARGETS)
def test_integer_intrinsics(target):
    check_everywhere(INTRINSICS, target, [{}, {"n": 45}], seed=8)


def test_an_int_over_int8_reads_four_bytes():
    """``reinterpret_cast<const int*>(int8s)[i]`` reads bytes 4i .. 4i + 3 of the buffer."""
    kernel = load_kernel(GEMV).kernel
    loads = [n for n in kernel.body.walk() if isinstance(n, Load) and n.buffer == "vx"]
    assert len(loads) == 4 and all(str(n.type) == "i8" for n in loads)


@pytest.mark.parametrize("call, message", [
    ("__dp4a(x[0], 1, 2)", "__dp4a of a f32 value"),
    ("__brev(x[0])", "__brev takes integers, not f32"),
])
def test_integer_intrinsics_of_floats_are_refused(call, message):
    assert_call_refused(call, message)


def test_an_int_over_halves_is_refused_where_read():
    """Four halves read as a long long would need splitting values into bits."""
    source = """#include <cuda_fp16.h>
__global__ void f(const __half* h, long long* out) {
    const long long* p = reinterpret_cast<const long long*>(h);
    out[0] = p[0] + 1;
}
"""
    with pytest.raises(KirError, match="from integer elements only") as info:
        load_cuda(source, "h.cu", launch=ONE)
    assert info.value.loc.line == 4


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("path", [GEMV, INTRINSICS], ids=["gemv", "intrinsics"])
def test_emitted_cuda_compiles(path, tmp_path):
    from kir.backends import emit
    from tests.nvcc_build import nvcc_sm90

    loaded = load_kernel(path)
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)
