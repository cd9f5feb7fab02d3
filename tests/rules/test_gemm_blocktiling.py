"""GEMMs recognised by what they compute (kir.rewrites.matmul.by_function): a GEMM tutorial's
1-D and 2-D blocktiling kernels (tests/rules/data/sgemm_1d_blocktiling.cu: TM results a thread
in a register array, the dot loop outside the result loop, operands walked by pointers the k
loop advances, no bounds checks; sgemm_2d_blocktiling.cu: TM x TN results from operands staged
in registers) have no ``acc += a * b`` loop for warp-tile-matmul's loop readers, and are
offered whole: its roles come from the spec (A, B, C; M, N, K; alpha and beta) and its
function from runs on the interpreter. Rebuilt warp-tiled it is right at the spec's sizes and
at others (the rebuilt kernel checks every bound), on the interpreter, on both emulated
targets and compiled by nvcc; kernels that compute something else are refused."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from kir.backends import TARGETS, emit
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import RUNNERS, check_on_target, copy_inputs, run_interp
from kir.rules import apply_trace, context_for, parse_step
from kir.rewrites.matmul.by_function import recognize
from kir.spec.compare import compare_outputs
from tests.nvcc_build import nvcc_sm90

DATA = Path(__file__).parent / "data"
KERNEL = DATA / "sgemm_1d_blocktiling.cu"
KERNELS = [KERNEL, DATA / "sgemm_2d_blocktiling.cu"]
REGISTRY = load_registry(plugins=False)
STEP = "warp-tile-matmul{loop=kernel,config=64x64x16/2x2,stages=1}"
# Per kernel: whole tiles of the original (its only sizes) and sizes it cannot do (M, N not
# multiples of its block tile; the launch's grid still at least one block): the rebuilt
# kernel checks every bound.
SIZES = {KERNELS[0]: [{}, {"M": 64, "N": 192, "K": 16}, {"M": 100, "N": 70, "K": 45}],
         KERNELS[1]: [{}, {"M": 256, "N": 128, "K": 16}, {"M": 130, "N": 200, "K": 45}]}


def _rebuilt(steps, target="cuda", path=KERNEL):
    loaded = load_kernel(path)
    ctx = context_for(loaded, TARGETS[target])
    return loaded, apply_trace(loaded.kernel, [parse_step(s, REGISTRY) for s in steps],
                               REGISTRY, ctx, strict=True).kernel


def _agrees(path, kernel, sizes, runner=run_interp) -> None:
    sized = load_kernel(path, sizes=sizes)
    bound = sized.bound
    inputs = bound.make_inputs(5)
    want = bound.reference(copy_inputs(inputs))
    got = runner(dataclasses.replace(sized, kernel=kernel), copy_inputs(inputs))
    result = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    assert result.ok, (sizes, result.describe())


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("target", ["interp", "emulate-metal"])
def test_the_kernel_as_written_computes_the_gemm(path, target):
    outcome = check_on_target(load_kernel(path), target)
    assert outcome.reference_name == "reference gemm_refs:gemm_ab"
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_it_is_offered_whole_and_recognised_with_its_scalars(path):
    loaded = load_kernel(path)
    ctx = context_for(loaded, TARGETS["cuda"])
    assert list(REGISTRY["warp-tile-matmul"].sites(loaded.kernel, ctx)) == ["kernel"]
    nest = recognize(loaded.kernel, ctx)
    assert not nest.refusal and (nest.m_param, nest.n_param) == ("M", "N")
    assert (nest.gemm.a, nest.gemm.b, nest.gemm.lda, nest.gemm.ldb) == ("A", "B", "K", "N")
    # C = alpha * A·B + beta * C: both scalars found, read by the epilogue
    epilogue = {n.name for s in nest.epilogue for n in s.walk() if hasattr(n, "name")}
    assert {"alpha", "beta"} <= epilogue


@pytest.mark.parametrize("steps", [[STEP], [STEP, "tf32-matrix{at=all}"],
                                   ["warp-tile-matmul{loop=kernel,config=128x128x16/2x4,"
                                    "stages=2}"]], ids=["f32", "tf32", "pipelined"])
@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_rebuilt_warp_tiled_it_is_right_at_other_sizes(path, steps):
    _, out = _rebuilt(steps, path=path)
    for sizes in SIZES[path]:
        _agrees(path, out, sizes)


def test_rebuilt_on_both_emulated_targets():
    from kir.backends.emulate import emulator_available

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    for target in ("cuda", "metal"):
        _, out = _rebuilt([STEP], target)
        _agrees(KERNEL, out, SIZES[KERNEL][2], RUNNERS[f"emulate-{target}"])


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_rebuilt_on_tensor_cores_compiles_for_sm90(tmp_path):
    loaded, out = _rebuilt([STEP, "tf32-matrix{at=all}"])
    ptx = nvcc_sm90(emit(out, loaded.bound, "cuda"), tmp_path, ptx=True)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx


def test_a_kernel_computing_something_else_is_refused(tmp_path):
    """The same kernel scaling its products by a constant: not alpha·A·B + beta·C for any of
    its scalars, so not rebuilt into a GEMM."""
    source = KERNEL.read_text().replace("* tmpB;", "* tmpB * 0.5f;")
    assert source != KERNEL.read_text()
    (tmp_path / "half.cu").write_text(source)
    (tmp_path / "half.kir.toml").write_text(
        (DATA / "sgemm_1d_blocktiling.kir.toml").read_text()
        .replace('"gemm_refs:gemm_ab"', '"gemm_refs_copy:gemm_ab"'))
    (tmp_path / "gemm_refs_copy.py").write_text((DATA / "gemm_refs.py").read_text())
    loaded = load_kernel(tmp_path / "half.cu")
    nest = recognize(loaded.kernel, context_for(loaded, TARGETS["cuda"]))
    assert nest.gemm is None and "not alpha·A·B + beta·C" in nest.refusal
