"""GEMMs recognised by what they compute (kir.rewrites.matmul.by_function): the GEMM
tutorial's 1-D and 2-D blocktiling kernels of kir's corpus (tests/corpus/gemm_tutorial.cu:
a thread's TM, or TM x TN, results in a register array, the dot loop outside the result loop,
operands walked by pointers the k loop advances, no bounds checks) have no ``acc += a * b``
loop for warp-tile-matmul's loop readers, and are offered whole; its float4-tile kernel has
one, in a block the loop readers refuse. Their roles come from the
spec (A, B, C; M, N, K; alpha and beta) and their function from runs on the interpreter.
Rebuilt warp-tiled they are right at the spec's sizes and at others (the rebuilt kernel checks
every bound), on the interpreter, on both emulated targets and compiled by nvcc; a kernel that
computes something else is refused."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from kir.backends import TARGETS, emit
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import RUNNERS, copy_inputs, run_interp
from kir.rules import apply_trace, context_for, parse_step
from kir.rewrites.matmul.by_function import recognize
from kir.spec.compare import compare_outputs
from tests.nvcc_build import nvcc_sm90

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
SOURCE = CORPUS / "gemm_tutorial.cu"
SPECS = {"1d": CORPUS / "gemm_tutorial.blocktiling_1d.kir.toml",
         "2d": CORPUS / "gemm_tutorial.blocktiling_2d.kir.toml",
         # float4 tile loads into a 1-D block: an inner-product loop the loop readers refuse
         # (they need a square 2-D block), so recognised by what it computes too
         "vectorize": CORPUS / "gemm_tutorial.vectorize.kir.toml"}
SCALARS = {"1d": {"alpha", "beta"}, "2d": {"alpha", "beta"}, "vectorize": set()}
REGISTRY = load_registry(plugins=False)
STEP = "warp-tile-matmul{loop=kernel,config=32x64x16/1x2,stages=1}"
SITES = {"1d": "kernel", "2d": "kernel", "vectorize": "L1"}
# The spec's sizes, its ragged ones (whole tiles: the originals' only sizes) and sizes the
# originals cannot do (K not a multiple of their k tile; the specs' grids need M and N to be
# multiples of 32), each unlike the rebuilt kernel's 32 x 64 or 64 x 64 block tile.
OTHER_SIZES = [{}, {"ragged": True}, {"M": 96, "N": 32, "K": 36}]


def _load(which: str, sizes: dict | None = None):
    if sizes and sizes.get("ragged"):  # the spec's own ragged sizes
        sizes = dict(_load(which).spec.ragged)
    return load_kernel(SOURCE, spec_path=SPECS[which], sizes=sizes or {})


def _rebuilt(which: str, steps: list[str], target: str = "cuda"):
    steps = [step.replace("loop=kernel", f"loop={SITES[which]}") for step in steps]
    loaded = _load(which)
    ctx = context_for(loaded, TARGETS[target])
    return loaded, apply_trace(loaded.kernel, [parse_step(s, REGISTRY) for s in steps],
                               REGISTRY, ctx, strict=True).kernel


def _agrees(which: str, kernel, sizes: dict, runner=run_interp) -> None:
    sized = _load(which, sizes)
    bound = sized.bound
    inputs = bound.make_inputs(5)
    want = bound.reference(copy_inputs(inputs))
    got = runner(dataclasses.replace(sized, kernel=kernel), copy_inputs(inputs))
    result = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    assert result.ok, (which, sizes, result.describe())


@pytest.mark.parametrize("which", list(SPECS))
def test_it_is_offered_whole_and_recognised_with_its_scalars(which):
    loaded = _load(which)
    ctx = context_for(loaded, TARGETS["cuda"])
    sites = list(REGISTRY["warp-tile-matmul"].sites(loaded.kernel, ctx))
    assert sites == [SITES[which]]
    nest = recognize(loaded.kernel, ctx)
    assert not nest.refusal and (nest.m_param, nest.n_param) == ("M", "N")
    assert (nest.gemm.a, nest.gemm.b, nest.gemm.lda, nest.gemm.ldb) == ("A", "B", "K", "N")
    # C = alpha * A·B + beta * C: the scalars found (where it has them), read by the epilogue
    read = {n.name for s in nest.epilogue for n in s.walk() if hasattr(n, "name")}
    assert read & {"alpha", "beta"} == SCALARS[which]


@pytest.mark.parametrize("steps", [[STEP], ["warp-tile-matmul{loop=kernel,"
                                            "config=64x64x16/2x2,stages=2}"]],
                         ids=["one-stage", "pipelined"])
@pytest.mark.parametrize("which", list(SPECS))
def test_rebuilt_warp_tiled_it_is_right_at_other_sizes(which, steps):
    _, out = _rebuilt(which, steps)
    for sizes in OTHER_SIZES:
        _agrees(which, out, sizes)


def test_rebuilt_on_both_emulated_targets():
    from kir.backends.emulate import emulator_available

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    for target in ("cuda", "metal"):
        _, out = _rebuilt("2d", [STEP], target)
        _agrees("2d", out, OTHER_SIZES[2], RUNNERS[f"emulate-{target}"])


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_rebuilt_on_tensor_cores_compiles_for_sm90(tmp_path):
    """TF32 changes results beyond these specs' tolerance (1e-4): compiled, not compared."""
    loaded, out = _rebuilt("1d", [STEP, "tf32-matrix{at=all}"])
    ptx = nvcc_sm90(emit(out, loaded.bound, "cuda"), tmp_path, ptx=True)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx


def test_a_kernel_computing_something_else_is_refused(tmp_path):
    """The same kernel scaling its products by a constant: not alpha·A·B + beta·C for any of
    its scalars, so not rebuilt into a GEMM."""
    source = SOURCE.read_text()
    changed = source.replace("* BK + dotIdx] * tmpB;", "* BK + dotIdx] * tmpB * 0.5f;")
    assert changed != source
    (tmp_path / "gemm_tutorial.cu").write_text(changed)
    (tmp_path / "refs.py").write_text((CORPUS / "refs.py").read_text())
    spec = tmp_path / "blocktiling_1d.kir.toml"
    spec.write_text(SPECS["1d"].read_text())
    loaded = load_kernel(tmp_path / "gemm_tutorial.cu", spec_path=spec)
    nest = recognize(loaded.kernel, context_for(loaded, TARGETS["cuda"]))
    assert nest.gemm is None and "not alpha·A·B + beta·C" in nest.refusal
