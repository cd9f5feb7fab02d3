"""resize-block: a blockDim-generic kernel gets another block size."""

import numpy as np
from kir.rewrites.parallel.resize_block import ResizeBlock
from parallel_common import kernel, same_outputs, sweep_examples

from kir.rules import NotApplicable, RuleContext

RULE = ResizeBlock()

SRC = """
__global__ void rowsum(const float* x, float* y, int cols) {
  __shared__ float sh[1024];
  int row = blockIdx.x;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[row * cols + c];
  sh[threadIdx.x] = s;
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[row] = sh[0];
}
"""


def test_launch_changes_only_and_semantics():
    k = kernel(SRC, grid=("rows", "1", "1"), block=(128, 1, 1))
    x = np.random.default_rng(0).random(3 * 300, dtype=np.float32)
    for threads in (64, 256, 1024):
        out = RULE.rewrite(k, "kernel", {"threads": threads}, RuleContext())
        assert out.launch.block == (threads, 1, 1) and out.body == k.body
        same_outputs(k, out, {"x": x, "y": np.zeros(3, np.float32), "cols": 300}, {"rows": 3},
                     rtol=1e-4)


def test_not_applicable():
    k = kernel(SRC, grid=("rows", "1", "1"), block=(128, 1, 1))
    res = RULE.rewrite(k, "kernel", {"threads": 128}, RuleContext())
    assert isinstance(res, NotApplicable) and "already" in res.reason
    small = SRC.replace("sh[1024]", "sh[128]")
    res = RULE.rewrite(kernel(small, block=(128, 1, 1)), "kernel", {"threads": 256}, RuleContext())
    assert isinstance(res, NotApplicable) and "smaller than 256" in res.reason
    fixed = SRC.replace("c += blockDim.x", "c += 128")
    res = RULE.rewrite(kernel(fixed, block=(128, 1, 1)), "kernel", {"threads": 64}, RuleContext())
    assert isinstance(res, NotApplicable) and "hard-codes" in res.reason
    grid = "__global__ void k(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }"
    res = RULE.rewrite(kernel(grid, block=(128, 1, 1)), "kernel", {"threads": 64}, RuleContext())
    assert isinstance(res, NotApplicable) and "grid by thread" in res.reason


def test_examples():
    counts = sweep_examples([RULE])
    assert counts.get("same", 0) == 0  # every example hard-codes or grid-maps its block size


# One warp a row: lanes combined by shuffles, lane 0 writes the row's maximum. A bigger block
# would add warps whose maxima nobody combines (the sweep over kir's corpus found resize-block
# changing such an argmax's answers).
WARP_ONLY = """
__global__ void rowmax(const float* x, float* y, int cols) {
  float best = -1e30f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    best = fmaxf(best, x[blockIdx.x * cols + c]);
  for (int o = 16; o > 0; o >>= 1) best = fmaxf(best, __shfl_down_sync(0xffffffff, best, o));
  if (threadIdx.x == 0) y[blockIdx.x] = best;
}
"""


def test_warps_combined_by_nothing_are_refused():
    k = kernel(WARP_ONLY, grid=("rows", "1", "1"), block=(32, 1, 1))
    res = RULE.rewrite(k, "kernel", {"threads": 64}, RuleContext())
    assert isinstance(res, NotApplicable) and "warp shuffles" in res.reason
    # The same lanes' total added into the output by an atomic combines any number of warps.
    atomic = WARP_ONLY.replace("y[blockIdx.x] = best", "atomicAdd(&y[blockIdx.x], best)")
    res = RULE.rewrite(kernel(atomic, grid=("rows", "1", "1"), block=(32, 1, 1)), "kernel",
                       {"threads": 64}, RuleContext())
    assert not isinstance(res, NotApplicable), res
