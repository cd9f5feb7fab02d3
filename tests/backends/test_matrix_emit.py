"""Matrix fragments in emitted Metal and CUDA: spellings, refusals, and emulated results."""

from __future__ import annotations

import numpy as np
import pytest
from kir.backends import emit
from kir.backends.emulate import emulator_available

from kir.errors import UnsupportedError
from kir.interp import run_kernel
from kir.ir.parser import parse_kernel
from kir.spec import ArgSpec
from tests.backends.conftest import make_spec
from tests.test_matrix_ir import ALL_NODES

AVAILABLE, REASON = emulator_available()


def _spec(outputs: int = 128, threads: int = 64):
    """The specs of the kernels here: C holds ``outputs`` floats, ``threads`` in one block."""
    args = {"A": ArgSpec("A", "f32", ("R", "W")), "B": ArgSpec("B", "f32", ("Q",)),
            "C": ArgSpec("C", "f32", ("P",), role="out", init=0.0),
            "N": ArgSpec("N", "i32", (), value="W"), "one": ArgSpec("one", "f32", (), value="1")}
    return make_spec(args, {"R": 8, "W": 16, "Q": 64, "P": outputs}, grid=("1", "1", "1"),
                     block=(str(threads), "1", "1")).bind()


def _emit(target: str, text: str = ALL_NODES):
    return emit(parse_kernel(text), _spec(), target)


def test_metal_spells_simdgroup_matrix_functions() -> None:
    e = _emit("metal")
    assert e.header.strip() == "#include <metal_simdgroup_matrix>"
    lines = [line.strip() for line in e.source.splitlines()]
    assert "simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(one);" in lines
    assert "simdgroup_load(a, &A[(int)simdgroup_index_in_threadgroup * 8], (ulong)(N));" in lines
    assert "simdgroup_load(b, &Bs[0], (ulong)(8), ulong2(0, 0), true);" in lines
    assert "simdgroup_multiply_accumulate(acc, a, b, acc);" in lines
    assert "simdgroup_store(acc, &C[(int)simdgroup_index_in_threadgroup * 64], (ulong)(8));" \
        in lines


def test_cuda_uses_the_f32_fragment_helper() -> None:
    e = _emit("cuda")
    assert "struct kir_frag8x8" in e.header and "kir_lane()" in e.header
    assert e.header.index("unsigned int kir_lane()") < e.header.index("struct kir_frag8x8")
    lines = [line.strip() for line in e.source.splitlines()]
    assert "kir_frag8x8 acc = kir_frag_fill(kir_arg_one);" in lines
    assert "kir_frag8x8 b = kir_frag_load(&Bs[0], 8, true);" in lines
    assert "kir_frag_mma(acc, a, b);" in lines
    assert "kir_frag_store(&C[(int)kir_warp() * 64], 8, acc);" in lines


@pytest.mark.parametrize("target", ["metal", "cuda"])
def test_unsupported_fragment_shapes_are_refused(target: str) -> None:
    text = ALL_NODES.replace("f32m8x8", "f32m16x16").replace("stride 8", "stride 16")
    with pytest.raises(UnsupportedError) as info:
        _emit(target, text)
    assert "f32m16x16" in info.value.message


@pytest.mark.skipif(not AVAILABLE, reason=f"CPU emulator unavailable: {REASON}")
@pytest.mark.parametrize("target", ["metal", "cuda"])
def test_emulated_fragments_match_the_interpreter(target: str) -> None:
    from kir.backends.emulated_runner import EmulatedKernel

    bound = _spec()
    inputs = bound.make_inputs(3)
    kernel = parse_kernel(ALL_NODES)
    expected = run_kernel(kernel, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                   for k, v in inputs.items()}, bound.sizes)["C"]
    got = EmulatedKernel(emit(kernel, bound, target))(inputs)["C"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# TF32 products (kir.rewrites.tf32_matrix) through the helpers' portable path: A loaded
# as written and B transposed, then A transposed and B a filled fragment; the emulated CUDA
# rounds the operands as the interpreter does, so the two agree far below TF32's own error.
TF32_NODES = [
    ALL_NODES.replace("mma acc += a * b", "mma acc += a * b tf32"),
    ALL_NODES.replace("stride N  ", "stride N transposed  ")
    .replace("matrix b: f32m8x8 = mload Bs[0] stride 8 transposed", "matrix b: f32m8x8 = fill one")
    .replace("mma acc += a * b", "mma acc += a * b tf32"),
]


@pytest.mark.skipif(not AVAILABLE, reason=f"CPU emulator unavailable: {REASON}")
@pytest.mark.parametrize("text", TF32_NODES, ids=["a-b-transposed", "a-transposed-b-filled"])
def test_emulated_tf32_fragments_match_the_interpreter(text: str) -> None:
    from kir.backends.emulated_runner import EmulatedKernel

    assert text.count(" tf32") == 1 and text != ALL_NODES
    bound = _spec()
    inputs = bound.make_inputs(3)
    kernel = parse_kernel(text)
    expected = run_kernel(kernel, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                   for k, v in inputs.items()}, bound.sizes)["C"]
    exact = run_kernel(parse_kernel(text.replace(" tf32", "")),
                       {k: (v.copy() if isinstance(v, np.ndarray) else v)
                        for k, v in inputs.items()}, bound.sizes)["C"]
    emitted = emit(kernel, bound, "cuda")
    assert "kir_tf32_mma(" in emitted.source
    got = EmulatedKernel(emitted)(inputs)["C"]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert np.abs(expected - exact).max() > 1e-5  # TF32 rounding is visible


# Five tf32 products in one run: the first three go into distinct accumulators (two share B
# and become one m16n8k8), the fourth repeats acc0, so the run is cut there and acc0 keeps
# its order of additions.
PAIRED = """\
kernel @k(A: f32* global const, B: f32* global const, C: f32* global, N: i32, one: f32)
    grid=("1", "1", "1") block=(32, 1, 1) shared_bytes=0 {
  shared Bs: f32[64]
  Bs[i32(thread.x)] = B[i32(thread.x)]
  Bs[i32(thread.x) + 32] = B[i32(thread.x) + 32]
  barrier block
  matrix acc0: f32m8x8 = fill one
  matrix acc1: f32m8x8 = fill 0.0
  matrix acc2: f32m8x8 = fill 0.0
  matrix a0: f32m8x8 = mload A[0] stride N
  matrix a1: f32m8x8 = mload A[8] stride N
  matrix b: f32m8x8 = mload Bs[0] stride 8
  matrix b2: f32m8x8 = mload Bs[0] stride 8 transposed
  mma acc0 += a0 * b tf32
  mma acc1 += a1 * b2 tf32
  mma acc2 += a1 * b tf32
  mma acc0 += a1 * b2 tf32
  mma acc1 += a0 * b tf32
  mstore C[0] stride 8 = acc0
  mstore C[64] stride 8 = acc1
  mstore C[128] stride 8 = acc2
}
"""


def test_tf32_products_sharing_b_are_paired_within_distinct_accumulators() -> None:
    lines = [line.strip() for line in emit(parse_kernel(PAIRED), _spec(outputs=192, threads=32), "cuda")
             .source.splitlines() if "_mma" in line]
    assert lines == ["kir_tf32_mma2(acc0, acc2, a0, a1, b);",
                     "kir_tf32_mma(acc1, a1, b2);",
                     "kir_tf32_mma(acc0, a1, b2);",
                     "kir_tf32_mma(acc1, a0, b);"]


@pytest.mark.skipif(not AVAILABLE, reason=f"CPU emulator unavailable: {REASON}")
def test_emulated_paired_tf32_products_match_the_interpreter() -> None:
    from kir.backends.emulated_runner import EmulatedKernel

    bound = _spec(outputs=192, threads=32)
    inputs = bound.make_inputs(4)
    kernel = parse_kernel(PAIRED)
    expected = run_kernel(kernel, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                   for k, v in inputs.items()}, bound.sizes)["C"]
    got = EmulatedKernel(emit(kernel, bound, "cuda"))(inputs)["C"]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
