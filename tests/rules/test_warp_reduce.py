"""warp-reduce: shuffle butterflies and shared-memory trees become WarpReduce."""

import numpy as np
from kir.rewrites.warp_reduce import WarpReduceRule
from parallel_common import kernel, same_outputs, sweep_examples, text

from kir.rules import NotApplicable, RuleContext

RULE = WarpReduceRule()

BUTTERFLY = """
__global__ void k(const float* x, float* y) {
  float v = x[threadIdx.x];
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, off));
  y[threadIdx.x] = v;
}
"""

TREE = """
__global__ void k(const float* x, float* y) {
  __shared__ float sh[128];
  sh[threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = sh[0];
}
"""


def test_butterfly_golden_and_semantics():
    k = kernel(BUTTERFLY)
    assert RULE.sites(k) == ["0"]
    out = RULE.rewrite(k, "0", {}, RuleContext())
    assert text(out) == """\
kernel @k(x: f32* global const, y: f32* global)
    grid=("1", "1", "1") block=(32, 1, 1) shared_bytes=0 {
  let v: f32 = x[thread.x]
  v = reduce.max(v)
  y[thread.x] = v
}"""
    x = np.random.default_rng(0).random(32, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(32, np.float32)})


def test_tree_tail_golden_and_semantics():
    k = kernel(TREE, grid=("3", "1", "1"), block=(128, 1, 1))
    out = RULE.rewrite(k, "0", {}, RuleContext())
    body = text(out)
    assert "for L0 s: u32 = block_dim.x / 2_u32; s > 32_u32; s = s >> 1_u32 {" in body
    assert """\
  if thread.x < 32_u32 {
    let sh_red: f32 = reduce.sum(sh[thread.x] + sh[thread.x + 32_u32])
    if thread.x == 0_u32 {
      sh[0_u32] = sh_red
    }
  }
  barrier block
  if thread.x == 0_u32 {
    y[block.x] = sh[0]
  }""" in body
    x = np.random.default_rng(1).random(384, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(3, np.float32)})


def test_not_applicable():
    partial = BUTTERFLY.replace("off = 16", "off = 8")
    assert RULE.sites(kernel(partial)) == []
    assert isinstance(RULE.rewrite(kernel(partial), "0", {}, RuleContext()), NotApplicable)
    reads_all = TREE.replace("y[blockIdx.x] = sh[0]", "y[blockIdx.x] = sh[1]")
    res = RULE.rewrite(kernel(reads_all, grid=("3", "1", "1"), block=(128, 1, 1)), "0", {},
                     RuleContext())
    assert isinstance(res, NotApplicable) and "other than 0" in res.reason


def test_examples():
    counts = sweep_examples([RULE])
    assert counts.get("same", 0) >= 5  # softmax x2, layernorm x2, reduce x1 (per size set)
