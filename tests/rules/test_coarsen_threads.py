"""coarsen-threads: each block does the work of `factor` former blocks."""

import shutil
import subprocess

import numpy as np
import pytest
from kir.backends import TARGETS, emit
from kir.backends.cuda import STANDALONE_PRELUDE, cuda_signature
from kir.rewrites.parallel.coarsen_threads import CoarsenThreads
from parallel_common import EXAMPLES, kernel, same_outputs, sweep_examples, text

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import copy_inputs
from kir.interp import run_kernel
from kir.measure.model import ModelEvaluator
from kir.rules import NotApplicable, RuleContext, apply_trace, context_for, parse_step
from kir.spec.compare import compare_outputs

RULE = CoarsenThreads()

SRC = """
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * 32 + threadIdx.x;
  if (i >= n) return;
  y[i] = x[i] + 1.0f;
}
"""


def test_golden_and_semantics():
    """Without the spec's parameter expressions the old grid is baked in (the fallback), and
    the launch says the kernel is specialized."""
    k = kernel(SRC, grid=("ceil(n / 32)", "1", "1"))
    out = RULE.rewrite(k, "x", {"factor": 2}, RuleContext(sizes={"n": 100}))
    assert text(out) == """\
kernel @k(x: f32* global const, y: f32* global, n: i32)
    grid=("ceil((ceil(n / 32)) / 2)", "1", "1") block=(32, 1, 1) shared_bytes=0 specialized {
  for L0 coarse: u32 = 0_u32; coarse < 2_u32; coarse = coarse + 1_u32 {
    let block_x: u32 = block.x * 2_u32 + coarse
    if block_x < 4_u32 {
      let i: i32 = i32(block_x * 32_u32 + thread.x)
      if i >= n {
        continue
      }
      y[i] = x[i] + 1.0
    }
  }
}"""
    x = np.random.default_rng(0).random(100, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(100, np.float32), "n": 100}, {"n": 100})


def test_shared_memory_gets_barrier():
    src = """
    __global__ void k(const float* x, float* y) {
      __shared__ float t[32];
      t[threadIdx.x] = x[blockIdx.x * 32 + threadIdx.x];
      __syncthreads();
      y[blockIdx.x * 32 + threadIdx.x] = t[31 - threadIdx.x];
    }"""
    k = kernel(src, grid=("5", "1", "1"))
    out = RULE.rewrite(k, "x", {"factor": 4}, RuleContext())
    body = text(out)
    assert body.splitlines()[2].strip() == "shared t: f32[32]"
    assert "    barrier block\n  }\n}" in body
    x = np.random.default_rng(1).random(160, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(160, np.float32)})


def test_not_applicable():
    k = kernel(SRC, grid=("ceil(n / 32)", "1", "1"))
    res = RULE.rewrite(k, "x", {"factor": 2}, RuleContext())
    assert isinstance(res, NotApplicable) and "not known" in res.reason
    sync = SRC.replace("if (i >= n) return;", "if (i >= n) return; __syncthreads();")
    res = RULE.rewrite(kernel(sync, grid=("4", "1", "1")), "x", {"factor": 2}, RuleContext())
    assert isinstance(res, NotApplicable) and "returns early" in res.reason
    assert RULE.sites(kernel(SRC)) == []


def test_examples():
    sweep_examples([RULE])


# ------------------------------------------------ old grid computed from scalar parameters

def test_golden_runtime_guard():
    """With the spec saying the parameter n carries the size n, the guard computes the old
    grid from n: the kernel is right at every n, not only at the spec's."""
    k = kernel(SRC, grid=("ceil(n / 32)", "1", "1"))
    ctx = RuleContext(sizes={"n": 100}, scalars={"n": 100}, scalar_exprs={"n": "n"})
    out = RULE.rewrite(k, "x", {"factor": 2}, ctx)
    assert text(out) == """\
kernel @k(x: f32* global const, y: f32* global, n: i32)
    grid=("ceil((ceil(n / 32)) / 2)", "1", "1") block=(32, 1, 1) shared_bytes=0 {
  let grid_x: u32 = (u32(n) + 31_u32) / 32_u32
  for L0 coarse: u32 = 0_u32; coarse < 2_u32; coarse = coarse + 1_u32 {
    let block_x: u32 = block.x * 2_u32 + coarse
    if block_x < grid_x {
      let i: i32 = i32(block_x * 32_u32 + thread.x)
      if i >= n {
        continue
      }
      y[i] = x[i] + 1.0
    }
  }
}"""
    for n in (100, 7, 1000):
        x = np.random.default_rng(n).random(n, dtype=np.float32)
        same_outputs(k, out, {"x": x, "y": np.zeros(n, np.float32), "n": n}, {"n": n})


# No bounds check of its own: only the coarsening guard keeps blocks inside the old grid.
UNGUARDED = """
__global__ void k(const float* x, float* y, int n) {
  y[blockIdx.x * 32 + threadIdx.x] = x[blockIdx.x * 32 + threadIdx.x] * 2.0f
      + (float)gridDim.x;
}
"""


def _unguarded_args(blocks: int) -> dict:
    x = np.random.default_rng(blocks).random(blocks * 32, dtype=np.float32)
    return {"x": x, "y": np.zeros(blocks * 32, np.float32), "n": blocks}


@pytest.mark.parametrize("factor", [2, 4])
def test_unguarded_kernel_right_at_other_sizes(factor):
    k = kernel(UNGUARDED, grid=("n", "1", "1"))
    ctx = RuleContext(sizes={"n": 8}, scalars={"n": 8}, scalar_exprs={"n": "n"})
    out = RULE.rewrite(k, "x", {"factor": factor}, ctx)
    assert "if block_x < grid_x" in text(out)
    # gridDim.x in the body still means the old grid, computed at run time too.
    assert "f32(grid_x)" in text(out)
    for n in (8, 3, 5, 21):  # smaller and larger than the sizes it was rewritten at
        same_outputs(k, out, _unguarded_args(n), {"n": n})


def test_fallback_is_specialized():
    """A grid over a size no scalar parameter carries: the old grid is evaluated at the
    spec's sizes and baked in (the docstring says the kernel is then specialized)."""
    assert "SPECIALIZED" in CoarsenThreads.__doc__
    k = kernel(UNGUARDED, grid=("blocks", "1", "1"))
    ctx = RuleContext(sizes={"blocks": 8, "n": 8}, scalars={"n": 8}, scalar_exprs={"n": "n"})
    out = RULE.rewrite(k, "x", {"factor": 4}, ctx)
    body = text(out)
    assert "if block_x < 8_u32" in body and "grid_x" not in body
    assert "f32(8_u32)" in body
    assert out.launch.grid[0] == "ceil((blocks) / 4)"
    same_outputs(k, out, _unguarded_args(8), {"blocks": 8})
    # A parameter whose value disagrees with the size it claims is not trusted either.
    k2 = kernel(UNGUARDED, grid=("n", "1", "1"))
    liar = RuleContext(sizes={"n": 8}, scalars={"n": 8}, scalar_exprs={"n": "m"})
    assert "grid_x" not in text(RULE.rewrite(k2, "x", {"factor": 2}, liar))
    # A number needs no parameter at all.
    num = RULE.rewrite(kernel(UNGUARDED, grid=("6", "1", "1")), "x", {"factor": 4},
                       RuleContext())
    assert "if block_x < 6_u32" in text(num) and num.launch.grid[0] == "ceil((6) / 4)"
    same_outputs(kernel(UNGUARDED, grid=("6", "1", "1")), num, _unguarded_args(6))


# --------------------------------------------------------------- examples at other sizes

# (example, sizes it is rewritten at, sizes it then runs at)
RESIZED = [
    ("layernorm.cu", {"rows": 16, "cols": 64}, [{"rows": 5, "cols": 40},
                                                  {"rows": 37, "cols": 33}]),
    ("reduce.cu", {"n": 3000}, [{"n": 777}, {"n": 9000}]),
    ("selective_scan.cu", {"B": 1, "L": 8, "D": 16, "S": 16},
     [{"B": 1, "L": 5, "D": 4, "S": 16}, {"B": 2, "L": 4, "D": 16, "S": 16}]),
]


def _agree(loaded, got: dict, want: dict) -> bool:
    bound = loaded.bound
    outputs = {o: want[o] for o in bound.outputs}
    return compare_outputs(got, outputs,
                           lambda o: bound.tolerance(bound.spec.args[o].dtype)).ok


def _coarsened(name: str, sizes: dict, factor: int, dim: str = "x"):
    loaded = load_kernel(EXAMPLES / name, sizes=sizes)
    out = RULE.rewrite(loaded.kernel, dim, {"factor": factor}, context_for(loaded))
    assert not isinstance(out, NotApplicable), out
    return loaded, out


@pytest.mark.parametrize("name,built,others", RESIZED, ids=[r[0] for r in RESIZED])
@pytest.mark.parametrize("factor", [2, 4])
def test_examples_right_at_other_sizes(name, built, others, factor):
    """Coarsened at one size, the kernel agrees with the unrewritten one at other sizes
    (before the guard computed the old grid at run time, larger sizes lost blocks and
    smaller ones ran blocks past the end)."""
    _, out = _coarsened(name, built, factor)
    assert "grid_x" in text(out)
    for sizes in others:
        loaded = load_kernel(EXAMPLES / name, sizes={**built, **sizes})
        inputs = loaded.bound.make_inputs(0)
        want = run_kernel(loaded.kernel, copy_inputs(inputs), loaded.bound.sizes)
        got = run_kernel(out, copy_inputs(inputs), loaded.bound.sizes)
        assert _agree(loaded, got, want), (name, sizes)


def test_softmax_stays_specialized_and_says_so():
    """softmax's grid is ``rows`` and no parameter carries rows: the fallback bakes the
    count in, marks the launch ``specialized``, and the kernel is right at the sizes it is
    compiled for."""
    loaded, out = _coarsened("softmax.cu", {"rows": 6, "cols": 64}, 4)
    assert "if block_x < 6_u32" in text(out)
    assert out.launch.specialized and "shared_bytes=0 specialized {" in text(out)
    inputs = loaded.bound.make_inputs(0)
    want = run_kernel(loaded.kernel, copy_inputs(inputs), loaded.bound.sizes)
    got = run_kernel(out, copy_inputs(inputs), loaded.bound.sizes)
    assert _agree(loaded, got, want)
    ok, runtime = _coarsened("layernorm.cu", {"rows": 6, "cols": 64}, 4)
    assert not runtime.launch.specialized  # the run-time guard holds at every size


def test_a_specialized_candidate_is_validated_at_its_compiled_sizes_only():
    """The search does not try the specialized softmax at the check sizes (3 rows, where its
    baked guard runs blocks past the end: a false "crash" before), and checks it on the
    "GPU" (here the CPU emulator) at the compiled sizes."""
    from kir.measure.gpu.jobs import EmulatorRunner
    from kir.measure.mlx import MLXEvaluator

    loaded, out = _coarsened("softmax.cu", {"rows": 6, "cols": 64}, 4)
    check = {"rows": 3, "cols": 40}
    with ModelEvaluator(loaded, workers=1, check_sizes=check) as model:
        verdict = model.evaluate(out)
        assert verdict.status == "not_applicable" and "specialized" in verdict.error
    with MLXEvaluator(loaded, "cuda", runner=EmulatorRunner(), warmup=0, repeat=1,
                      workers=1, check_sizes=check) as gpu:
        verdict = gpu.evaluate(out)
        assert verdict.ok, verdict


SPEC = """\
kernel = "k"
sizes = { n = 64 }
launch = { grid = ["n"], block = [32] }

[args]
x = { dtype = "f32", shape = ["n * 32"] }
y = { dtype = "f32", shape = ["n * 32"], role = "out", init = "none" }
n = { value = "n", dtype = "i32" }
"""


def test_search_validates_at_check_sizes(tmp_path):
    """A kernel without bounds checks of its own, coarsened at n=64 and validated at n=5
    (not a multiple of the factor): rejected as a crash before, "ok" now."""
    (tmp_path / "k.cu").write_text(UNGUARDED)
    (tmp_path / "k.kir.toml").write_text(SPEC)
    big = load_kernel(tmp_path / "k.cu")
    reg = load_registry()
    k = apply_trace(big.kernel, [parse_step("coarsen-threads{dim=x,factor=4}", reg)], reg,
                    context_for(big, TARGETS["cuda"]), strict=True).kernel
    with ModelEvaluator(big, workers=1, check_sizes={"n": 5}) as ev:
        result = ev.evaluate(k)
    assert result.status == "ok", result
    assert "specialized" not in result.details


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_emitted_cuda_compiles(tmp_path):
    units = []
    for name, built, _ in RESIZED[:2]:
        loaded, out = _coarsened(name, built, 4)
        e = emit(out, loaded.bound, "cuda")
        assert "grid_x" in e.source
        inputs = list(zip(e.input_names, e.input_dtypes, e.input_shapes))
        outputs = list(zip(e.output_names, e.output_dtypes))
        units.append(((e.header or "") + "\n"
                      + cuda_signature(e.name, inputs, outputs, e.source, "", prelude="")))
    source = tmp_path / "coarsened.cu"
    source.write_text(STANDALONE_PRELUDE + "\n".join(units))
    result = subprocess.run(["nvcc", "-c", "-arch=sm_90", str(source), "-o",
                             str(tmp_path / "coarsened.o")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr + "\n" + source.read_text()
