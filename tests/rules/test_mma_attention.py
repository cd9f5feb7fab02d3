"""mma-attention: six attention kernels written differently (FlashAttention-1's tile loops,
the same with the row loop outside, one thread a query row walking the keys twice with exp2,
a causal one over [B, T, NH, HS] with a grid-stride loop and the online softmax, one over
half buffers with a warp a query row, grouped-query attention) rebuilt as
FlashAttention-2 on 8x8 fragments at every block shape, right at sizes other than the ones
rewritten at (ragged, tiny) on the interpreter, emitted for CUDA (f32, TF32, 3xTF32)
and Metal on the CPU emulator; kernels that compute something else are refused, never
rebuilt; the target's limits; the hints."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from loop_sizes import EXAMPLES

from kir.backends import TARGETS
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import copy_inputs, reference_outputs, run_interp
from kir.ir import MatrixMultiplyAccumulate
from kir.rules import NotApplicable, RuleContext, apply_trace, context_for, parse_step
from kir.rewrites.attention.mma_attention import CONFIGS, RULES
from kir.rewrites.attention.recognize import looks_like_attention
from kir.rewrites.attention.template import parse_config
from kir.ir.printer import print_kernel
from kir.search.hints import hints
from kir.spec.compare import compare_outputs

RULE = RULES[0]
REGISTRY = load_registry(plugins=False)
DATA = Path(__file__).parent / "data"
KERNELS = {EXAMPLES / "flash_attn.cu": [{"H": 2, "N": 200}, {"H": 1, "N": 5}],
           DATA / "flash_attn_rows.cu": [{"H": 2, "N": 100}, {"H": 1, "N": 33}],
           DATA / "attention_two_pass.cu": [{"BH": 3, "N": 100}, {"BH": 1, "N": 7}],
           # Causal, [B, T, NH, HS], a grid-stride loop, the online softmax a thread a row.
           DATA / "attention_causal_bthd.cu": [{"B": 2, "T": 77, "NH": 3}, {"B": 1, "T": 9,
                                                                           "NH": 1}],
           # Half buffers computed in float, a warp a query row, dot products by shuffles.
           DATA / "attention_half_warp.cu": [{"BH": 3, "N": 77}, {"BH": 1, "N": 6}],
           # Grouped-query: K and V with fewer heads, each serving consecutive query heads.
           DATA / "attention_gqa.cu": [{"B": 2, "H": 6, "HKV": 3, "N": 77},
                                       {"B": 1, "H": 4, "HKV": 1, "N": 9}]}


def _rewritten(path: Path, steps: list[str], target: str = "cuda"):
    loaded = load_kernel(path)
    trace = [parse_step(s, REGISTRY) for s in steps]
    ctx = context_for(loaded, TARGETS[target])
    return apply_trace(loaded.kernel, trace, REGISTRY, ctx, strict=True).kernel


def _agrees(path: Path, kernel, sizes: dict, runner=None) -> None:
    """``kernel`` (rewritten at the spec's sizes) gives the reference's results at ``sizes``
    (the original on the interpreter where the spec names none)."""
    sized = load_kernel(path, sizes=sizes)
    bound = sized.bound
    inputs = bound.make_inputs(3)
    want, _ = reference_outputs(sized, copy_inputs(inputs))
    got = (runner or run_interp)(dataclasses.replace(sized, kernel=kernel), copy_inputs(inputs))
    result = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    assert result.ok, (path.name, sizes, result.describe())


# Every block shape on the example; two (one warp of 16 rows, warps of 8 rows) on the others.
SHAPES = [(EXAMPLES / "flash_attn.cu", c) for c in CONFIGS] + [
    (path, c) for path in list(KERNELS)[1:] for c in ("32x32/2", "64x16/4")]


@pytest.mark.parametrize("path,config", SHAPES, ids=lambda v: getattr(v, "stem", v))
def test_every_block_shape_is_right_at_other_sizes(path, config):
    out = _rewritten(path, [f"mma-attention{{at=kernel,config={config}}}"])
    cfg = parse_config(config)
    assert out.launch.block == (cfg.threads, 1, 1)
    assert out.launch.grid[0].startswith("ceil(") and f"/ {cfg.rows})" in out.launch.grid[0]
    products = [n for n in out.body.walk() if isinstance(n, MatrixMultiplyAccumulate)]
    # Per warp and key step: S (row fragments x key fragments x d/8), P·V (the same count).
    assert len(products) == 2 * cfg.row_frags * (cfg.keys // 8) * 8
    for sizes in KERNELS[path]:
        _agrees(path, out, sizes)


def test_flash_attention_1s_row_statistics_are_written_too():
    """The example also leaves each row's maximum (m) and sum (l): the rebuilt kernel writes
    them, and the reference checks all three outputs."""
    out = _rewritten(EXAMPLES / "flash_attn.cu", ["mma-attention{at=kernel,config=32x32/2}"])
    stored = {n.buffer for n in out.body.walk() if type(n).__name__ == "Store"}
    assert {"O", "l", "m"} <= stored


@pytest.mark.parametrize("path", list(KERNELS), ids=lambda p: p.stem)
def test_emitted_for_both_targets_on_the_emulator(path):
    """CUDA in f32, on TF32 and on 3xTF32 (the portable path of the helpers), Metal's
    SIMD-group matrices, at a ragged size, through the C++ CPU emulator."""
    from kir.backends.emulate import emulator_available
    from kir.driver.runners import RUNNERS

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    step = "mma-attention{at=kernel,config=32x32/2}"
    for target, steps in (("cuda", [step]), ("cuda", [step, "tf32x3-matrix{at=all}"]),
                          ("metal", [step])):
        out = _rewritten(path, steps, target)
        _agrees(path, out, KERNELS[path][0], RUNNERS[f"emulate-{target}"])


def test_tf32_products_change_results_within_tf32s_bounds():
    """On TF32 the scores lose precision past the default f32 tolerance (the spec decides),
    split in three they do not."""
    path = EXAMPLES / "flash_attn.cu"
    sized = load_kernel(path, sizes={"H": 1, "N": 64})
    inputs = sized.bound.make_inputs(0)
    want = sized.bound.reference(copy_inputs(inputs))
    errors, verdicts = {}, {}
    for rule in ("tf32-matrix", "tf32x3-matrix"):
        out = _rewritten(path, ["mma-attention{at=kernel,config=64x32/4}", f"{rule}{{at=all}}"])
        got = run_interp(dataclasses.replace(sized, kernel=out), copy_inputs(inputs))
        errors[rule] = float(abs(got["O"] - want["O"]).max())
        verdicts[rule] = compare_outputs(got, want, lambda o: sized.bound.tolerance(
            sized.bound.spec.args[o].dtype)).ok
    assert verdicts == {"tf32-matrix": False, "tf32x3-matrix": True}, errors
    assert errors["tf32-matrix"] < 1e-2 and errors["tf32x3-matrix"] * 100 < errors["tf32-matrix"]


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    source = (EXAMPLES / "flash_attn.cu").read_text()
    assert old in source
    (tmp_path / "fa.cu").write_text(source.replace(old, new))
    (tmp_path / "fa.kir.toml").write_text((EXAMPLES / "flash_attn.kir.toml").read_text())
    (tmp_path / "refs.py").write_text((EXAMPLES / "refs.py").read_text())
    return tmp_path / "fa.cu"


def test_a_causal_mask_is_kept():
    """Keys after the query masked: rebuilt causal, the key tiles past each block's last
    query skipped (checked against the masked reference above at every shape)."""
    out = _rewritten(DATA / "attention_causal_bthd.cu", ["mma-attention{at=kernel,config=32x32/2}"])
    assert "min(T, fa_row0 + 32)" in print_kernel(out)


@pytest.mark.parametrize("old,new", [
    # FlashAttention-1 masked causally as written: a row whose whole key tile is masked
    # takes exp(-inf - -inf), NaN. Not attention (and not rebuilt into a kernel that is).
    ("if (j * Bc + y >= N) {", "if (j * Bc + y >= N || j * Bc + y > q_row) {"),
    # A bias growing with the key (ALiBi-like): not softmax of the scaled scores.
    ("sum *= softmax_scale;", "sum = sum * softmax_scale + 0.05f * y;"),
    # The scores squared before the softmax.
    ("sum *= softmax_scale;", "sum *= softmax_scale * sum;"),
])
def test_kernels_computing_something_else_are_refused(tmp_path, old, new):
    loaded = load_kernel(_variant(tmp_path, old, new))
    assert looks_like_attention(loaded.kernel)  # the shape is there; the function is not
    result = RULE.rewrite(loaded.kernel, "kernel", {"config": "32x32/2"}, context_for(loaded))
    assert isinstance(result, NotApplicable)
    assert "not softmax(scale * Q K^T) V" in result.reason


def test_without_a_spec_it_is_not_offered():
    loaded = load_kernel(EXAMPLES / "flash_attn.cu")
    assert RULE.sites(loaded.kernel, context_for(loaded)) == ["kernel"]
    assert RULE.sites(loaded.kernel, RuleContext()) == []


def test_not_offered_for_kernels_that_are_not_attention():
    for name in ("softmax.cu", "sgemm.cu", "layernorm.cu", "reduce.cu"):
        loaded = load_kernel(EXAMPLES / name)
        assert RULE.sites(loaded.kernel, context_for(loaded)) == [], name


def test_over_metal_threadgroup_memory_is_refused():
    """64 query rows and 32 keys a step take 35 KB of shared memory: over Metal's 32 KB."""
    loaded = load_kernel(EXAMPLES / "flash_attn.cu")
    result = RULE.rewrite(loaded.kernel, "kernel", {"config": "64x32/4"},
                          context_for(loaded, TARGETS["metal"]))
    assert isinstance(result, NotApplicable) and "does not verify" in result.reason
    assert not isinstance(RULE.rewrite(loaded.kernel, "kernel", {"config": "64x32/4"},
                                       context_for(loaded, TARGETS["cuda"])), NotApplicable)


def test_hints_put_it_first_for_every_style():
    for path in KERNELS:
        loaded = load_kernel(path)
        cuda = hints(loaded.kernel, REGISTRY, context_for(loaded, TARGETS["cuda"]))
        assert [s.rule for s in cuda[0].steps[:2]] == [RULE.name, "tf32-matrix"], path.name
        assert any([s.rule for s in h.steps[:2]] == [RULE.name, "tf32x3-matrix"] for h in cuda)
        if path.stem.startswith("flash"):
            continue  # Metal's hints for the FlashAttention-1 kernels take seconds each
        metal = hints(loaded.kernel, REGISTRY, context_for(loaded, TARGETS["metal"]))
        # No TF32 on Metal, and 64 rows a block do not fit: the f32 shapes that do.
        assert metal[0].name == "mma-attention-32x32/2", path.name
        assert not any("tf32" in h.name for h in metal)


@pytest.mark.cuda
@pytest.mark.parametrize("path", list(KERNELS), ids=lambda p: p.stem)
def test_on_the_gpu_matches_the_reference(path):
    """The tensor-core path (paired mma.sync in TF32 and 3xTF32, float4 tile copies, the
    online softmax's shuffles) on an NVIDIA GPU at a ragged size, each kernel through MLX."""
    for precision, tolerance in (("tf32x3", None), ("tf32", (2e-2, 2e-3))):
        gpu_matches_reference(path, ["mma-attention{at=kernel,config=64x32/4}",
                                     f"{precision}-matrix{{at=all}}"], tolerance)


def gpu_matches_reference(path: Path, steps: list[str], tolerance=None) -> None:
    """``steps`` on the kernel at ``path``, run through MLX on an NVIDIA GPU at its first
    test size, give the reference's results (within ``tolerance``, default the spec's)."""
    from kir.backends import emit
    from kir.backends.mlx_runner import MLXKernel, available_targets

    if "cuda" not in available_targets():
        pytest.skip("needs MLX's CUDA back end on an NVIDIA GPU")
    sized = load_kernel(path, sizes=KERNELS[path][0])
    inputs = sized.bound.make_inputs(4)
    want, _ = reference_outputs(sized, copy_inputs(inputs))
    got = MLXKernel(emit(_rewritten(path, steps), sized.bound, "cuda"))(copy_inputs(inputs))
    result = compare_outputs(got, want, lambda o: tolerance or sized.bound.tolerance(
        sized.bound.spec.args[o].dtype))
    assert result.ok, (steps, result.describe())


def test_it_ignores_the_tile_counts_but_not_a_head_dimension_that_may_change(tmp_path):
    """The rebuilt kernel reads N and the scale, not the example's tile counts (Tc, Tr, Bc,
    Br) and head dimension (d): it declares them ignored (``Launch.ignores``), so it is
    validated and used at every size, where the head dimension is fixed (sizing the shared
    memory, or a number in the shape). Where the spec lets D change, d is baked in: the
    kernel is specialized to the compiled sizes."""
    from kir.api.modules import is_specialized

    loaded = load_kernel(EXAMPLES / "flash_attn.cu")
    out = RULE.rewrite(loaded.kernel, "kernel", {"config": "32x32/2"}, context_for(loaded))
    assert out.launch.ignores == ("Bc", "Br", "Tc", "Tr", "d")
    assert not is_specialized(out, loaded.kernel)
    causal = load_kernel(DATA / "attention_causal_bthd.cu")
    out = RULE.rewrite(causal.kernel, "kernel", {"config": "32x32/2"}, context_for(causal))
    assert out.launch.ignores == ("B", "NH") and not is_specialized(out, causal.kernel)
    spec = (EXAMPLES / "flash_attn.kir.toml").read_text()
    path = _variant(tmp_path, "int tx = threadIdx.x;", "int tx = threadIdx.x;")
    (tmp_path / "fa.kir.toml").write_text(spec.replace("(3 * T * D + T * T) * 4",
                                                       "(3 * T * 64 + T * T) * 4"))
    free = load_kernel(path)
    out = RULE.rewrite(free.kernel, "kernel", {"config": "32x32/2"}, context_for(free))
    assert "d" not in out.launch.ignores and is_specialized(out, free.kernel)


def test_a_kernel_the_interpreter_fails_on_is_refused_not_raised(monkeypatch):
    """Recognition runs the kernel; a failure there (here a stand-in for an interpreter bug,
    as the u64 address one was) refuses the site instead of stopping the search."""
    import kir.interp
    from kir.rewrites.attention import recognize as recognition

    def broken(*args, **kwargs):
        raise TypeError("stand-in for an interpreter bug")

    monkeypatch.setattr(kir.interp, "run_kernel", broken)
    monkeypatch.setattr(recognition, "_CACHE", {})
    loaded = load_kernel(DATA / "attention_two_pass.cu")
    result = RULE.rewrite(loaded.kernel, "kernel", {"config": "32x32/2"}, context_for(loaded))
    assert isinstance(result, NotApplicable)
    assert "failed: TypeError: stand-in for an interpreter bug" in result.reason
