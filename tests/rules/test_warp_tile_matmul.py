"""warp-tile-matmul: the matmul example and a differently-written alpha/beta GEMM (a #define'd
tile, if/else tile loads, the k loop stepping by the tile) rebuilt warp-tiled at every block
tile, right at sizes other than the ones rewritten at (ragged, larger), on the interpreter and
emitted for CUDA (also on TF32) and Metal on the CPU emulator; kernels that are not exactly a
GEMM are refused, never rebuilt into one; the target's limits; the hints."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from loop_sizes import EXAMPLES, same_outputs

from kir.backends import TARGETS, emit
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import check_on_target, copy_inputs, run_interp
from kir.ir import For, MatrixMultiplyAccumulate
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext, apply_trace, context_for, parse_step
from kir.rewrites.matmul.warp_tile_matmul import CONFIGS, RULES, parse_config
from kir.search.hints import hints
from kir.spec.compare import compare_outputs
from tests.nvcc_build import nvcc_sm90

RULE = RULES[0]
REGISTRY = load_registry(plugins=False)
DATA = Path(__file__).parent / "data"
KERNELS = [EXAMPLES / "sgemm.cu", DATA / "gemm_ab_ifelse.cu"]
# Ragged, larger, tiny; and one where every block tile has whole tiles (taken by the 16-byte
# copy) beside edge tiles (the scalar copy) in both M/N and K.
OTHER_SIZES = [{"M": 33, "N": 97, "K": 65}, {"M": 130, "N": 64, "K": 16}, {"M": 1, "N": 5, "K": 3},
               {"M": 136, "N": 264, "K": 40}]


def _rewritten(path: Path, steps: list[str], target: str = "cuda", sizes: dict | None = None):
    loaded = load_kernel(path, sizes=sizes or {})
    trace = [parse_step(s, REGISTRY) for s in steps]
    ctx = context_for(loaded, TARGETS[target])
    return loaded, apply_trace(loaded.kernel, trace, REGISTRY, ctx, strict=True).kernel


def _agrees(path: Path, kernel, sizes: dict, runner=None) -> None:
    """``kernel`` (rewritten at the spec's sizes) gives the reference's results at ``sizes``."""
    sized = load_kernel(path, sizes=sizes)
    bound = sized.bound
    inputs = bound.make_inputs(2)
    want = bound.reference(copy_inputs(inputs))
    rewritten = dataclasses.replace(sized, kernel=kernel)
    got = (runner or run_interp)(rewritten, copy_inputs(inputs))
    result = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    assert result.ok, (path.name, sizes, result.describe())


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("config", CONFIGS)
def test_every_block_tile_is_right_at_other_sizes(path, config):
    _, out = _rewritten(path, [f"warp-tile-matmul{{loop=L1,config={config}}}"])
    cfg = parse_config(config)
    assert out.launch.block == (cfg.threads, 1, 1) and not out.launch.specialized
    products = [n for n in out.body.walk() if isinstance(n, MatrixMultiplyAccumulate)]
    assert len(products) == cfg.frags_m * cfg.frags_n  # one per accumulator, per k step
    for sizes in OTHER_SIZES:
        _agrees(path, out, sizes)


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_emitted_for_both_targets_on_the_emulator(path):
    """CUDA in f32 and on TF32 (the portable path of the helpers), Metal's SIMD-group
    matrices, at a ragged size, through the C++ CPU emulator."""
    from kir.backends.emulate import emulator_available
    from kir.driver.runners import RUNNERS

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    step = "warp-tile-matmul{loop=L1,config=32x64x16/1x2}"
    for target, steps in (("cuda", [step]), ("cuda", [step, "tf32-matrix{at=all}"]),
                          ("metal", [step])):
        _, out = _rewritten(path, steps, target)
        for sizes in (OTHER_SIZES[0], {"M": 64, "N": 128, "K": 48}):  # ragged; whole tiles
            _agrees(path, out, sizes, RUNNERS[f"emulate-{target}"])
    sized = load_kernel(path)
    assert check_on_target(dataclasses.replace(sized, kernel=out), "emulate-metal").result.ok


def test_whole_tiles_are_copied_with_16_byte_loads_on_both_targets():
    for target, spelling in (("cuda", "(const float4*)"), ("metal", "(const device float4*)")):
        loaded, out = _rewritten(EXAMPLES / "sgemm.cu",
                                 ["warp-tile-matmul{loop=L1,config=64x64x16/2x2}"], target)
        source = emit(out, loaded.bound, target).source
        assert source.count(spelling) == 2, target  # one load of A, one of B
        assert "K % 4 == 0" in source.replace("kir_arg_K", "K")  # the stride condition


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_paired_tensor_core_products_compile_for_sm90(tmp_path):
    """Every product of the 64x64 tile (4x4 accumulators a warp) pairs with the one below it:
    half as many m16n8k8 instructions as products."""
    loaded, out = _rewritten(EXAMPLES / "sgemm.cu",
                             ["warp-tile-matmul{loop=L1,config=64x64x16/2x2}",
                              "tf32-matrix{at=all}"])
    e = emit(out, loaded.bound, "cuda")
    assert e.source.count("kir_tf32_mma2(") == 8 and "kir_tf32_mma(" not in e.source
    ptx = nvcc_sm90(e, tmp_path, ptx=True)
    # Two k steps of 8 in a 16-deep tile, unrolled, 8 paired instructions each.
    assert ptx.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 16


@pytest.mark.cuda
@pytest.mark.parametrize("config", ["64x64x16/2x2", "128x128x16/2x2"])
def test_on_the_gpu_matches_the_reference(config):
    """The asm path (paired mma.sync, cvt.rna) and the 16-byte copy on an NVIDIA GPU, at a
    size with whole and edge tiles and at one of whole tiles only."""
    gpu_matches_reference([f"warp-tile-matmul{{loop=L1,config={config}}}",
                           "tf32-matrix{at=all}"])


def gpu_matches_reference(steps: list[str]) -> None:
    """``steps`` on examples/sgemm.cu, run through MLX on an NVIDIA GPU, give the reference's
    results (and the interpreter's, up to the order of the sums) at a size with whole and
    edge tiles and at one of whole tiles only."""
    from kir.backends.mlx_runner import MLXKernel, available_targets

    if "cuda" not in available_targets():
        pytest.skip("needs MLX's CUDA back end on an NVIDIA GPU")
    for sizes in ({"M": 136, "N": 264, "K": 40}, {"M": 256, "N": 256, "K": 512}):
        loaded, out = _rewritten(EXAMPLES / "sgemm.cu", steps, sizes=sizes)
        inputs = loaded.bound.make_inputs(5)
        want = loaded.bound.reference(copy_inputs(inputs))
        interp = run_interp(dataclasses.replace(loaded, kernel=out), copy_inputs(inputs))
        got = MLXKernel(emit(out, loaded.bound, "cuda"))(copy_inputs(inputs))
        assert compare_outputs(got, want, lambda o: loaded.bound.tolerance(
            loaded.bound.spec.args[o].dtype)).ok, sizes
        # Same rounded operands as the interpreter: only the order of the sums differs.
        assert np.abs(got["C"] - interp["C"]).max() < 1e-3 * np.abs(want["C"]).max() / 64


def test_over_metal_threadgroup_memory_is_refused():
    loaded = load_kernel(EXAMPLES / "sgemm.cu")
    ctx = context_for(loaded, TARGETS["metal"])
    result = RULE.rewrite(loaded.kernel, "L1", {"config": "128x128x32/2x4"}, ctx)
    assert isinstance(result, NotApplicable) and "does not verify" in result.reason
    assert not isinstance(RULE.rewrite(loaded.kernel, "L1", {"config": "128x128x32/2x4"},
                                       context_for(loaded, TARGETS["cuda"])), NotApplicable)


def test_hints_put_it_first_for_both_styles():
    for path in KERNELS:
        loaded = load_kernel(path)
        found = hints(loaded.kernel, REGISTRY, context_for(loaded, TARGETS["cuda"]))
        first = found[0]
        assert first.name.startswith("warp-tiled-matmul") and first.steps[0].rule == RULE.name
        assert any(h.name.endswith("-tf32") and [s.rule for s in h.steps] ==
                   [RULE.name, "tf32-matrix"] for h in found)


# ----------------------------------------------------- B stored transposed: a linear layer

LINEAR = DATA / "linear_nt.cu"  # out = inp @ weight^T + bias, weight [OC][C]
LINEAR_SIZES = [{"BT": 33, "C": 65, "OC": 97}, {"BT": 136, "C": 40, "OC": 264},
                {"BT": 1, "C": 3, "OC": 5}]


@pytest.mark.parametrize("config", CONFIGS)
def test_a_linear_layers_transposed_weight_is_rebuilt_at_every_tile(config):
    """The weight tile is staged as the weight's rows (``tile_w[ty][tx] = weight[n][k]``) and
    read across (``tile_w[tx][k]``): rebuilt with B's tile kept by rows and its fragments
    loaded transposed; right at ragged, whole-tile and tiny sizes."""
    _, out = _rewritten(LINEAR, [f"warp-tile-matmul{{loop=L1,config={config}}}"])
    assert "transposed" in print_kernel(out)
    for sizes in LINEAR_SIZES:
        _agrees(LINEAR, out, sizes)


def test_a_linear_layer_on_both_emulated_targets_and_its_hints():
    from kir.backends.emulate import emulator_available
    from kir.driver.runners import RUNNERS

    loaded = load_kernel(LINEAR)
    found = hints(loaded.kernel, REGISTRY, context_for(loaded, TARGETS["cuda"]))
    assert found[0].name.startswith("warp-tiled-matmul")
    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    step = "warp-tile-matmul{loop=L1,config=32x64x16/1x2}"
    for target, steps in (("cuda", [step]), ("cuda", [step, "tf32x3-matrix{at=all}"]),
                          ("metal", [step])):
        _, out = _rewritten(LINEAR, steps, target)
        for sizes in LINEAR_SIZES[:2]:
            _agrees(LINEAR, out, sizes, RUNNERS[f"emulate-{target}"])


def test_a_transposed_weight_read_the_other_way_is_refused(tmp_path):
    """Staged by rows but read as ``tile_w[k][tx]`` (columns it does not hold): not C = A·Bᵀ
    (nor A·B), so not rebuilt, though the original runs."""
    source = LINEAR.read_text()
    assert "tile_w[threadIdx.x][k]" in source
    (tmp_path / "lin.cu").write_text(source.replace("tile_w[threadIdx.x][k]",
                                                    "tile_w[k][threadIdx.x]"))
    (tmp_path / "lin.kir.toml").write_text((DATA / "linear_nt.kir.toml").read_text())
    (tmp_path / "gemm_refs.py").write_text((DATA / "gemm_refs.py").read_text())
    loaded = load_kernel(tmp_path / "lin.cu")
    result = RULE.rewrite(loaded.kernel, "L1", {"config": "64x64x16/2x2"},
                          context_for(loaded, TARGETS["cuda"]))
    assert isinstance(result, NotApplicable) and "not" in result.reason


# ------------------------------------------------------------------------------ refusals

CLASSIC = """
kernel @mm(A: f32* global const, B: f32* global const, C: f32* global, M: i32, N: i32, K: i32)
    grid=("ceil(N / 16)", "ceil(M / 16)", "1") block=(16, 16, 1) shared_bytes=0 {
  shared As: f32[256]
  shared Bs: f32[256]
  let tx: i32 = i32(thread.x)
  let ty: i32 = i32(thread.y)
  let row: i32 = i32(block.y) * 16 + ty
  let col: i32 = i32(block.x) * 16 + tx
  let acc: f32 = ACC0
  for L0 t: i32 = 0; t < TILES; t = t + 1 {
    As[ty * 16 + tx] = select(row < M && t * 16 + tx < K, A[row * K + A_K], 0.0)
    Bs[ty * 16 + tx] = B_STORE
    barrier block
    for L1 k: i32 = 0; k < 16; k = k + 1 {
      acc = acc + As[ty * 16 + k] * Bs[k * 16 + tx]
    }
    barrier block
  }
  EPILOGUE
}
"""
PARTS = {
    "ACC0": "0.0",
    "TILES": "(K + 16 - 1) / 16",
    "A_K": "t * 16 + tx",
    "B_STORE": "select(t * 16 + ty < K && col < N, B[(t * 16 + ty) * N + col], 0.0)",
    "EPILOGUE": "if row < M && col < N {\n    C[row * N + col] = acc\n  }",
}


def _classic(**changes: str):
    text = CLASSIC
    for key, value in {**PARTS, **changes}.items():
        text = text.replace(key, value)
    return parse_kernel(text)


def _apply(kernel):
    ctx = RuleContext(target=TARGETS["cuda"], scalar_exprs={"M": "M", "N": "N", "K": "K"})
    return RULE.rewrite(kernel, "L1", {"config": "64x64x16/2x2"}, ctx)


def test_the_classic_form_is_rebuilt():
    out = _apply(_classic())
    assert not isinstance(out, NotApplicable), out
    assert out.launch.grid == ("ceil(N / 64)", "ceil(M / 64)", "1")


@pytest.mark.parametrize("change,reason", [
    # An off-by-one in A's k index: a different computation, never rebuilt as a GEMM.
    ({"A_K": "t * 16 + tx + 1"}, "not read row-major"),
    # The tail tile dropped (K / 16 tiles): the original ignores the last K % 16 terms.
    ({"TILES": "K / 16"}, "ceil(K / 16)"),
    ({"ACC0": "1.0"}, "does not start at 0"),
    # Unguarded loads (kernels that assume sizes are tile multiples): bounds unknown.
    ({"B_STORE": "B[(t * 16 + ty) * N + col]"}, "more than load the two tiles"),
    # A store without a guard would write rows past M in a taller block tile.
    ({"EPILOGUE": "C[row * N + col] = acc"}, "exactly one `if"),
    # The epilogue reads something else the original computed per thread.
    ({"EPILOGUE": "if row < M && col < N {\n    C[row * N + col] = acc + f32(tx)\n  }"},
     "reads 'tx'"),
    # The epilogue indexes with the hardware indices itself: the rebuilt kernel's threads
    # are others, so it would store elsewhere.
    ({"EPILOGUE": "if row < M && col < N {\n    C[(i32(block.y) * 16 + i32(thread.y)) * N + "
                  "col] = acc\n  }"}, "hardware index"),
    # B's guard tests another bound than the store's: the two disagree on what N is.
    ({"B_STORE": "select(t * 16 + ty < K && col < M, B[(t * 16 + ty) * N + col], 0.0)"},
     "does not require row < M and col < M"),
])
def test_kernels_that_are_not_exactly_a_gemm_are_refused(change, reason):
    result = _apply(_classic(**change))
    assert isinstance(result, NotApplicable), change
    assert reason in result.reason, result.reason


def test_without_the_specs_size_expressions_it_is_refused():
    result = RULE.rewrite(_classic(), "L1", {"config": "64x64x16/2x2"},
                          RuleContext(target=TARGETS["cuda"]))
    assert isinstance(result, NotApplicable) and "size expression" in result.reason


def test_the_k_loop_of_the_result_runs_to_k():
    out = _apply(_classic())
    loops = [n for n in out.body.stmts if isinstance(n, For)]
    assert loops[0].var == "wt_k0" and "K" in str(loops[0].cond)


def test_an_unsigned_row_keeps_its_type_in_the_kept_epilogue():
    """C code often declares the row unsigned: the epilogue reads it as it did (a cast of
    the template's i32 row), and the result verifies and matches."""
    text = CLASSIC
    for key, value in PARTS.items():
        text = text.replace(key, value)
    text = (text.replace("let row: i32 = i32(block.y) * 16 + ty",
                         "let row: u32 = block.y * 16_u32 + u32(ty)")
            .replace("select(row < M &&", "select(row < u32(M) &&")
            .replace("A[row * K +", "A[i32(row) * K +")
            .replace("if row < M && col < N {\n    C[row * N + col] = acc",
                     "if row < u32(M) && col < N {\n    C[i32(row) * N + col] = acc"))
    kernel = parse_kernel(text)
    out = _apply(kernel)
    assert not isinstance(out, NotApplicable), out.reason
    assert "u32(wt_row_0_0) < u32(M)" in print_kernel(out, locations=False)
    sizes = {"M": 37, "N": 70, "K": 20}
    args = {"A": np.random.default_rng(0).uniform(-1, 1, 37 * 20).astype(np.float32),
            "B": np.random.default_rng(1).uniform(-1, 1, 20 * 70).astype(np.float32),
            "C": np.zeros(37 * 70, np.float32), "M": 37, "N": 70, "K": 20}
    assert same_outputs(kernel, out, args, sizes)


def test_unsigned_size_parameters_are_rebuilt(tmp_path):
    """``unsigned int M, N, K`` (and unsigned rows, columns and k): the template's i32
    indices meet the sizes through casts; rebuilt and right with whole and edge tiles."""
    source = (DATA / "gemm_ab_ifelse.cu").read_text()
    for old, new in (("int M, int N, int K", "unsigned int M, unsigned int N, unsigned int K"),
                     ("const int r", "const unsigned int r"), ("const int c", "const unsigned int c"),
                     ("for (int k0", "for (unsigned int k0")):
        assert old in source
        source = source.replace(old, new)
    (tmp_path / "gemm_u.cu").write_text(source)
    spec = (DATA / "gemm_ab_ifelse.kir.toml").read_text().replace('dtype = "i32"', 'dtype = "u32"')
    (tmp_path / "gemm_u.kir.toml").write_text(spec)
    (tmp_path / "gemm_refs.py").write_text((DATA / "gemm_refs.py").read_text())
    path = tmp_path / "gemm_u.cu"
    _, out = _rewritten(path, ["warp-tile-matmul{loop=L1,config=64x64x16/2x2}"])
    assert "i32(K) % 4 == 0" in print_kernel(out)
    for sizes in (OTHER_SIZES[0], OTHER_SIZES[3]):
        _agrees(path, out, sizes)


def test_block_dims_are_the_launchs_constants(tmp_path):
    """``blockIdx.y * blockDim.y + threadIdx.y`` (the most common way to write the row) is
    the row of a 32 x 32 block: the GEMM written that way is rebuilt and right."""
    source = (DATA / "gemm_ab_ifelse.cu").read_text()
    for axis in "yx":
        old = f"blockIdx.{axis} * TILE + threadIdx.{axis}"
        assert old in source
        source = source.replace(old, f"blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}")
    (tmp_path / "gemm_bd.cu").write_text(source)
    (tmp_path / "gemm_bd.kir.toml").write_text((DATA / "gemm_ab_ifelse.kir.toml").read_text())
    (tmp_path / "gemm_refs.py").write_text((DATA / "gemm_refs.py").read_text())
    path = tmp_path / "gemm_bd.cu"
    _, out = _rewritten(path, ["warp-tile-matmul{loop=L1,config=64x64x16/2x2}"])
    for sizes in OTHER_SIZES[:2]:
        _agrees(path, out, sizes)


# ------------------------------------------------------------- kernels without bounds checks

TUTORIAL = Path(__file__).resolve().parents[1] / "corpus" / "gemm_tutorial.cu"
TUTORIAL_SPEC = TUTORIAL.with_name("gemm_tutorial.shared_mem_block.kir.toml")


def _tutorial(sizes: dict | None = None):
    return load_kernel(TUTORIAL, spec_path=TUTORIAL_SPEC, sizes=sizes or {})


@pytest.mark.parametrize("config", ["64x64x16/2x2", "32x64x16/1x2", "128x128x32/2x4"])
def test_the_gemm_tutorials_unchecked_kernel_is_rebuilt(config):
    """A GEMM tutorial's shared-memory kernel (1-D block of 256 threads indexed as tid / 16 and
    tid % 16, rows from blockIdx.x, operands walked by offsets advanced in the k loop, no
    bounds checks, alpha/beta epilogue): rebuilt, right at other tile-multiple sizes, and
    guarded by the rows and columns its grid covers."""
    loaded = _tutorial()
    ctx = context_for(loaded, TARGETS["cuda"])
    out = RULE.rewrite(loaded.kernel, "L1", {"config": config}, ctx)
    assert not isinstance(out, NotApplicable), out.reason
    text = print_kernel(out, locations=False)
    assert "< M / 16 * 16 && wt_col_0_0 < N / 16 * 16" in text
    for sizes in ({"M": 64, "N": 32, "K": 48}, {"M": 128, "N": 96, "K": 16},
                  {"M": 16, "N": 16, "K": 16}):
        sized = _tutorial(sizes)
        inputs = sized.bound.make_inputs(1)
        want = sized.bound.reference(copy_inputs(inputs))
        got = run_interp(dataclasses.replace(sized, kernel=out), copy_inputs(inputs))
        check = compare_outputs(got, want, lambda o: sized.bound.tolerance(
            sized.bound.spec.args[o].dtype))
        assert check.ok, (sizes, check.describe())


def test_the_tutorials_kernel_on_both_emulated_targets():
    from kir.backends.emulate import emulator_available
    from kir.driver.runners import RUNNERS

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    loaded = _tutorial()
    for target in ("cuda", "metal"):
        out = RULE.rewrite(loaded.kernel, "L1", {"config": "32x64x16/1x2"},
                           context_for(loaded, TARGETS[target]))
        sized = dataclasses.replace(loaded, kernel=out)
        inputs = loaded.bound.make_inputs(2)
        want = loaded.bound.reference(copy_inputs(inputs))
        got = RUNNERS[f"emulate-{target}"](sized, copy_inputs(inputs))
        assert compare_outputs(got, want, lambda o: loaded.bound.tolerance(
            loaded.bound.spec.args[o].dtype)).ok, target


UNCHECKED = """
kernel @mm(M: i32, N: i32, K: i32, A: f32* global const, B: f32* global const, C: f32* global)
    grid=("GRID_X", "M / 16", "1") block=(16, 16, 1) shared_bytes=0 {
  shared As: f32[256]
  shared Bs: f32[256]
  let a_off: i32 = i32(block.y) * 16 * K
  let b_off: i32 = i32(block.x) * 16
  let acc: f32 = 0.0
  for L0 t: i32 = 0; t < K; t = t + 16 {
    As[i32(thread.y) * 16 + i32(thread.x)] = A[a_off + i32(thread.y) * K + A_COL]
    Bs[i32(thread.y) * 16 + i32(thread.x)] = B[b_off + i32(thread.y) * N + i32(thread.x)]
    barrier block
    a_off = a_off + 16
    b_off = b_off + B_STEP
    for L1 k: i32 = 0; k < 16; k = k + 1 {
      acc = acc + As[i32(thread.y) * 16 + k] * Bs[k * 16 + i32(thread.x)]
    }
    barrier block
  }
  EPILOGUE
}
"""
UNCHECKED_PARTS = {
    "GRID_X": "N / 16", "A_COL": "i32(thread.x)", "B_STEP": "16 * N",
    "EPILOGUE": "C[(i32(block.y) * 16 + i32(thread.y)) * N + i32(block.x) * 16 + "
                "i32(thread.x)] = acc",
}


def _unchecked(**changes: str):
    text = UNCHECKED
    for key, value in {**UNCHECKED_PARTS, **changes}.items():
        text = text.replace(key, value)
    return RULE.rewrite(parse_kernel(text), "L1", {"config": "64x64x16/2x2"},
                        RuleContext(target=TARGETS["cuda"],
                                    scalar_exprs={"M": "M", "N": "N", "K": "K"}))


def test_an_unchecked_2d_kernel_is_rebuilt():
    out = _unchecked()
    assert not isinstance(out, NotApplicable), out.reason
    sizes = {"M": 48, "N": 32, "K": 64}
    rng = np.random.default_rng(0)
    args = {"A": rng.uniform(-1, 1, 48 * 64).astype(np.float32),
            "B": rng.uniform(-1, 1, 64 * 32).astype(np.float32),
            "C": np.zeros(48 * 32, np.float32), "M": 48, "N": 32, "K": 64}
    original = parse_kernel(UNCHECKED.replace("GRID_X", "N / 16").replace(
        "A_COL", "i32(thread.x)").replace("B_STEP", "16 * N").replace(
        "EPILOGUE", UNCHECKED_PARTS["EPILOGUE"]))
    assert same_outputs(original, out, args, sizes)


@pytest.mark.parametrize("change,reason", [
    # Another computation than A.B: never rebuilt as one.
    ({"A_COL": "i32(thread.x) + 1"}, "not loaded as A[row][k]"),
    ({"B_STEP": "32 * N"}, "not loaded as A[row][k]"),
    ({"B_STEP": "8 * N"}, "the loop's step does not divide"),
    # A grid that does not say how many columns the kernel covers.
    ({"GRID_X": "N / 8"}, "do not say how many rows or columns"),
    # The epilogue reads the thread's indices itself.
    ({"EPILOGUE": "C[(i32(block.y) * 16 + i32(thread.y)) * N + i32(block.x) * 16 + "
                  "i32(thread.x)] = acc + f32(thread.x)"}, "besides the sum"),
    # The store is not the thread's own element.
    ({"EPILOGUE": "C[(i32(block.y) * 16 + i32(thread.y)) * N + i32(block.x) * 16] = acc"},
     "row-major"),
])
def test_unchecked_kernels_that_are_not_exactly_a_gemm_are_refused(change, reason):
    result = _unchecked(**change)
    assert isinstance(result, NotApplicable), change
    assert reason in result.reason, result.reason
