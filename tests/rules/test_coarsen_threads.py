"""coarsen-threads: each block does the work of `factor` former blocks."""

import numpy as np
from parallel_common import kernel, same_outputs, sweep_examples, text

from kir.rewrites.coarsen_threads import CoarsenThreads
from kir.rules import NotApplicable, RuleContext

RULE = CoarsenThreads()

SRC = """
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * 32 + threadIdx.x;
  if (i >= n) return;
  y[i] = x[i] + 1.0f;
}
"""


def test_golden_and_semantics():
    k = kernel(SRC, grid=("ceil(n / 32)", "1", "1"))
    out = RULE.apply(k, "x", {"factor": 2}, RuleContext(sizes={"n": 100}))
    assert text(out) == """\
kernel @k(x: f32* global const, y: f32* global, n: i32)
    grid=("ceil((ceil(n / 32)) / 2)", "1", "1") block=(32, 1, 1) shared_bytes=0 {
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
    out = RULE.apply(k, "x", {"factor": 4}, RuleContext())
    body = text(out)
    assert body.splitlines()[2].strip() == "shared t: f32[32]"
    assert "    barrier block\n  }\n}" in body
    x = np.random.default_rng(1).random(160, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(160, np.float32)})


def test_not_applicable():
    k = kernel(SRC, grid=("ceil(n / 32)", "1", "1"))
    res = RULE.apply(k, "x", {"factor": 2}, RuleContext())
    assert isinstance(res, NotApplicable) and "not known" in res.reason
    sync = SRC.replace("if (i >= n) return;", "if (i >= n) return; __syncthreads();")
    res = RULE.apply(kernel(sync, grid=("4", "1", "1")), "x", {"factor": 2}, RuleContext())
    assert isinstance(res, NotApplicable) and "returns early" in res.reason
    assert RULE.sites(kernel(SRC)) == []


def test_examples():
    sweep_examples([RULE])
