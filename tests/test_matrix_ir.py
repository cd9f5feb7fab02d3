"""Matrix-fragment IR: types, text round trip, verifier checks and interpreter semantics."""

from __future__ import annotations

import numpy as np
import pytest

from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import MatrixFill, MatrixLoad, MatrixMultiplyAccumulate, MatrixStore
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.ir.types import F32, MatrixType, parse_type
from kir.ir.verify import verify

# Every matrix node (and a transposed load, a shared and a global buffer, a fill from a
# parameter), the hand-built all-nodes kernel of the matrix statements.
ALL_NODES = """\
kernel @k(A: f32* global const, B: f32* global const, C: f32* global, N: i32, one: f32)
    grid=("1", "1", "1") block=(64, 1, 1) shared_bytes=0 {
  shared Bs: f32[64]                                # t.cu:3:1
  Bs[i32(thread.x)] = B[i32(thread.x)]              # t.cu:4:1
  barrier block                                     # t.cu:5:1
  matrix acc: f32m8x8 = fill one                    # t.cu:6:1
  matrix a: f32m8x8 = mload A[i32(warp) * 8] stride N  # t.cu:7:1
  matrix b: f32m8x8 = mload Bs[0] stride 8 transposed  # t.cu:8:1
  mma acc += a * b                                  # t.cu:9:1
  mstore C[i32(warp) * 64] stride 8 = acc           # t.cu:10:1
}
"""


def test_matrix_type_text() -> None:
    t = parse_type("f32m8x8")
    assert t == MatrixType(F32, 8, 8) and str(t) == "f32m8x8" and t.count == 64
    with pytest.raises(ValueError):
        parse_type("f32m0x8")


def test_all_matrix_nodes_round_trip_with_locations() -> None:
    kernel = parse_kernel(ALL_NODES)
    kinds = {type(s) for s in kernel.body.walk()}
    assert {MatrixFill, MatrixLoad, MatrixMultiplyAccumulate, MatrixStore} <= kinds
    load_b = next(s for s in kernel.body.walk() if isinstance(s, MatrixLoad) and s.buffer == "Bs")
    assert load_b.transpose and load_b.loc.line == 8
    assert print_kernel(kernel) == ALL_NODES
    assert parse_kernel(print_kernel(kernel, locations=False)) == kernel


def test_reserved_matrix_words_are_escaped_as_names() -> None:
    text = ALL_NODES.replace("N: i32", "stride: i32").replace("stride N", "stride %stride")
    kernel = parse_kernel(text)
    assert "stride %stride" in print_kernel(kernel)
    assert parse_kernel(print_kernel(kernel)) == kernel


def test_non_matrix_type_for_a_fragment_is_a_located_error() -> None:
    with pytest.raises(KirError) as info:
        parse_kernel(ALL_NODES.replace("acc: f32m8x8", "acc: f32"))
    assert "matrix type" in info.value.message and info.value.loc.line == 6


@pytest.mark.parametrize("old,new,message", [
    ("fill one", "fill 1", "filled with i32"),
    ("stride 8 transposed", "stride 8.0 transposed", "stride into 'Bs' has type f32"),
    ("mma acc += a * b", "mma acc += a * zz", "unknown matrix fragment 'zz'"),
    ("mstore C[", "mstore A[", "write to const buffer 'A'"),
    ("matrix b: f32m8x8", "matrix a: f32m8x8", "declared twice"),
    ("matrix b: f32m8x8", "matrix b: f32m8x4", "does not fit"),
    ("mma acc += a * b", "if lane < 3_u32 {\n mma acc += a * b\n}", "lane-divergent"),
    ("mstore C[", "if A[0] > 0.0 {\n mstore C[1] stride 8 = acc\n}\n  mstore C[",
     "lane-divergent"),
])
def test_verifier_rejects(old: str, new: str, message: str) -> None:
    with pytest.raises(KirError) as info:
        verify(parse_kernel(ALL_NODES.replace(old, new)))
    assert message in info.value.message


def test_verifier_accepts_warp_uniform_branches() -> None:
    verify(parse_kernel(ALL_NODES))
    text = ALL_NODES.replace("mma acc += a * b", "if warp < 1_u32 {\n mma acc += a * b\n}")
    verify(parse_kernel(text))


def _inputs(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"A": rng.standard_normal((8, 16)).astype(np.float32),
            "B": rng.standard_normal(64).astype(np.float32),
            "C": np.zeros(128, np.float32), "N": np.int32(16), "one": np.float32(1.0)}


def expected_c(args: dict) -> np.ndarray:
    """What ALL_NODES computes: warp w, C tile w = A[:, 8w:8w+8] · Bᵀ + 1."""
    a, b = args["A"].astype(np.float64), args["B"].reshape(8, 8).astype(np.float64)
    return np.stack([a[:, 8 * w:8 * w + 8] @ b.T + 1 for w in range(2)]).reshape(-1)


def test_interpreter_computes_per_warp_products() -> None:
    args = _inputs()
    out = run_kernel(parse_kernel(ALL_NODES), args, {})
    np.testing.assert_allclose(out["C"], expected_c(args), rtol=1e-5, atol=1e-5)


def test_interpreter_rejects_a_partly_active_warp() -> None:
    text = ALL_NODES.replace("mma acc += a * b", "if lane < 3_u32 {\n mma acc += a * b\n}")
    with pytest.raises(KirError) as info:
        run_kernel(parse_kernel(text), _inputs(), {})
    assert "3 of 32 lanes" in info.value.message


def test_interpreter_runs_only_the_warps_that_reach_it() -> None:
    text = ALL_NODES.replace("mma acc += a * b", "if warp < 1_u32 {\n mma acc += a * b\n}")
    args = _inputs()
    out = run_kernel(parse_kernel(text), args, {})["C"].reshape(2, 64)
    np.testing.assert_allclose(out[0], expected_c(args)[:64], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[1], np.ones(64, np.float32))  # fill only


def test_interpreter_bounds_checks_tiles() -> None:
    text = ALL_NODES.replace("mload A[i32(warp) * 8]", "mload A[i32(warp) * 8 + 70]")
    with pytest.raises(KirError) as info:
        run_kernel(parse_kernel(text), _inputs(), {})
    assert "out-of-bounds matrix load" in info.value.message
