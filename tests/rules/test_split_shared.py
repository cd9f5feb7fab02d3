"""split-shared: golden IR, semantics, refusals, FlashAttention's sram, example sweep."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from kir.frontends.cuda import load_cuda
from kir.rewrites.split_shared import RULES
from loop_sizes import sweep_summary

from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Two tiles carved from one dynamic array: a = sm[0..8), b = sm[8..24) (n = 8).
SRC = """
__global__ void k(const float* x, float* y, int n) {
    extern __shared__ float sm[];
    int tx = threadIdx.x;
    float* a = sm;
    float* b = &sm[n];
    a[tx] = x[tx];
    b[2 * tx] = x[tx] * 2.0f;
    b[2 * tx + 1] = 1.0f;
    __syncthreads();
    y[tx] = a[7 - tx] + b[2 * tx] + b[15 - 2 * tx];
}
"""
CTX = RuleContext(sizes={"n": 8}, scalars={"n": 8})


def _kernel(src: str = SRC):
    return load_cuda(src, "t.cu", launch=Launch(("1", "1", "1"), (8, 1, 1), 96))


def test_golden_and_semantics():
    k = _kernel()
    out = RULE.rewrite(k, "sm", {}, CTX)
    verify(out)
    assert print_kernel(out, locations=False) == """\
kernel @k(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(8, 1, 1) shared_bytes=0 {
  shared sm_a: f32[8]
  shared sm_b: f32[16]
  let tx: i32 = i32(thread.x)
  sm_a[tx] = x[tx]
  sm_b[2 * tx] = x[tx] * 2.0
  sm_b[2 * tx + 1] = 1.0
  barrier block
  y[tx] = sm_a[7 - tx] + sm_b[2 * tx] + sm_b[15 - 2 * tx]
}
"""
    args = {"x": np.arange(8, dtype=np.float32), "y": np.zeros(8, np.float32), "n": 8}
    want = run_kernel(k, {a: np.copy(v) for a, v in args.items()}, {})
    got = run_kernel(out, {a: np.copy(v) for a, v in args.items()}, {})
    np.testing.assert_array_equal(got["y"], want["y"])


def test_access_leaving_its_tile_is_refused():
    # a[tx + 1] reaches a[8] == b[0] for the last thread: the tiles overlap in use.
    res = RULE.rewrite(_kernel(SRC.replace("a[7 - tx]", "a[tx + 1]")), "sm", {}, CTX)
    assert isinstance(res, NotApplicable) and "tile a" in res.reason


def test_offset_unknown_or_access_without_base_refused():
    res = RULE.rewrite(_kernel(), "sm", {}, RuleContext())
    assert isinstance(res, NotApplicable) and "not a constant" in res.reason
    res = RULE.rewrite(_kernel(SRC.replace("a[7 - tx]", "sm[tx]")), "sm", {}, CTX)
    assert isinstance(res, NotApplicable) and "no tile-offset" in res.reason
    assert RULE.sites(_kernel(SRC.replace("extern __shared__ float sm[];",
                                          "__shared__ float sm[24];"))) == []


def test_flash_attention_tiles():
    from kir.driver.load import load_kernel
    from kir.driver.rulecheck import context_for
    from kir.driver.runners import copy_inputs, run_interp

    loaded = load_kernel(EXAMPLES / "flash_attn.cu",
                         sizes={"B": 1, "H": 1, "N": 40, "D": 16, "T": 32})
    out = RULE.rewrite(loaded.kernel, "sram", {}, context_for(loaded))
    assert not isinstance(out, NotApplicable), out
    verify(out)
    text = print_kernel(out, locations=False)
    for line in ("shared sram_Qi: f32[512]", "shared sram_Kj: f32[512]",
                 "shared sram_Vj: f32[512]", "shared sram_S: f32[1024]",
                 "sum = sum + sram_Qi[tx * d + x_2] * sram_Kj[y * d + x_2]"):
        assert line in text
    assert "sram[" not in text and out.launch.shared_bytes == 0
    inputs = loaded.bound.make_inputs(0)
    want = run_interp(loaded, copy_inputs(inputs))
    got = run_interp(dataclasses.replace(loaded, kernel=out), copy_inputs(inputs))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


def test_examples():
    counts, bad = sweep_summary([RULE])
    print("split-shared sweep:", counts)
    assert not bad, bad
    assert counts.get("same", 0) >= 2  # flash_attn at both sizes
