"""vectorize-strided: golden IR, exact coverage at many n, layernorm on the interpreter, the
emitted CUDA (nvcc) and Metal (emulator), refusals, and the example sweep."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from kir.rewrites.vectorize.vectorize_strided import RULES
from loop_sizes import SIZE_SETS

from kir.driver.load import load_kernel
from kir.driver.rulecheck import context_for, example_files, sweep
from kir.driver.runners import copy_inputs, run_interp
from kir.interp import run_kernel
from kir.ir import Launch, Load
from kir.ir.printer import print_kernel
from kir.ir.types import VectorType
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext
from kir.spec.compare import compare_outputs

RULE = RULES[0]
EXAMPLES = Path(__file__).parents[2] / "examples"

# Two warps, one row of 512 each; the row base is a constant multiple of 4, so the rule
# applies at any n and the tail is exercised at every n % 4. y is read-modify-written, so
# an index visited twice (or never) shows; the sums are exact (integer-valued floats).
ROWS = """
__global__ void rows(const float* x, float* y, float* out, int n) {
    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    int xr = warp * 512;
    float s = 0.0f;
    for (int c = lane; c < n; c += 32) {
        float t = x[xr + c] * 2.0f;
        s += t;
        y[xr + c] = y[xr + c] + t;
    }
    for (int o = 16; o > 0; o /= 2) {
        s += __shfl_xor_sync(0xffffffffu, s, o);
    }
    if (lane == 0) {
        out[warp] = s;
    }
}
"""

# Block-strided (softmax-like): thread.x start, step 128 = block width, max reduction
# combined per warp by a down-sweep and a broadcast from lane 0.
BLOCK = """
__global__ void block(const float* x, float* y, float* out, int n) {
    int tid = threadIdx.x;
    int lane = tid % 32;
    float m = -1000.0f;
    for (int c = tid; c < n; c += 128) {
        m = fmaxf(m, x[c]);
        y[c] = x[c] + 1.0f;
    }
    for (int o = 16; o > 0; o >>= 1) {
        m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
    }
    float total = __shfl_sync(0xffffffffu, m, 0);
    if (lane == 0) {
        out[tid / 32] = total;
    }
}
"""

GOLDEN_LOOP = """\
  let c_vend: i32 = n / 4 * 4
  for L0 c: i32 = 4 * %lane; c < c_vend; c = c + 128 {
    let x_v: f32x4 = x[xr + c] as f32x4
    let y_v: f32x4 = y[xr + c] as f32x4
    let t_1: f32 = x_v.x * 2.0
    s = s + t_1
    let y_e: f32 = y_v.x + t_1
    let t_2: f32 = x_v.y * 2.0
    s = s + t_2
    let y_e_1: f32 = y_v.y + t_2
    let t_3: f32 = x_v.z * 2.0
    s = s + t_3
    let y_e_2: f32 = y_v.z + t_3
    let t_4: f32 = x_v.w * 2.0
    s = s + t_4
    let y_e_3: f32 = y_v.w + t_4
    y[xr + c] = f32x4{y_e, y_e_1, y_e_2, y_e_3}
  }
  for L2 c_rest: i32 = c_vend + ((%lane - c_vend) % 32 + 32) % 32; c_rest < n; c_rest = c_rest + 32 {
    let t: f32 = x[xr + c_rest] * 2.0
    s = s + t
    y[xr + c_rest] = y[xr + c_rest] + t
  }
"""


def small(text: str, threads: int):
    return load_cuda(text, "t.cu", launch=Launch(("1", "1", "1"), (threads, 1, 1)))


def run_small(k, n: int, size: int) -> dict:
    rng = np.random.default_rng(abs(n))
    args = {"x": rng.integers(-8, 8, size).astype(np.float32),
            "y": rng.integers(-8, 8, size).astype(np.float32),
            "out": np.zeros(4, np.float32), "n": n}
    return run_kernel(k, args)


def apply(k, site: str, width: int, scalars: dict):
    result = RULE.rewrite(k, site, {"width": width}, RuleContext(scalars=scalars))
    assert not isinstance(result, NotApplicable), result
    verify(result)
    return result


def vector_loads(k, width: int) -> list[Load]:
    return [n for n in k.body.walk() if isinstance(n, Load)
            and isinstance(n.type, VectorType) and n.type.count == width]


def test_golden():
    result = apply(small(ROWS, 64), "L0", 4, {"n": 37})
    text = print_kernel(result, locations=False)
    assert GOLDEN_LOOP in text, text


@pytest.mark.parametrize("width", [4, 2])
def test_every_index_once_for_any_n(width):
    # n = 0, n < 32, n % 4 in 0..3, n < and > one chunk of w*32, a negative bound.
    original = small(ROWS, 64)
    for n in [0, 1, 3, 4, 5, 31, 32, 33, 37, 64, 100, 127, 128, 129, 130, 131, 255, 511, 512,
              -3]:
        result = apply(original, "L0", width, {"n": n})
        want, got = run_small(original, n, 1024), run_small(result, n, 1024)
        for name in ("y", "out"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"n={n} {name}")


@pytest.mark.parametrize("width", [4, 2])
def test_block_strided_with_down_sweep(width):
    original = small(BLOCK, 128)
    for n in [0, 7, 100, 128, 129, 513, 1000, 1023]:
        result = apply(original, "L0", width, {"n": n})
        assert vector_loads(result, width)
        want, got = run_small(original, n, 1024), run_small(result, n, 1024)
        for name in ("y", "out"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"n={n} {name}")


# ------------------------------------------------------------------------- layernorm

LAYERNORM_LOOPS = ["L0", "L2", "L4"]  # sum, squared deviation, normalize + store


def layernorm(rows: int | None = None, cols: int | None = None):
    sizes = {k: v for k, v in (("rows", rows), ("cols", cols)) if v is not None}
    return load_kernel(EXAMPLES / "layernorm.cu", sizes=sizes)


def vectorize(loaded, loops, width: int = 4):
    kernel = loaded.kernel
    for label in loops:
        result = RULE.rewrite(kernel, label, {"width": width}, context_for(loaded))
        assert not isinstance(result, NotApplicable), (label, result)
        verify(result)
        kernel = result
    return dataclasses.replace(loaded, kernel=kernel)


def assert_same(loaded, rewritten, target=run_interp, seed: int = 1):
    inputs = loaded.bound.make_inputs(seed)
    want = run_interp(loaded, copy_inputs(inputs))
    got = target(rewritten, copy_inputs(inputs))
    bound = loaded.bound
    outcome = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    assert outcome.ok, outcome.describe()


@pytest.mark.parametrize("loops", [["L0"], ["L2"], ["L4"], LAYERNORM_LOOPS],
                         ids=["sum", "sq", "store", "all"])
@pytest.mark.parametrize("sizes", [{}, dict(rows=5, cols=4), dict(rows=3, cols=28),
                                   dict(rows=6, cols=128), dict(rows=5, cols=100),
                                   dict(rows=4, cols=512), dict(rows=7, cols=1000)],
                         ids=lambda s: "spec" if not s else f"{s['rows']}x{s['cols']}")
def test_layernorm_loops_keep_results(loops, sizes):
    loaded = layernorm(**sizes)
    rewritten = vectorize(loaded, loops)
    assert len(vector_loads(rewritten.kernel, 4)) >= len(loops)
    assert_same(loaded, rewritten)


def test_layernorm_store_loop_ir():
    rewritten = vectorize(layernorm(), ["L4"]).kernel
    loads = {n.buffer for n in vector_loads(rewritten, 4)}
    assert loads == {"x", "gamma", "beta"}
    text = print_kernel(rewritten, locations=False)
    assert "y[yr + c_2] = f32x4{" in text


def test_layernorm_misaligned_spec_is_refused():
    loaded = layernorm(cols=102)  # 102 % 4 != 0: row * 102 is not a multiple of 4
    result = RULE.rewrite(loaded.kernel, "L0", {"width": 4}, context_for(loaded))
    assert isinstance(result, NotApplicable)
    assert "multiple of 4" in result.reason
    assert_same(loaded, vectorize(loaded, LAYERNORM_LOOPS, width=2))  # 102 % 2 == 0


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
def test_layernorm_emitted_cuda_compiles(tmp_path):
    from kir.backends import emit
    from tests.nvcc_build import nvcc_sm90

    loaded = layernorm()
    e = emit(vectorize(loaded, LAYERNORM_LOOPS).kernel, loaded.bound, "cuda")
    assert "float4" in e.source
    nvcc_sm90(e, tmp_path, nvcc=NVCC, assemble=False)


@pytest.mark.parametrize("target", ["emulate-metal", "emulate-cuda"])
def test_layernorm_emitted_on_emulator(target):
    from kir.backends.emulate import emulator_available

    from kir.driver.runners import RUNNERS

    available, why = emulator_available()
    if not available:
        pytest.skip(f"no C++ emulator here: {why}")
    for sizes in ({}, dict(rows=5, cols=100)):
        loaded = layernorm(**sizes)
        assert_same(loaded, vectorize(loaded, LAYERNORM_LOOPS), RUNNERS[target], seed=3)


# --------------------------------------------------------------------------- refusals


def refused(text: str, reason: str, threads: int = 64, site: str = "L0") -> None:
    result = RULE.rewrite(small(text, threads), site, {"width": 4},
                          RuleContext(scalars={"n": 64, "stride": 32}))
    assert isinstance(result, NotApplicable), f"expected a refusal ({reason})"
    assert reason in result.reason, result.reason
    assert site not in RULE.sites(small(text, threads)) or reason == "multiple of 4"


def test_misaligned_base_is_refused():
    refused(ROWS.replace("int xr = warp * 512;", "int xr = warp * 512 + 2;"), "multiple of 4")


def test_non_f32_buffer_is_refused():
    text = ROWS.replace("const float* x", "const double* x").replace(
        "float t = x[xr + c] * 2.0f;", "float t = (float)x[xr + c];")
    refused(text, "not a global f32 buffer")


def test_barrier_in_loop_is_refused():
    refused(ROWS.replace("s += t;", "s += t; __syncthreads();"), "holds a barrier")


def test_shuffle_in_loop_is_refused():
    refused(ROWS.replace("s += t;", "s += __shfl_xor_sync(0xffffffffu, t, 1);"),
            "holds a warp shuffle")


def test_non_constant_step_is_refused():
    text = ROWS.replace("int n)", "int n, int stride)").replace("c += 32", "c += stride")
    refused(text, "not a constant")


def test_partial_read_before_combine_is_refused():
    # Each lane's own partial sum is an output: moving elements between lanes changes it.
    text = ROWS.replace("if (lane == 0) {", "if (lane < 4) {").replace(
        "out[warp] = s;", "out[lane] = s;").replace(
        "s += __shfl_xor_sync(0xffffffffu, s, o);", "")
    refused(text, "before it is combined")


def test_buffer_used_outside_the_loop_is_refused():
    refused(ROWS.replace("out[warp] = s;", "out[warp] = s + y[xr + lane];"),
            "also accessed outside")


def test_lane_dependent_value_is_refused():
    # The element would be computed by another lane, with another lane's value.
    refused(ROWS.replace("x[xr + c] * 2.0f", "x[xr + c] * (float)lane"), "differ between lanes")


def test_lane_divergent_loop_is_refused():
    text = ROWS.replace("    for (int c = lane;", "    if (lane < 16) for (int c = lane;")
    refused(text, "not reached by all lanes")


# ------------------------------------------------------------------------------ sweep


def test_examples_sweep():
    results = sweep([RULE], example_files(EXAMPLES), SIZE_SETS)
    same = {(Path(a.kernel_file).name, str(a.step)) for a in results if a.status == "same"}
    for label in LAYERNORM_LOOPS:
        for width in (4, 2):
            assert ("layernorm.cu", f"vectorize-strided{{loop={label},width={width}}}") in same
    for label in ("L0", "L3", "L6"):
        assert ("softmax.cu", f"vectorize-strided{{loop={label},width=4}}") in same
    bad = [(str(a.step), a.status, a.detail) for a in results
           if a.status in ("changed", "error")]
    assert not bad, bad


def test_rows_the_spec_does_not_align_take_the_scalar_loop():
    """Vectorized where the spec's rows of 8192 start at multiples of 4, a softmax checks the
    row's alignment at run time: rows of 8190 (odd rows start misaligned) run the scalar
    remainder loop, with the original's results; without the check the interpreter refuses
    the misaligned float4 loads, as a GPU would fault on them."""
    import dataclasses

    from kir.backends import TARGETS
    from kir.driver.load import load_kernel
    from kir.driver.runners import copy_inputs, run_interp
    from kir.rules import context_for

    examples = Path(__file__).resolve().parents[2] / "examples"
    loaded = load_kernel(examples / "softmax.cu", sizes={"rows": 3, "cols": 8192})
    out = RULE.rewrite(loaded.kernel, "L0", {"width": 4}, context_for(loaded, TARGETS["cuda"]))
    assert not isinstance(out, NotApplicable), out
    assert "select(in % 4 == 0, cols / 4 * 4, 0)" in print_kernel(out, locations=False)
    for cols in (8192, 8190, 1001):
        at = load_kernel(examples / "softmax.cu", sizes={"rows": 3, "cols": cols})
        inputs = at.bound.make_inputs(0)
        want = run_interp(at, copy_inputs(inputs))["y"]
        got = run_interp(dataclasses.replace(at, kernel=out), copy_inputs(inputs))["y"]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
