"""stage-in-shared: golden IR, semantics, refusals, layernorm's gamma/beta, example sweep."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from kir.frontends.cuda import load_cuda
from kir.rewrites.stage_in_shared import RULES
from loop_sizes import sweep_summary

from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Two warps per block, one row each; both reread the whole weight vector w.
SRC = """
__global__ void k(const float* x, const float* w, float* y, int n) {
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * 2 + threadIdx.x / 32;
    for (int c = lane; c < n; c += 32) {
        y[row * n + c] = x[row * n + c] * w[c];
    }
}
"""
CTX = RuleContext(sizes={"n": 40}, scalars={"n": 40})


def _kernel(src: str = SRC):
    return load_cuda(src, "t.cu", launch=Launch(("2", "1", "1"), (64, 1, 1), 0))


def _args():
    rng = np.random.default_rng(3)
    return {"x": rng.random(160, dtype=np.float32), "w": rng.random(40, dtype=np.float32),
            "y": np.zeros(160, np.float32), "n": 40}


def test_golden_and_semantics():
    k = _kernel()
    out = RULE.rewrite(k, "w", {}, CTX)
    verify(out)
    assert print_kernel(out, locations=False) == """\
kernel @k(x: f32* global const, w: f32* global const, y: f32* global, n: i32)
    grid=("2", "1", "1") block=(64, 1, 1) shared_bytes=0 specialized {
  shared w_s: f32[40]
  for L1 s: i32 = i32(thread.x); s < 40; s = s + 64 {
    if s < n {
      w_s[s] = w[s]
    } else {
      w_s[s] = 0.0
    }
  }
  barrier block
  let %lane: i32 = i32(thread.x % 32_u32)
  let row: i32 = i32(block.x * 2_u32 + thread.x / 32_u32)
  for L0 c: i32 = %lane; c < n; c = c + 32 {
    y[row * n + c] = x[row * n + c] * w_s[c]
  }
}
"""
    want = run_kernel(k, _args(), {})
    got = run_kernel(out, _args(), {})
    np.testing.assert_array_equal(got["y"], want["y"])


def test_offset_region_keeps_its_base():
    src = SRC.replace("w[c]", "w[blockIdx.x * n + c]")
    out = RULE.rewrite(_kernel(src), "w", {}, CTX)
    assert not isinstance(out, NotApplicable), out
    text = print_kernel(out, locations=False)
    assert "w_s[s] = w[block.x * u32(n) + u32(s)]" in text and "* w_s[c]" in text
    args = _args()
    args["w"] = np.random.default_rng(4).random(80, dtype=np.float32)
    want = run_kernel(_kernel(src), dict(args), {})
    got = run_kernel(out, dict(args), {})
    np.testing.assert_array_equal(got["y"], want["y"])


def test_refusals():
    res = RULE.rewrite(_kernel(SRC.replace("w[c]", "w[row * n + c]")), "w", {}, CTX)
    assert isinstance(res, NotApplicable) and "differs between threads" in res.reason
    res = RULE.rewrite(_kernel(SRC.replace("int c = lane;", "int c = lane + 1;")), "w", {}, CTX)
    assert isinstance(res, NotApplicable) and "does not start" in res.reason
    res = RULE.rewrite(_kernel(SRC.replace("w[c]", "w[c * 2]")), "w", {}, CTX)
    assert isinstance(res, NotApplicable) and "not base + a loop variable" in res.reason
    big = RuleContext(sizes={"n": 9000}, scalars={"n": 9000})
    res = RULE.rewrite(_kernel(), "w", {}, big)
    assert isinstance(res, NotApplicable) and "shared" in res.reason
    assert "y" not in RULE.sites(_kernel())  # written


def test_layernorm_gamma_beta():
    from kir.driver.load import load_kernel
    from kir.driver.rulecheck import context_for
    from kir.driver.runners import copy_inputs, run_interp

    loaded = load_kernel(EXAMPLES / "layernorm.cu", sizes={"rows": 3, "cols": 37})
    ctx = context_for(loaded)
    assert {"gamma", "beta"} <= set(RULE.sites(loaded.kernel))
    out = RULE.rewrite(loaded.kernel, "gamma", {}, ctx)
    out = RULE.rewrite(out, "beta", {}, ctx)
    assert not isinstance(out, NotApplicable), out
    verify(out)
    text = print_kernel(out, locations=False)
    assert "shared gamma_s: f32[37]" in text and "gamma_s[c_2]" in text
    assert text.index("barrier block") < text.index("return")
    inputs = loaded.bound.make_inputs(0)
    want = run_interp(loaded, copy_inputs(inputs))
    got = run_interp(dataclasses.replace(loaded, kernel=out), copy_inputs(inputs))
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6)


def test_examples():
    counts, bad = sweep_summary([RULE])
    print("stage-in-shared sweep:", counts)
    assert not bad, bad
    assert counts.get("same", 0) >= 4  # layernorm gamma and beta at two sizes


def test_the_budget_is_the_targets_static_shared_memory():
    """A softmax row of 8192 floats (32 KiB, beside the kernel's 64 B of warp partials) fits
    CUDA's 48 KiB of static shared memory but not Metal's 32 KiB; the staged kernel computes
    what the original did, and the row-in-shared hint stages it on CUDA."""
    from kir.backends import TARGETS
    from kir.driver.load import load_kernel
    from kir.driver.runners import copy_inputs, run_interp
    from kir.rules import context_for
    from kir.search.hints import hints
    from kir.driver.registry import load_registry

    loaded = load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 2, "cols": 8192})
    metal = RULE.rewrite(loaded.kernel, "x", {}, context_for(loaded, TARGETS["metal"]))
    assert isinstance(metal, NotApplicable) and "32768 B" in metal.reason
    cuda = RULE.rewrite(loaded.kernel, "x", {}, context_for(loaded, TARGETS["cuda"]))
    assert not isinstance(cuda, NotApplicable), cuda
    assert "shared x_s: f32[8192]" in print_kernel(cuda, locations=False)
    # The staged length is the spec's row length: longer rows would read past it, so the
    # kernel says it is right only at these sizes (a module then runs it at exactly them).
    assert cuda.launch.specialized and not loaded.kernel.launch.specialized
    inputs = loaded.bound.make_inputs(0)
    want = run_interp(loaded, copy_inputs(inputs))
    got = run_interp(dataclasses.replace(loaded, kernel=cuda), copy_inputs(inputs))
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-9)
    found = {h.name: [str(s) for s in h.steps]
             for h in hints(loaded.kernel, load_registry(),
                            context_for(loaded, TARGETS["cuda"]))}
    assert "stage-in-shared{buffer=x}" in found.get("row-in-shared", []), found
    assert found["online-row-in-shared"][:2] == ["online-softmax{loop=L0}", "stage-in-shared{buffer=x}"]


def test_whole_aligned_rows_are_copied_in_float4s():
    """A region that is a multiple of 4 x threads is copied with 16-byte loads and stores when it is
    whole and aligned at run time (rows of 8192 here), by the scalar copy otherwise (rows of
    8190: the staged length stays 8192, zero-filled past the row); both give the original's
    results on the interpreter, and on the emulator in CUDA and in Metal (rows of 2048 there,
    under Metal's 32 KiB)."""
    from kir.backends import TARGETS, emit
    from kir.backends.emulated_runner import EmulatedKernel
    from kir.backends.emulate import emulator_available
    from kir.driver.load import load_kernel
    from kir.driver.runners import copy_inputs, run_interp
    from kir.rules import context_for

    for target, cols, ragged in (("cuda", 8192, 8190), ("metal", 2048, 2045)):
        loaded = load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 2, "cols": cols})
        staged = RULE.rewrite(loaded.kernel, "x", {}, context_for(loaded, TARGETS[target]))
        assert not isinstance(staged, NotApplicable), staged
        text = print_kernel(staged, locations=False)
        assert f"if cols == {cols} && in % 4 == 0 {{" in text and "x[in + sv] as f32x4" in text
        # ... and stored with one 16-byte store: four 4-byte stores of consecutive elements
        # hit each shared-memory bank four times a warp.
        assert "x_s[sv] = sv_x4\n" in text and "x_s[sv + 1]" not in text
        for run_cols in (cols, ragged):
            at = load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 2, "cols": run_cols})
            inputs = at.bound.make_inputs(1)
            want = run_interp(at, copy_inputs(inputs))["y"]
            got = run_interp(dataclasses.replace(at, kernel=staged), copy_inputs(inputs))["y"]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
            if emulator_available()[0]:
                emulated = EmulatedKernel(emit(staged, at.bound, target))(copy_inputs(inputs))
                np.testing.assert_allclose(emulated["y"], want, rtol=1e-5, atol=1e-7)


def test_block_stride_loops_stepping_by_blockdim_are_staged():
    """vLLM's rms_norm reads its row in two ``idx += blockDim.x`` loops: the step is the
    launch's block width (128), so the row is staged (float4s when whole and aligned), and
    the kernel computes what the original does at the compiled row length and a shorter
    one, on the interpreter and on the emulator in CUDA and Metal."""
    from kir.backends import TARGETS, emit
    from kir.backends.emulate import emulator_available
    from kir.backends.emulated_runner import EmulatedKernel
    from kir.driver.load import load_kernel
    from kir.driver.runners import copy_inputs, run_interp
    from kir.rules import context_for

    corpus = EXAMPLES.parent / "tests" / "corpus"
    spec = str(corpus / "infer_norm.rms_norm.kir.toml")
    loaded = load_kernel(corpus / "infer_norm.cu", spec_path=spec, sizes={"T": 2, "H": 4096})
    assert "input" in RULE.sites(loaded.kernel)
    for target in ("cuda", "metal"):
        staged = RULE.rewrite(loaded.kernel, "input", {}, context_for(loaded, TARGETS[target]))
        assert not isinstance(staged, NotApplicable), staged
        text = print_kernel(staged, locations=False)
        assert "shared input_s: f32[4096]" in text and "as f32x4" in text
        assert staged.launch.specialized
        for hidden in (4096, 4090):
            at = load_kernel(corpus / "infer_norm.cu", spec_path=spec,
                             sizes={"T": 2, "H": hidden})
            inputs = at.bound.make_inputs(2)
            want = run_interp(at, copy_inputs(inputs))["out"]
            got = run_interp(dataclasses.replace(at, kernel=staged), copy_inputs(inputs))["out"]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
            if emulator_available()[0]:
                ran = EmulatedKernel(emit(staged, at.bound, target))(copy_inputs(inputs))["out"]
                np.testing.assert_allclose(ran, want, rtol=1e-5, atol=1e-6, err_msg=target)
