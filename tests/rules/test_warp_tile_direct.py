"""warp-tile-matmul on GEMMs with no tiles (one element of C per thread, the dot product
straight from global memory): the GEMM tutorial's naive kernel (rows along x, alpha/beta
epilogue) and its coalesced one (a 1-D block indexed x / 16, x % 16), a dense layer whose sum
starts from its bias, a column-major (BLAS-convention) SGEMM, a batched one along blockIdx.z,
a linear layer's (weight stored transposed, bias epilogue) rebuilt at every
block tile, right at ragged, whole-tile and tiny sizes on the interpreter, on both emulated
targets; the hints; and kernels that are not exactly a GEMM refused."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from loop_sizes import same_outputs

from kir.backends import TARGETS, emit
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import copy_inputs, run_interp
from kir.rewrites.matmul.warp_tile_matmul import CONFIGS, RULES
from kir.rules import NotApplicable, apply_trace, context_for, parse_step
from kir.search.hints import hints
from kir.spec.compare import compare_outputs
from tests.nvcc_build import nvcc_sm90

RULE = RULES[0]
REGISTRY = load_registry(plugins=False)
ROOT = Path(__file__).parents[1]
TUTORIAL = (ROOT / "corpus" / "gemm_tutorial.cu", ROOT / "corpus" / "gemm_tutorial.naive.kir.toml",
            "M", "N", "K")
# The tutorial's second kernel: a 1-D block of 16·16 threads, row = threadIdx.x / 16.
COALESCED = (ROOT / "corpus" / "gemm_tutorial.cu",
             ROOT / "corpus" / "gemm_tutorial.coalesce.kir.toml", "M", "N", "K")
LINEAR = (ROOT / "rules" / "data" / "linear_naive.cu", None, "BT", "OC", "C")
# Row pointers, `b ? b[o] : 0`, and the sum started from the bias.
DENSE = (ROOT / "rules" / "data" / "dense_bias_first.cu", None, "R", "O", "I")
# BLAS's convention: A, B and C stored by columns, leading dimensions as parameters.
COLMAJOR = (ROOT / "rules" / "data" / "sgemm_colmajor.cu", None, "M", "N", "K")
# A batch of products along blockIdx.z (bmm), its batch index a local the store reads.
BMM = (ROOT / "rules" / "data" / "bmm_naive.cu", None, "M", "N", "K")
KERNELS = [TUTORIAL, COALESCED, LINEAR, DENSE, COLMAJOR, BMM]
IDS = ["tutorial-naive", "tutorial-coalesced", "linear-naive", "dense-bias-first", "colmajor",
       "bmm"]


def _sizes(kernel, m: int, n: int, k: int) -> dict[str, int]:
    return dict(zip(kernel[2:], (m, n, k)))


def _load(kernel, sizes: dict | None = None):
    path, spec, *_ = kernel
    return load_kernel(path, spec_path=spec, sizes=sizes or {}) if spec else \
        load_kernel(path, sizes=sizes or {})


def _rewritten(kernel, steps: list[str], target: str = "cuda"):
    loaded = _load(kernel)
    trace = [parse_step(s, REGISTRY) for s in steps]
    return apply_trace(loaded.kernel, trace, REGISTRY, context_for(loaded, TARGETS[target]),
                       strict=True).kernel


def _agrees(kernel, out, sizes: dict, runner=None) -> None:
    sized = _load(kernel, sizes)
    inputs = sized.bound.make_inputs(2)
    want = sized.bound.reference(copy_inputs(inputs))
    got = (runner or run_interp)(dataclasses.replace(sized, kernel=out), copy_inputs(inputs))
    result = compare_outputs(got, want, lambda o: sized.bound.tolerance(
        sized.bound.spec.args[o].dtype))
    assert result.ok, (kernel[0].name, sizes, result.describe())


# Three block tiles a kernel, in turn, so that every tile meets some kernel (the examples'
# two GEMMs take every tile each in test_warp_tile_matmul.py); the full cross product cost
# 36 s of CI's 9 minutes and found nothing the turns do not.
TURNS = [(kernel, CONFIGS[(3 * i + j) % len(CONFIGS)], f"{name}-{j}")
         for i, (kernel, name) in enumerate(zip(KERNELS, IDS)) for j in range(3)]
assert {config for _, config, _ in TURNS} == set(CONFIGS)


@pytest.mark.parametrize("kernel,config", [t[:2] for t in TURNS], ids=[t[2] for t in TURNS])
def test_every_block_tile_is_right_at_other_sizes(kernel, config):
    out = _rewritten(kernel, [f"warp-tile-matmul{{loop=L0,config={config}}}"])
    for m, n, k in ((33, 97, 65), (136, 264, 40), (1, 5, 3)):
        _agrees(kernel, out, _sizes(kernel, m, n, k))


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_both_emulated_targets_and_the_hints(kernel):
    from kir.backends.emulate import emulator_available
    from kir.driver.runners import RUNNERS

    loaded = _load(kernel)
    found = hints(loaded.kernel, REGISTRY, context_for(loaded, TARGETS["cuda"]))
    assert found[0].name.startswith("warp-tiled-matmul") and found[0].steps[0].rule == RULE.name
    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    # (The template's plain f32 CUDA is emulated in test_warp_tile_matmul.py: each target
    # costs a C++ compile, so this checks CUDA through its tensor-core path, and Metal.)
    step = "warp-tile-matmul{loop=L0,config=32x64x16/1x2}"
    for target, steps in (("cuda", [step, "tf32x3-matrix{at=all}"]), ("metal", [step])):
        out = _rewritten(kernel, steps, target)
        for m, n, k in ((33, 97, 65), (64, 128, 48)):
            _agrees(kernel, out, _sizes(kernel, m, n, k), RUNNERS[f"emulate-{target}"])


NOT_A_GEMM = [
    ("for (int c = 0; c < C; c++)", "for (int c = 0; c < C - 1; c++)", "does not count"),
    ("float val = 0.0f;", "float val = 0.0f; val = val + 1.0f;", "more before its dot product"),
    ("inp[bt * C + c]", "inp[bt * C + c + 1]", "the loads are not"),
    ("weight[oc * C + c]", "weight[oc * C + 2 * c]", "the loads are not"),
    ("if (bt < BT && oc < OC)", "if (bt < BT)", "the guard is not"),
    ("int bt = blockIdx.y * blockDim.y + threadIdx.y;",
     "int bt = blockIdx.x * blockDim.y + threadIdx.y;", "not block * blockDim + thread"),
]


@pytest.mark.parametrize("old,new,reason", NOT_A_GEMM, ids=[r for _, _, r in NOT_A_GEMM])
def test_kernels_that_are_not_exactly_a_gemm_are_refused(tmp_path, old, new, reason):
    path, _, *_ = LINEAR
    source = path.read_text()
    assert old in source
    (tmp_path / "lin.cu").write_text(source.replace(old, new))
    (tmp_path / "lin.kir.toml").write_text(path.with_suffix(".kir.toml").read_text())
    (tmp_path / "gemm_refs.py").write_text((path.parent / "gemm_refs.py").read_text())
    loaded = load_kernel(tmp_path / "lin.cu")
    result = RULE.rewrite(loaded.kernel, "L0", {"config": "64x64x16/2x2"},
                          context_for(loaded, TARGETS["cuda"]))
    assert isinstance(result, NotApplicable) and reason in result.reason, result


EARLY_EXIT = """
// The same layer written with an early exit and the row along x (training-code style).
__global__ void linear_forward_naive(float* out, const float* inp, const float* weight,
                                     const float* bias, int BT, int C, int OC) {
    const int bt = blockIdx.x * blockDim.x + threadIdx.x;
    const int oc = blockIdx.y * blockDim.y + threadIdx.y;
    if (bt >= BT || oc >= OC) return;
    float val = 0.0f;
    for (int c = 0; c < C; ++c) val += inp[bt * C + c] * weight[oc * C + c];
    out[bt * OC + oc] = val + bias[oc];
}
"""


def test_an_early_exit_guard_is_read_as_the_guard(tmp_path):
    path, _, *_ = LINEAR
    (tmp_path / "lin.cu").write_text(EARLY_EXIT)
    spec = path.with_suffix(".kir.toml").read_text().replace(
        'grid = ["ceil(OC / 32)", "ceil(BT / 8)"], block = [32, 8]',
        'grid = ["ceil(BT / 8)", "ceil(OC / 8)"], block = [8, 8]')
    (tmp_path / "lin.kir.toml").write_text(spec)
    (tmp_path / "gemm_refs.py").write_text((path.parent / "gemm_refs.py").read_text())
    early = (tmp_path / "lin.cu", None, "BT", "OC", "C")
    out = _rewritten(early, ["warp-tile-matmul{loop=L0,config=64x64x16/2x2}"])
    for m, n, k in ((33, 97, 65), (136, 264, 40)):
        _agrees(early, out, _sizes(early, m, n, k))
    # Exiting on one bound only leaves the other unchecked: not this shape.
    (tmp_path / "lin.cu").write_text(EARLY_EXIT.replace("bt >= BT || oc >= OC", "bt >= BT"))
    loaded = load_kernel(tmp_path / "lin.cu")
    result = RULE.rewrite(loaded.kernel, "L0", {"config": "64x64x16/2x2"},
                          context_for(loaded, TARGETS["cuda"]))
    assert isinstance(result, NotApplicable) and "guard" in result.reason


def test_a_1d_block_mapping_two_outputs_to_one_thread_index_is_refused(tmp_path):
    """Row and column both from ``threadIdx.x / 16``: threads would share elements."""
    path, spec, *_ = COALESCED
    source = path.read_text()
    old = "const int cCol = blockIdx.y * BLOCKSIZE + (threadIdx.x % BLOCKSIZE);"
    assert old in source
    (tmp_path / "g.cu").write_text(source.replace(old, old.replace("%", "/")))
    (tmp_path / "refs.py").write_text((path.parent / "refs.py").read_text())
    loaded = load_kernel(tmp_path / "g.cu", spec_path=spec)
    result = RULE.rewrite(loaded.kernel, "L0", {"config": "64x64x16/2x2"},
                          context_for(loaded, TARGETS["cuda"]))
    assert isinstance(result, NotApplicable) and "grid axes" in result.reason, result


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_transposed_operands_compile_to_tensor_core_code_for_sm90(tmp_path):
    """Both operands stored transposed (the column-major SGEMM) on TF32: the A and B
    fragments load across the tiles' rows, and the kernel builds with paired mma."""
    loaded = _load(COLMAJOR)
    out = _rewritten(COLMAJOR, ["warp-tile-matmul{loop=L0,config=64x64x16/2x2}",
                                "tf32-matrix{at=all}"])
    e = emit(out, loaded.bound, "cuda")
    assert "kir_tf32_load_a(" in e.source and ", true);" in e.source
    ptx = nvcc_sm90(e, tmp_path, ptx=True)
    assert ptx.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 16


def test_a_batch_offset_that_is_not_block_z_times_sizes_is_refused(tmp_path):
    path = BMM[0]
    source = path.read_text()
    old = "A[(b * M + i) * K + p]"
    assert old in source
    (tmp_path / "bmm.cu").write_text(source.replace(old, "A[(b * M + i) * K + p + b * p]"))
    (tmp_path / "bmm.kir.toml").write_text(path.with_suffix(".kir.toml").read_text())
    (tmp_path / "gemm_refs.py").write_text((path.parent / "gemm_refs.py").read_text())
    loaded = load_kernel(tmp_path / "bmm.cu")
    result = RULE.rewrite(loaded.kernel, "L0", {"config": "64x64x16/2x2"},
                          context_for(loaded, TARGETS["cuda"]))
    assert isinstance(result, NotApplicable) and "batch offset" in result.reason, result


def test_an_epilogue_that_rescales_the_sum_after_a_bias_start(tmp_path):
    """``s`` starts from the bias and the epilogue writes it (``s = s * 0.5f``) before
    storing it: the bias is added once, before the epilogue's own statements, and the
    rescaled sum stored — the same outputs as the original at ragged and whole-tile sizes."""
    path = DENSE[0]
    source = path.read_text()
    old = "        y[r * out_dim + o] = s;"
    assert old in source
    (tmp_path / "d.cu").write_text(source.replace(old, "        s = s * 0.5f;\n" + old))
    (tmp_path / "d.kir.toml").write_text(path.with_suffix(".kir.toml").read_text())
    (tmp_path / "gemm_refs.py").write_text((path.parent / "gemm_refs.py").read_text())
    loaded = load_kernel(tmp_path / "d.cu")
    out = RULE.rewrite(loaded.kernel, "L0", {"config": "64x64x16/2x2"},
                       context_for(loaded, TARGETS["cuda"]))
    assert not isinstance(out, NotApplicable), out.reason
    rng = np.random.default_rng(3)
    for rows, ins, outs in ((33, 65, 97), (136, 40, 264)):
        args = {"x": rng.uniform(-1, 1, rows * ins).astype(np.float32),
                "w": rng.uniform(-1, 1, outs * ins).astype(np.float32),
                "b": rng.uniform(-1, 1, outs).astype(np.float32),
                "y": np.zeros(rows * outs, np.float32),
                "rows": rows, "in_dim": ins, "out_dim": outs}
        sizes = {"R": rows, "I": ins, "O": outs}
        assert same_outputs(loaded.kernel, out, args, sizes)
