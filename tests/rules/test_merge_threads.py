"""merge-threads: one thread does the work of `factor` threads of its block (register blocking)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from kir.backends import emit
from kir.backends.emulate import emulator_available
from kir.rewrites.parallel.merge_threads import MergeThreads
from parallel_common import kernel, same_outputs, sweep_examples, text

from kir.driver.load import load_kernel
from kir.driver.rulecheck import context_for
from kir.driver.runners import RUNNERS, copy_inputs, run_interp
from kir.ir import Assign, Binary, Block, For, Load
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext
from kir.spec.compare import compare_outputs
from tests.nvcc_build import nvcc_sm90

RULE = MergeThreads()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SGEMM = EXAMPLES / "sgemm.cu"


def _merge(loaded, steps):
    """Apply (dim, factor) steps in order; every one must apply."""
    k = loaded.kernel
    for dim, factor in steps:
        assert dim in RULE.sites(k)
        k = RULE.rewrite(k, dim, {"factor": factor}, context_for(loaded))
        assert not isinstance(k, NotApplicable), k.reason
    return k


def _rerun(loaded, k):
    return loaded.__class__(k, loaded.bound, loaded.path, loaded.source)


def _agree(loaded, k, target="interp", seed=5):
    inputs = loaded.bound.make_inputs(seed)
    want = run_interp(loaded, copy_inputs(inputs))
    runner = run_interp if target == "interp" else RUNNERS[target]
    got = runner(_rerun(loaded, k), copy_inputs(inputs))
    bound = loaded.bound
    outcome = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    assert outcome.ok, f"{target}:\n{outcome.describe()}"


STEPS = {"y4": [("y", 4)], "x4": [("x", 4)], "y4x4": [("y", 4), ("x", 4)],
         "y2": [("y", 2)], "x2": [("x", 2)], "y8": [("y", 8)], "x8": [("x", 8)],
         "x8y2": [("x", 8), ("y", 2)]}


@pytest.mark.parametrize("ragged", [False, True], ids=["spec", "ragged"])
@pytest.mark.parametrize("steps", list(STEPS), ids=list(STEPS))
def test_sgemm_keeps_results(steps, ragged):
    sizes = dict(load_kernel(SGEMM).spec.ragged) if ragged else {}
    loaded = load_kernel(SGEMM, sizes=sizes)
    k = _merge(loaded, STEPS[steps])
    text(k)  # verifies
    block = list(loaded.kernel.launch.block)
    for dim, factor in STEPS[steps]:
        block["xyz".index(dim)] //= factor
    assert list(k.launch.block) == block and k.launch.grid == loaded.kernel.launch.grid
    _agree(loaded, k)


def test_sgemm_y4_structure_is_jammed():
    loaded = load_kernel(SGEMM)
    k = _merge(loaded, [("y", 4)])
    assert k.launch.block == (16, 4, 1)
    top_loops = [s for s in k.body.stmts if isinstance(s, For)]
    assert [f.label for f in top_loops] == ["L0"]  # the tile loop stays one loop
    inner = [s for s in top_loops[0].body.stmts if isinstance(s, For)]
    assert len(inner) == 1, "the k loop must be jammed, not replicated"
    kloop = inner[0]
    assert kloop.unroll == 0  # #pragma unroll kept
    body = kloop.body.stmts
    assert len(body) == 4 and all(isinstance(s, Assign) for s in body)
    assert not any(isinstance(n, For) for n in kloop.body.walk())
    assert [s.name for s in body] == ["acc_0", "acc_1", "acc_2", "acc_3"]
    # Every MAC reads the same Bs element (loaded once: the register blocking) and its own
    # row of As.
    bs = [n for s in body for n in s.walk() if isinstance(n, Load) and n.buffer == "Bs"]
    as_ = [n for s in body for n in s.walk() if isinstance(n, Load) and n.buffer == "As"]
    assert len(bs) == 4 and len(set(bs)) == 1
    assert len(as_) == 4 and len(set(as_)) == 4
    ir = print_kernel(k, locations=False)
    assert "let tx: i32 = i32(thread.x)" in ir  # shared by the copies: uniform along y
    for c in range(4):
        shift = f" + {4 * c}_u32" if c else ""
        assert f"let ty_{c}: i32 = i32(thread.y{shift})" in ir
    assert """\
    for L1 [pragma_unroll] k: i32 = 0; k < 16; k = k + 1 {
      acc_0 = acc_0 + As[ty_0 * 16 + k] * Bs[k * 16 + tx]
      acc_1 = acc_1 + As[ty_1 * 16 + k] * Bs[k * 16 + tx]
      acc_2 = acc_2 + As[ty_2 * 16 + k] * Bs[k * 16 + tx]
      acc_3 = acc_3 + As[ty_3 * 16 + k] * Bs[k * 16 + tx]
    }""" in ir


def test_sgemm_y4x4_structure():
    loaded = load_kernel(SGEMM)
    k = _merge(loaded, [("y", 4), ("x", 4)])
    assert k.launch.block == (4, 4, 1)
    kloop = next(f for f in k.body.walk() if isinstance(f, For) and f.label == "L1")
    assert len(kloop.body.stmts) == 16
    assert all(isinstance(s, Assign) and isinstance(s.value, Binary) for s in kloop.body.stmts)
    assert sum(isinstance(n, For) for n in k.body.walk()) == 2


_available, _why = emulator_available()


GEMV = Path(__file__).parent / "data" / "gemv_warp_rows.cu"
EMULATED = {"sgemm-y4x4": (SGEMM, [("y", 4), ("x", 4)]),
            "warp-rows-x4": (GEMV, [("x", 4)])}  # a warp-per-row GEMV, 4 rows a warp


@pytest.mark.skipif(not _available, reason=f"no C++ emulator here: {_why}")
@pytest.mark.parametrize("target", ["emulate-metal", "emulate-cuda"])
@pytest.mark.parametrize("ragged", [False, True], ids=["spec", "ragged"])
@pytest.mark.parametrize("case", list(EMULATED))
def test_merged_runs_on_emulator(case, target, ragged):
    path, steps = EMULATED[case]
    sizes = dict(load_kernel(path).spec.ragged) if ragged else {}
    loaded = load_kernel(path, sizes=sizes)
    _agree(loaded, _merge(loaded, steps), target)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_sgemm_y4x4_emitted_cuda_compiles(tmp_path):
    loaded = load_kernel(SGEMM)
    e = emit(_merge(loaded, [("y", 4), ("x", 4)]), loaded.bound, "cuda")
    assert "acc_3_3" in e.source
    nvcc_sm90(e, tmp_path, assemble=False)


# ------------------------------------------------------------------ small kernels

STAGED = """
__global__ void k(const float* x, float* y, int n) {
  __shared__ float t[64];
  float acc = 0.0f;
  for (int j = 0; j < n; j += 64) {
    int i = j + threadIdx.x;
    t[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int q = 0; q < 4; ++q) acc += t[(threadIdx.x + q * blockDim.x / 4) % 64];
    __syncthreads();
  }
  y[threadIdx.x] = acc;
}
"""


def test_golden_barrier_in_uniform_loop():
    k = kernel(STAGED, block=(64, 1, 1))
    out = RULE.rewrite(k, "x", {"factor": 2}, RuleContext())
    assert text(out) == """\
kernel @k(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(32, 1, 1) shared_bytes=0 {
  shared t: f32[64]
  let acc_0: f32 = 0.0
  let acc_1: f32 = 0.0
  for L0 j: i32 = 0; j < n; j = j + 64 {
    let i_0: i32 = i32(u32(j) + thread.x)
    t[thread.x] = select(i_0 < n, x[i_0], 0.0)
    let i_1: i32 = i32(u32(j) + (thread.x + 32_u32))
    t[thread.x + 32_u32] = select(i_1 < n, x[i_1], 0.0)
    barrier block
    for L1 q: i32 = 0; q < 4; q = q + 1 {
      acc_0 = acc_0 + t[(thread.x + u32(q) * 64_u32 / 4_u32) % 64_u32]
      acc_1 = acc_1 + t[(thread.x + 32_u32 + u32(q) * 64_u32 / 4_u32) % 64_u32]
    }
    barrier block
  }
  y[thread.x] = acc_0
  y[thread.x + 32_u32] = acc_1
}"""
    x = np.random.default_rng(0).random(100, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(64, np.float32), "n": 100})


def test_no_barrier_and_local_array():
    src = """
    __global__ void k(const float* x, float* y) {
      float r[3];
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      for (int q = 0; q < 3; ++q) r[q] = x[i] * q;
      y[i] = r[0] + r[1] + r[2];
    }"""
    k = kernel(src, grid=("3", "1", "1"), block=(32, 1, 1))
    out = RULE.rewrite(k, "x", {"factor": 8}, RuleContext())
    assert out.launch.block == (4, 1, 1)
    ir = text(out)
    assert "local r_7: f32[3]" in ir and "i32(block.x * 32_u32 + (thread.x + 28_u32))" in ir
    x = np.random.default_rng(2).random(96, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(96, np.float32)})


def test_refusals():
    def reason(src, dim="x", factor=2, block=(64, 1, 1)):
        res = RULE.rewrite(kernel(src, block=block), dim, {"factor": factor}, RuleContext())
        assert isinstance(res, NotApplicable), "expected a refusal"
        return res.reason

    under_if = STAGED.replace("__syncthreads();\n    for",
                              "if (threadIdx.x < 32) __syncthreads();\n    for")
    assert "barrier sits inside an if" in reason(under_if)
    varying = STAGED.replace("j < n; j += 64", "j < n + (int)threadIdx.x; j += 64")
    assert "L0 holds a barrier and its bounds depend on thread.x" in reason(varying)
    # Bounds that differ only along another axis are fine when merging this one.
    assert not isinstance(RULE.rewrite(kernel(varying, block=(64, 2, 1)), "y", {"factor": 2},
                                       RuleContext()), NotApplicable)
    # A return inside a loop ends all copies; a guard return at the top level is an if
    # (test_guard_return_becomes_an_if).
    returns = STAGED.replace("int i = j + threadIdx.x;", "int i = j + threadIdx.x; if (i > n) return;")
    assert "has a return" in reason(returns)
    assert "not divisible by factor 8" in reason(STAGED, factor=8, block=(12, 1, 1))
    assert RULE.sites(kernel(STAGED, block=(64, 1, 1))) == ["x"]
    assert RULE.sites(kernel(STAGED, block=(33, 4, 1))) == ["y"]


@pytest.mark.parametrize("ragged", [False, True], ids=["spec", "ragged"])
def test_guard_return_becomes_an_if(ragged):
    """The layer-norm example (a warp a row, four rows a block) leaves rows past the end
    with ``if (row >= n_rows) return;``: that guard becomes an if around the rest, which
    each copy decides for itself, so two rows a warp jam their loops (gamma and beta read
    once for both rows) where both rows exist, and run alone elsewhere."""
    from kir.ir import If, Return

    sizes = dict(load_kernel(EXAMPLES / "layernorm.cu").spec.ragged) if ragged else {}
    layernorm = load_kernel(EXAMPLES / "layernorm.cu", sizes=sizes)
    k = _merge(layernorm, [("x", 2)])
    assert not any(isinstance(n, Return) for n in k.body.walk())
    assert "if !(row_0 >= n_rows) && !(row_1 >= n_rows) {" in text(k)
    assert any(isinstance(n, If) and n.orelse is not None for n in k.body.walk())
    _agree(layernorm, k)


def test_examples():
    counts = sweep_examples([RULE])
    assert counts.get("same", 0) >= 20  # sgemm x/y, flash_attn and reduce at every factor


def test_jam_preserves_result_order_independent_copies():
    # The two copies of a barrier-free loop writing disjoint elements, jammed into one loop.
    src = """
    __global__ void k(float* y, int n) {
      for (int q = 0; q < n; ++q) y[q * 8 + threadIdx.x] += (float)(q + threadIdx.x);
    }"""
    k = kernel(src, block=(8, 1, 1))
    out = RULE.rewrite(k, "x", {"factor": 4}, RuleContext())
    loop = next(s for s in out.body.stmts if isinstance(s, For))
    assert len(loop.body.stmts) == 4 and isinstance(loop.body, Block)
    same_outputs(k, out, {"y": np.ones(40, np.float32), "n": 5})
    assert dataclasses.replace(out, launch=k.launch) != k


def test_loops_with_thread_dependent_bounds_are_replicated_not_jammed():
    # A block-stride loop and a triangular loop: each copy has its own trip count, so each
    # copy keeps its own loop (jamming them under copy 0's bounds would be wrong).
    src = """
    __global__ void k(const float* x, float* y, int n) {
      float s = 0.0f;
      for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
      for (int q = 0; q < (int)threadIdx.x; ++q) s += 1.0f;
      y[threadIdx.x] = s;
    }"""
    k = kernel(src, block=(16, 1, 1))
    out = RULE.rewrite(k, "x", {"factor": 4}, RuleContext())
    loops = [s for s in out.body.stmts if isinstance(s, For)]
    assert len(loops) == 8 and len({f.label for f in loops}) == 8
    x = np.random.default_rng(3).random(50, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(16, np.float32), "n": 50})


@pytest.mark.parametrize("ragged", [False, True], ids=["spec", "ragged"])
@pytest.mark.parametrize("factor", [2, 4, 8])
def test_warp_rows_merged_keep_results(factor, ragged):
    """A warp-per-row GEMV (xor-shuffle sum, rows bounds-checked, the vector staged in shared
    memory between barriers): merged along x with copies whole warps apart, one warp does
    ``factor`` rows. The ragged size leaves rows of the last block out of bounds, so the
    per-copy version of the bounds check runs too."""
    sizes = dict(load_kernel(GEMV).spec.ragged) if ragged else {}
    loaded = load_kernel(GEMV, sizes=sizes)
    k = _merge(loaded, [("x", factor)])
    assert k.launch.block == (256 // factor, 1, 1)
    _agree(loaded, k)


def test_warp_rows_merged_structure():
    """The lane (``thread.x % 32``) is the same for every copy, so it is declared once and
    the row loop starting at it is jammed under ``row_0 < rows && row_1 < rows``: one loop
    whose every iteration reads ``xs[c]`` once for both rows; the shuffles stay shuffles."""
    from kir.ir import If, Shuffle

    loaded = load_kernel(GEMV)
    k = _merge(loaded, [("x", 2)])
    printed = text(k)
    assert "if row_0 < rows && row_1 < rows {" in printed
    assert printed.count("let %lane: i32") == 1
    versioned = next(n for n in k.body.walk() if isinstance(n, If) and n.orelse is not None)
    jammed = [s for s in versioned.then.stmts if isinstance(s, For)]
    assert len(jammed) == 1
    updates = [s for s in jammed[0].body.stmts if isinstance(s, Assign)]
    assert [s.name for s in updates] == ["acc_0", "acc_1"]
    assert sum(isinstance(n, Shuffle) for n in k.body.walk()) == 2


def test_warp_code_needs_whole_warps_apart():
    loaded = load_kernel(GEMV, sizes={"rows": 8})
    k = dataclasses.replace(loaded.kernel, launch=dataclasses.replace(
        loaded.kernel.launch, block=(64, 1, 1)))
    refused = RULE.rewrite(k, "x", {"factor": 4}, context_for(loaded))
    assert isinstance(refused, NotApplicable)
    assert "not whole warps apart" in refused.reason


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_warp_rows_merged_cuda_compiles(tmp_path):
    loaded = load_kernel(GEMV)
    k = _merge(loaded, [("x", 4)])
    nvcc_sm90(emit(k, loaded.bound, "cuda"), tmp_path, assemble=False)
