"""split-reduction: a redundant serial reduction is spread over the warp's lanes."""

import numpy as np
from kir.rewrites.split_reduction import SplitReduction
from parallel_common import kernel, same_outputs, sweep_examples, text

from kir.rules import NotApplicable, RuleContext

RULE = SplitReduction()

SRC = """
__global__ void k(const float* part, float* y, int n) {
  float total = 0.0f;
  for (int i = 0; i < n; i++) total += part[blockIdx.x * n + i];
  y[blockIdx.x * 64 + threadIdx.x] = total;
}
"""


def test_golden_and_semantics():
    k = kernel(SRC, grid=("2", "1", "1"), block=(64, 1, 1))
    out = RULE.rewrite(k, "L0", {"ways": 32}, RuleContext())
    assert text(out) == """\
kernel @k(part: f32* global const, y: f32* global, n: i32)
    grid=("2", "1", "1") block=(64, 1, 1) shared_bytes=0 {
  let total: f32 = 0.0
  let total_part: f32 = 0.0
  for L0 i: i32 = i32(lane); i < n; i = i + 32 {
    total_part = total_part + part[block.x * u32(n) + u32(i)]
  }
  total = total + reduce.sum(total_part)
  y[block.x * 64_u32 + thread.x] = total
}"""
    rng = np.random.default_rng(0)
    for n in (7, 45, 100):
        args = {"part": rng.random(2 * n, dtype=np.float32), "y": np.zeros(128, np.float32),
                "n": n}
        same_outputs(k, out, args)


def test_not_applicable():
    per_lane = SRC.replace("part[blockIdx.x * n + i]", "part[threadIdx.x * n + i]")
    res = RULE.rewrite(kernel(per_lane, block=(64, 1, 1)), "L0", {"ways": 32}, RuleContext())
    assert isinstance(res, NotApplicable) and "between lanes" in res.reason
    guarded = SRC.replace("float total = 0.0f;", "float total = 0.0f; if (threadIdx.x < 5)")
    res = RULE.rewrite(kernel(guarded, block=(64, 1, 1)), "L0", {"ways": 32}, RuleContext())
    assert isinstance(res, NotApplicable) and "control flow" in res.reason
    res = RULE.rewrite(kernel(SRC, block=(48, 1, 1)), "L0", {"ways": 32}, RuleContext())
    assert isinstance(res, NotApplicable) and "partial warp" in res.reason


def test_examples():
    counts = sweep_examples([RULE])
    assert counts.get("same", 0) >= 4  # softmax L2 and L5 at two sizes
