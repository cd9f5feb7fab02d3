"""tf32-matrix: TF32 rounding as PTX's cvt.rna does it; the rule on the matmul example after
mma-tile (interpreter, emulated CUDA, nvcc for sm_90, and the H200 when one is there); the
spec's tolerance decides (an exact-f32 tolerance refuses it); refusals (Metal, fragments in two
roles); the IR text round-trips."""

from __future__ import annotations

import dataclasses
import re
import shutil

import numpy as np
import pytest
from loop_sizes import EXAMPLES

from kir.backends import TARGETS, emit
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import check_on_target, copy_inputs, run_interp
from kir.errors import UnsupportedError
from kir.interp.matrix import round_to_tf32
from kir.ir import MatrixMultiplyAccumulate
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext, apply_trace, context_for, parse_step
from kir.spec.compare import compare_outputs
from kir.rewrites.tf32_matrix import RULES
from tests.nvcc_build import nvcc_sm90

RULE = RULES[0]
REGISTRY = load_registry(plugins=False)
SGEMM = EXAMPLES / "sgemm.cu"
STEPS = ["mma-tile{loop=L1}", "tf32-matrix{at=all}"]


def _rewritten(steps: list[str], sizes: dict | None = None, target: str = "cuda"):
    loaded = load_kernel(SGEMM, sizes=sizes or {})
    trace = [parse_step(s, REGISTRY) for s in steps]
    ctx = context_for(loaded, TARGETS[target])
    return loaded, apply_trace(loaded.kernel, trace, REGISTRY, ctx, strict=True).kernel


# ------------------------------------------------------------------------- TF32 rounding


def test_rounding_is_to_nearest_ties_away_with_ten_mantissa_bits():
    one = np.float32(1.0)
    step = np.float32(2.0 ** -10)
    values = np.array([1.0, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -12, -(1 + 2 ** -11),
                       np.inf, -np.inf, 3.0e38, 1e-40], np.float32)
    got = round_to_tf32(values)
    assert got[0] == one
    assert got[1] == one + step            # a tie goes away from zero
    assert got[2] == one + 2 * step        # 1.5 steps: up
    assert got[3] == one                   # a quarter step: down
    assert got[4] == -(one + step)         # ties away from zero on the negative side too
    assert np.isinf(got[5]) and np.isinf(got[6]) and got[6] < 0
    assert (got.view(np.uint32) & 0x1FFF == 0).all()
    assert np.isnan(round_to_tf32(np.array([np.nan], np.float32)))[0]
    drawn = np.random.default_rng(0).standard_normal(10000).astype(np.float32)
    rel = np.abs(round_to_tf32(drawn) - drawn) / np.abs(drawn)
    assert rel.max() <= 2.0 ** -11 and rel.max() > 2.0 ** -12


# ------------------------------------------------------------------------- the rewrite


def test_marks_every_product_and_round_trips_as_text():
    _, out = _rewritten(STEPS)
    products = [n for n in out.body.walk() if isinstance(n, MatrixMultiplyAccumulate)]
    assert products and all(p.precision == "tf32" for p in products)
    text = print_kernel(out)
    assert re.search(r"mma \w+ \+= \w+ \* \w+ tf32", text)
    assert parse_kernel(text) == out
    assert RULE.candidates(out) == []  # nothing left to mark


def test_tf32_error_is_seen_and_admitted_by_the_examples_tolerance():
    """The interpreter rounds the operands: the result moves away from the exact-f32 matrix
    product by TF32's error, which the example's tolerance admits."""
    loaded, exact = _rewritten(STEPS[:1])
    _, tf32 = _rewritten(STEPS)
    inputs = loaded.bound.make_inputs(3)
    want = loaded.bound.reference(copy_inputs(inputs))["C"]
    got_exact = run_interp(dataclasses.replace(loaded, kernel=exact), copy_inputs(inputs))["C"]
    got_tf32 = run_interp(dataclasses.replace(loaded, kernel=tf32), copy_inputs(inputs))["C"]
    assert np.abs(got_exact - want).max() < 1e-4
    assert 1e-4 < np.abs(got_tf32 - want).max() < 1e-2
    tolerance = lambda out: loaded.bound.tolerance(loaded.bound.spec.args[out].dtype)  # noqa: E731
    assert compare_outputs({"C": got_tf32}, {"C": want}, tolerance).ok


def test_an_exact_f32_tolerance_refuses_it():
    """The spec's tolerance decides: at the exact-f32 bound the example used to declare
    (rtol 1e-4, atol 2e-3), the TF32 kernel fails validation and the f32 one passes."""
    loaded, exact = _rewritten(STEPS[:1])
    _, tf32 = _rewritten(STEPS)
    inputs = loaded.bound.make_inputs(3)
    want = loaded.bound.reference(copy_inputs(inputs))
    strict = lambda out: (1e-4, 2e-3)  # noqa: E731
    for kernel, ok in ((exact, True), (tf32, False)):
        got = run_interp(dataclasses.replace(loaded, kernel=kernel), copy_inputs(inputs))
        assert compare_outputs(got, want, strict).ok is ok


@pytest.mark.parametrize("ragged", [False, True], ids=["default", "ragged"])
def test_emulated_cuda_rounds_as_the_interpreter(ragged):
    """The emitted helpers' portable path (no __CUDA_ARCH__: the CPU emulator) loads the
    operands in mma.sync's layouts and rounds them as the interpreter does: the two agree far
    more closely than TF32's own error."""
    from kir.backends.emulate import emulator_available
    from kir.driver.runners import RUNNERS

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    sizes = dict(load_kernel(SGEMM).spec.ragged) if ragged else {}
    loaded, out = _rewritten(STEPS, sizes)
    sized = dataclasses.replace(loaded, kernel=out)
    inputs = loaded.bound.make_inputs(4)
    interp = run_interp(sized, copy_inputs(inputs))["C"]
    emulated = RUNNERS["emulate-cuda"](sized, copy_inputs(inputs))["C"]
    assert np.abs(emulated - interp).max() < 2e-5
    assert check_on_target(sized, "emulate-cuda").result.ok


def test_emitted_cuda_loads_operands_in_their_roles():
    loaded, out = _rewritten(STEPS)
    e = emit(out, loaded.bound, "cuda")
    assert "kir_tf32_load_a(" in e.source and "kir_tf32_load_b(" in e.source
    assert "kir_tf32_mma(" in e.source and "kir_frag_mma(" not in e.source
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in e.header


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_emitted_cuda_compiles_to_a_tensor_core_mma_for_sm90(tmp_path):
    loaded, out = _rewritten(["retile{size=TILE,value=32}", *STEPS])
    ptx = nvcc_sm90(emit(out, loaded.bound, "cuda"), tmp_path, ptx=True)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
    assert "cvt.rna.tf32.f32" in ptx  # the rounding is one instruction there


@pytest.mark.cuda
def test_on_the_gpu_matches_the_reference():
    """On an NVIDIA GPU (the asm path), at the default and a larger size."""
    from kir.backends.mlx_runner import MLXKernel, available_targets

    if "cuda" not in available_targets():
        pytest.skip("needs MLX's CUDA back end on an NVIDIA GPU")
    for sizes in ({}, {"M": 512, "N": 384, "K": 1024}):
        loaded, out = _rewritten(STEPS, sizes)
        inputs = loaded.bound.make_inputs(5)
        want = loaded.bound.reference(copy_inputs(inputs))
        interp = run_interp(dataclasses.replace(loaded, kernel=out), copy_inputs(inputs))
        got = MLXKernel(emit(out, loaded.bound, "cuda"))(copy_inputs(inputs))
        tolerance = lambda o: loaded.bound.tolerance(loaded.bound.spec.args[o].dtype)  # noqa
        assert compare_outputs(got, want, tolerance).ok
        # The tensor cores' sums differ from numpy's only in order: far below TF32's error.
        assert np.abs(got["C"] - interp["C"]).max() < 1e-3 * np.abs(want["C"]).max() / 64


# ------------------------------------------------------------------------- refusals


def test_refused_on_metal_and_not_listed_without_products():
    loaded, mma = _rewritten(STEPS[:1], target="metal")
    ctx = RuleContext(target=TARGETS["metal"])
    result = RULE.rewrite(mma, "all", {}, ctx)
    assert isinstance(result, NotApplicable) and "Metal has no TF32" in result.reason
    assert RULE.candidates(loaded.kernel) == []
    with pytest.raises(UnsupportedError, match="Metal has no tf32"):
        _, tf32 = _rewritten(STEPS)
        emit(tf32, loaded.bound, "metal")


SHARED_OPERAND = """
kernel @square(A: f32* global const, C: f32* global) grid=("1", "1", "1") block=(32, 1, 1)
    shared_bytes=0 {
  matrix acc: f32m8x8 = fill 0.0
  matrix a: f32m8x8 = mload A[0] stride 8
  mma acc += a * a
  mstore C[0] stride 8 = acc
}
"""


def test_refused_when_one_fragment_is_both_operands():
    kernel = parse_kernel(SHARED_OPERAND)
    result = RULE.rewrite(kernel, "all", {}, RuleContext(target=TARGETS["cuda"]))
    assert isinstance(result, NotApplicable) and "two roles" in result.reason
