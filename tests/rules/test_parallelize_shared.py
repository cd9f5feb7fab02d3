"""parallelize-loop over loops with block-wide shared tiles and barriers (the FlashAttention-2
query-tile loop): shared arrays refilled by every iteration are private per block, global
memory must not be shared between iterations."""

import numpy as np
from kir.rewrites.parallel.blocks import block_private_buffers, cross_iteration_conflicts
from kir.rewrites.parallel.parallelize_loop import ParallelizeLoop
from parallel_common import kernel, same_outputs, text

from kir.rules import NotApplicable, RuleContext

RULE = ParallelizeLoop()
CTX = RuleContext(sizes={"n": 3}, scalars={"n": 3})

# Every iteration loads a tile of x, then each thread reads its mirror element.
SRC = """
__global__ void k(const float* x, float* y, int n) {
  __shared__ float t[32];
  int tx = threadIdx.x;
  for (int i = 0; i < n; i++) {
    t[tx] = x[i * 32 + tx];
    __syncthreads();
    y[i * 32 + tx] = y[i * 32 + tx] + t[31 - tx];
    __syncthreads();
  }
}
"""


def _args():
    rng = np.random.default_rng(1)
    return {"x": rng.random(96, dtype=np.float32), "y": rng.random(96, dtype=np.float32),
            "n": 3}


def test_block_private_tile_golden_and_semantics():
    k = kernel(SRC)
    assert block_private_buffers(k, "L0", {"n": 3}) == {"t"}
    out = RULE.rewrite(k, "L0", {"dim": "z"}, CTX)
    assert text(out) == """\
kernel @k(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "n") block=(32, 1, 1) shared_bytes=0 {
  shared t: f32[32]
  let tx: i32 = i32(thread.x)
  let i: i32 = i32(block.z)
  if i < n {
    t[tx] = x[i * 32 + tx]
    barrier block
    y[i * 32 + tx] = y[i * 32 + tx] + t[31 - tx]
    barrier block
  }
}"""
    same_outputs(k, out, _args(), {"n": 3})


def test_tile_read_before_it_is_written_is_refused():
    # t[31 - tx] is read before this iteration's load: it still holds the last tile.
    src = SRC.replace("t[tx] = x[i * 32 + tx];\n    __syncthreads();\n", "").replace(
        "__syncthreads();\n  }", "__syncthreads();\n    t[tx] = x[i * 32 + tx];\n"
        "    __syncthreads();\n  }")
    k = kernel(src)
    assert block_private_buffers(k, "L0", {"n": 3}) == frozenset()
    res = RULE.rewrite(k, "L0", {"dim": "z"}, CTX)
    assert isinstance(res, NotApplicable) and "t" in res.reason


def test_no_barrier_between_load_and_use_is_not_private():
    src = SRC.replace("    __syncthreads();\n    y[", "    y[")
    assert block_private_buffers(kernel(src), "L0", {"n": 3}) == frozenset()


def test_thread_dependent_load_is_not_private():
    # Only half the threads load: the other half of the tile is stale.
    src = SRC.replace("t[tx] = x[i * 32 + tx];", "if (tx < 16) t[tx] = x[i * 32 + tx];")
    assert block_private_buffers(kernel(src), "L0", {"n": 3}) == frozenset()


def test_global_shared_between_iterations_across_barriers_is_refused():
    # Thread tx reads what thread 31 - tx wrote in the previous iteration: ordered by the
    # barriers in one block, unordered across blocks (no same-thread dependence exists).
    src = SRC.replace("y[i * 32 + tx] = y[i * 32 + tx] + t[31 - tx];",
                      "y[i * 32 + tx] = t[31 - tx] + (i > 0 ? y[i * 32 - 1 - tx] : 0.0f);")
    k = kernel(src)
    assert cross_iteration_conflicts(k, "L0", {"n": 3}) == {"y"}
    res = RULE.rewrite(k, "L0", {"dim": "z"}, CTX)
    assert isinstance(res, NotApplicable) and "'y'" in res.reason
    assert cross_iteration_conflicts(kernel(SRC), "L0", {"n": 3}) == set()
