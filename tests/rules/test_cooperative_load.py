"""cooperative-load: per-thread row loads into shared memory become block-strided."""

import numpy as np
from kir.rewrites.cooperative_load import CooperativeLoad
from parallel_common import kernel, same_outputs, sweep_examples, text

from kir.rules import NotApplicable, RuleContext

RULE = CooperativeLoad()

SRC = """
__global__ void k(const float* g, float* out, int d) {
  __shared__ float tile[512];
  int tx = threadIdx.x;
  for (int x = 0; x < d; x++) tile[tx * d + x] = g[blockIdx.x * 32 * d + tx * d + x];
  __syncthreads();
  float s = 0.0f;
  for (int x = 0; x < d; x++) s += tile[x * 32 + tx];
  out[blockIdx.x * 32 + tx] = s;
}
"""


def test_golden_and_semantics():
    k = kernel(SRC, grid=("2", "1", "1"))
    out = RULE.rewrite(k, "L0", {}, RuleContext())
    lines = text(out).splitlines()
    assert lines[4:10] == [
        "  for L0 coop: i32 = i32(thread.x); coop < i32(block_dim.x) * d; "
        "coop = coop + i32(block_dim.x) {",
        "    let coop_row: i32 = coop / d",
        "    let x: i32 = coop % d",
        "    tile[coop_row * d + x] = g[block.x * 32_u32 * u32(d) + u32(coop_row * d) + u32(x)]",
        "  }",
        "  barrier block",
    ]
    g = np.random.default_rng(0).random(2 * 32 * 16, dtype=np.float32)
    same_outputs(k, out, {"g": g, "out": np.zeros(64, np.float32), "d": 16})


def test_not_applicable():
    no_sync = SRC.replace("__syncthreads();", "")
    res = RULE.rewrite(kernel(no_sync, grid=("2", "1", "1")), "L0", {}, RuleContext())
    assert isinstance(res, NotApplicable) and "barrier" in res.reason
    col = SRC.replace("tile[tx * d + x] =", "tile[x * 32 + tx] =")
    res = RULE.rewrite(kernel(col, grid=("2", "1", "1")), "L0", {}, RuleContext())
    assert isinstance(res, NotApplicable) and "index" in res.reason


def test_applies_to_flash_attention():
    from parallel_common import EXAMPLES

    from kir.driver.load import load_kernel
    loaded = load_kernel(EXAMPLES / "flash_attn.cu", sizes={"N": 40, "D": 16, "H": 1})
    assert not isinstance(RULE.rewrite(loaded.kernel, "L1", {}, RuleContext()), NotApplicable)


def test_examples():
    counts = sweep_examples([RULE])
    assert counts.get("same", 0) >= 2  # flash_attn's K/V load at both sizes
