"""parallelize-loop: an independent top-level loop becomes a grid dimension."""

import numpy as np
from kir.rewrites.parallel.parallelize_loop import ParallelizeLoop
from parallel_common import kernel, same_outputs, sweep_examples, text

from kir.rules import NotApplicable, RuleContext

RULE = ParallelizeLoop()

SRC = """
__global__ void k(const float* x, float* y, int n, int m) {
  for (int r = 0; r < n; r++) {
    for (int c = threadIdx.x; c < m; c += 32) y[r * m + c] = 2.0f * x[r * m + c];
  }
}
"""
CTX = RuleContext(sizes={"n": 5, "m": 32}, scalars={"n": 5, "m": 32})


def test_golden_and_semantics():
    k = kernel(SRC)
    out = RULE.rewrite(k, "L0", {"dim": "z"}, CTX)
    assert text(out) == """\
kernel @k(x: f32* global const, y: f32* global, n: i32, m: i32)
    grid=("1", "1", "n") block=(32, 1, 1) shared_bytes=0 {
  let r: i32 = i32(block.z)
  if r < n {
    for L1 c: i32 = i32(thread.x); c < m; c = c + 32 {
      y[r * m + c] = 2.0 * x[r * m + c]
    }
  }
}"""
    x = np.random.default_rng(0).random(160, dtype=np.float32)
    same_outputs(k, out, {"x": x, "y": np.zeros(160, np.float32), "n": 5, "m": 32}, {"n": 5})


def test_runtime_bound_becomes_number():
    k = kernel(SRC.replace("r < n", "r < n - 1"))
    out = RULE.rewrite(k, "L0", {"dim": "y"}, CTX)
    assert out.launch.grid == ("1", "4", "1")


def test_not_applicable():
    acc = SRC.replace("y[r * m + c] = 2.0f * x[r * m + c]", "y[c] += x[r * m + c]")
    res = RULE.rewrite(kernel(acc), "L0", {"dim": "z"}, CTX)
    assert isinstance(res, NotApplicable) and "dependence" in res.reason
    uses_z = SRC.replace("2.0f *", "(float)blockIdx.z *")
    res = RULE.rewrite(kernel(uses_z), "L0", {"dim": "z"}, CTX)
    assert isinstance(res, NotApplicable) and "block.z" in res.reason
    res = RULE.rewrite(kernel(SRC, grid=("1", "3", "1")), "L0", {"dim": "y"}, CTX)
    assert isinstance(res, NotApplicable) and "already" in res.reason


def test_examples():
    sweep_examples([RULE])


def test_a_bound_without_a_spec_expression_gives_a_specialized_launch():
    """With the spec's expressions the grid is ``ceil(N / T)`` (right at any N); without them
    only the count at the spec's sizes is known, and the launch says it is specialized."""
    from kir.driver.load import load_kernel
    from kir.driver.registry import load_registry
    from kir.rules import RuleContext, apply_trace, context_for, parse_step

    loaded = load_kernel("examples/flash_attn.cu")
    registry = load_registry()
    steps = [parse_step(s, registry) for s in ("interchange-loops{loop=L0}",
                                                "parallelize-loop{loop=L2,dim=z}")]
    full = context_for(loaded)
    out = apply_trace(loaded.kernel, steps, registry, full, strict=True).kernel
    assert out.launch.grid[2] == "ceil(N / T)" and not out.launch.specialized
    bare = RuleContext(sizes=full.sizes, scalars=full.scalars)
    out = apply_trace(loaded.kernel, steps, registry, bare, strict=True).kernel
    assert out.launch.grid[2] == "8" and out.launch.specialized
