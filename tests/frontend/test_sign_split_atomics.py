"""Float atomic max / min built from integer atomic max and min on the value's bits, split by
its sign (``kir.frontends.cuda.sign_split_atomics``), as inference engines' quantizers write
``atomicMaxFloat``: read as the float atomic on every target against numpy and through nvcc;
the text forms recognized and not; a pair that is not a float max is refused at its cast."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere
from tests.nvcc_build import nvcc_sm90

from kir.backends import emit
from kir.driver.load import load_kernel
from kir.errors import KirError
from kir.frontends.cuda import load_cuda
from kir.frontends.cuda.cas_loops import CasLoop
from kir.frontends.cuda.sign_split_atomics import sign_split
from kir.ir import Atomic, Launch
from kir.ir.printer import print_kernel

KERNEL = Path(__file__).parent / "data" / "sign_split_atomics.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_float_max_and_min_from_integer_atomics_on_every_target(target):
    check_everywhere(KERNEL, target, [{}, {"R": 7, "C": 5}], seed=4)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_the_emitted_atomics_build_with_nvcc(tmp_path):
    loaded = load_kernel(KERNEL)
    assert [s.op for s in loaded.kernel.body.walk() if isinstance(s, Atomic)] == ["max", "min"]
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)


TERNARY = ("__device__ float f(float* addr, float value) {{ return ({cond}) ? "
           "__int_as_float({first}((int*)addr, __float_as_int(value))) : "
           "__uint_as_float({second}((unsigned int*)addr, __float_as_uint(value))); }}")


@pytest.mark.parametrize("text, op", [
    (TERNARY.format(cond="value >= 0", first="atomicMax", second="atomicMin"), "max"),
    (TERNARY.format(cond="value >= 0.0f", first="atomicMin", second="atomicMax"), "min"),
    (TERNARY.format(cond="!signbit(value)", first="atomicMax", second="atomicMin"), "max"),
    ("__device__ void g(float v, float* a) {\n  if (v >= 0.f)\n    atomicMax((int32_t*)a, "
     "__float_as_int(v));\n  else\n    atomicMin((uint32_t*)a, __float_as_uint(v));\n}", "max"),
    ("__device__ float h(float* a, float v) { float r = (0.f <= v) ? __int_as_float(atomicMax"
     "(reinterpret_cast<int*>(a), __float_as_int(v))) : __uint_as_float(atomicMin("
     "reinterpret_cast<unsigned*>(a), __float_as_uint(v))); return r; }", "max"),
])
def test_the_forms_read_as_a_float_atomic(text, op):
    found = sign_split(text)
    assert found is not None and found.op == op and found.element == "f32"
    assert (found.address, found.value) == ((1, 0) if "float v, float* a" in text else (0, 1))


@pytest.mark.parametrize("text", [
    TERNARY.format(cond="value >= 0", first="atomicMax", second="atomicMax"),  # not a max
    TERNARY.format(cond="value < 0", first="atomicMax", second="atomicMin"),  # test reversed
    TERNARY.format(cond="value >= 1", first="atomicMax", second="atomicMin"),
    TERNARY.format(cond="value >= 0", first="atomicMax", second="atomicMin").replace(
        "return", "atomicAdd(addr, 1.0f); return"),  # something else besides
])
def test_other_pairs_are_not_read_as_one(text):
    assert sign_split(text) is None


def test_a_pair_that_is_no_float_max_is_refused_at_its_cast():
    helper = TERNARY.format(cond="value >= 0", first="atomicMax", second="atomicMax")
    source = helper + "\n__global__ void k(float* m, const float* x) { f(m, x[threadIdx.x]); }\n"
    with pytest.raises(KirError, match="reinterpreting a f32 buffer as i32") as info:
        load_cuda(source, "k.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    assert info.value.loc.line == 1


def test_the_old_value_is_the_atomics_result():
    helper = TERNARY.format(cond="value >= 0", first="atomicMax", second="atomicMin")
    source = helper + ("\n__global__ void k(float* m, const float* x, float* old) {\n"
                       "    old[threadIdx.x] = f(m, x[threadIdx.x]);\n}\n")
    text = print_kernel(load_cuda(source, "k.cu",
                                  launch=Launch(("1", "1", "1"), (32, 1, 1), 0)))
    assert "old_1 = atomic.max(m[0], x[thread.x])" in text
    assert "old[thread.x] = old_1" in text
    assert CasLoop("max", "f32", 0, 1) == sign_split(helper)
