"""parallel-scan: a per-thread linear recurrence becomes a warp-wide parallel scan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from kir.rewrites.scan.parallel_scan import ParallelScan

from kir.driver.load import load_kernel
from kir.driver.rulecheck import context_for, example_files, sweep
from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULE = ParallelScan()
SRC = """
__global__ void rec(const float* a, const float* b, float* y, float* hout, int T) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float h = 1.0f;
    for (int t = 0; t < T; t++) {
        float at = a[i * T + t];
        float unused = at * 2.0f;
        UPDATE;
        y[i * T + t] = h;
    }
    hout[i] = h;
}
"""
LAUNCH = Launch(("n / 4", "1", "1"), (4, 1, 1))


def recurrence(update: str = "h = at * h + b[i * T + t]", src: str = SRC):
    return load_cuda(src.replace("UPDATE", update), "t.cu", launch=LAUNCH)


# Thread i of 4 per block becomes warp i % 2 of new block 2 * (i / 4) + (i % 4) / 2: every
# lane recomputes i, composes (a, b) over its chunk of ceil(T / 32) steps, five shuffle-up
# rounds scan the pairs, the exclusive prefix applied to h's initial value is the carry-in,
# the original body replays the chunk, and lane 31's inclusive pair gives the final h.
EXPECTED = """kernel @rec(a: f32* global const, b: f32* global const, y: f32* global, hout: f32* global, T: i32)
    grid=("(n / 4) * 2", "1", "1") block=(64, 1, 1) shared_bytes=0 {
  let i: i32 = i32(block.x / 2_u32 * 4_u32 + (block.x % 2_u32 * 2_u32 + thread.x / 32_u32))
  let h: f32 = 1.0
  let h_init: f32 = h
  let scan_lane: i32 = i32(lane)
  let scan_trip: i32 = select(0 < T, T, 0)
  let scan_chunk: i32 = (scan_trip + 31) / 32
  let scan_lo: i32 = scan_lane * scan_chunk
  let scan_hi: i32 = select(scan_lo + scan_chunk < scan_trip, scan_lo + scan_chunk, scan_trip)
  let scan_a: f32 = 1.0
  let scan_b: f32 = 0.0
  for L1 t_1: i32 = scan_lo; t_1 < scan_hi; t_1 = t_1 + 1 {
    let at_1: f32 = a[i * T + t_1]
    let scan_at: f32 = at_1
    scan_b = scan_at * scan_b + b[i * T + t_1]
    scan_a = scan_at * scan_a
  }
  let scan_pa: f32 = shuffle.up(scan_a, 1)
  let scan_pb: f32 = shuffle.up(scan_b, 1)
  scan_b = select(scan_lane >= 1, scan_a * scan_pb + scan_b, scan_b)
  scan_a = select(scan_lane >= 1, scan_a * scan_pa, scan_a)
  let scan_pa_1: f32 = shuffle.up(scan_a, 2)
  let scan_pb_1: f32 = shuffle.up(scan_b, 2)
  scan_b = select(scan_lane >= 2, scan_a * scan_pb_1 + scan_b, scan_b)
  scan_a = select(scan_lane >= 2, scan_a * scan_pa_1, scan_a)
  let scan_pa_2: f32 = shuffle.up(scan_a, 4)
  let scan_pb_2: f32 = shuffle.up(scan_b, 4)
  scan_b = select(scan_lane >= 4, scan_a * scan_pb_2 + scan_b, scan_b)
  scan_a = select(scan_lane >= 4, scan_a * scan_pa_2, scan_a)
  let scan_pa_3: f32 = shuffle.up(scan_a, 8)
  let scan_pb_3: f32 = shuffle.up(scan_b, 8)
  scan_b = select(scan_lane >= 8, scan_a * scan_pb_3 + scan_b, scan_b)
  scan_a = select(scan_lane >= 8, scan_a * scan_pa_3, scan_a)
  let scan_pa_4: f32 = shuffle.up(scan_a, 16)
  let scan_pb_4: f32 = shuffle.up(scan_b, 16)
  scan_b = select(scan_lane >= 16, scan_a * scan_pb_4 + scan_b, scan_b)
  scan_a = select(scan_lane >= 16, scan_a * scan_pa_4, scan_a)
  let scan_ea: f32 = shuffle.up(scan_a, 1)
  let scan_eb: f32 = shuffle.up(scan_b, 1)
  h = select(scan_lane >= 1, scan_ea * h_init + scan_eb, h_init)
  for L0 t: i32 = scan_lo; t < scan_hi; t = t + 1 {
    let at: f32 = a[i * T + t]
    let unused: f32 = at * 2.0
    h = at * h + b[i * T + t]
    y[i * T + t] = h
  }
  h = shuffle.idx(scan_a * h_init + scan_b, 31)
  hout[i] = h
}
"""


def test_golden():
    k = recurrence()
    assert RULE.sites(k) == ["L0"]
    out = RULE.rewrite(k, "L0", {"seqs": 2}, RuleContext(scalars={"T": 37}))
    verify(out)
    assert print_kernel(out, locations=False) == EXPECTED


@pytest.mark.parametrize("steps", [1, 5, 32, 37, 64, 100])
@pytest.mark.parametrize("seqs", [1, 2, 4])
def test_semantics(steps, seqs):
    """Any trip count: fewer steps than lanes, ragged chunks, exact multiples."""
    k = recurrence()
    out = RULE.rewrite(k, "L0", {"seqs": seqs}, RuleContext(scalars={"T": steps}))
    rng = np.random.default_rng(steps)
    n = 8
    args = {"a": rng.uniform(0.5, 1.0, n * steps).astype(np.float32),
            "b": rng.uniform(-1, 1, n * steps).astype(np.float32),
            "y": np.zeros(n * steps, np.float32), "hout": np.zeros(n, np.float32), "T": steps}
    want = run_kernel(k, args, {"n": n})
    got = run_kernel(out, args, {"n": n})
    for name in ("y", "hout"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sizes", [{}, {"L": 37}])
def test_selective_scan_example(sizes):
    loaded = load_kernel(EXAMPLES / "selective_scan.cu", sizes=sizes)
    assert RULE.sites(loaded.kernel) == ["L0"]
    out = RULE.rewrite(loaded.kernel, "L0", {"seqs": 4}, context_for(loaded))
    verify(out)
    assert out.launch.block == (128, 1, 1)
    assert out.launch.grid[0] == "(ceil(B * D * S / 128)) * 32"
    inputs = loaded.bound.make_inputs(1)
    want = loaded.bound.reference(dict(inputs))["y"]
    got = run_kernel(out, inputs, loaded.bound.sizes)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_not_applicable():
    ctx = RuleContext(scalars={"T": 8})
    two = recurrence(src=SRC.replace("float h = 1.0f;", "float h = 1.0f; float acc = 0.0f;")
                     .replace("hout[i] = h;", "hout[i] = h + acc;"),
                     update="h = at * h + b[i * T + t]; acc += h")
    r = RULE.rewrite(two, "L0", {"seqs": 2}, ctx)
    assert isinstance(r, NotApplicable) and "carries 2 variables" in r.reason
    assert RULE.sites(two) == []
    square = RULE.rewrite(recurrence("h = h * h + b[i * T + t]"), "L0", {"seqs": 2}, ctx)
    assert isinstance(square, NotApplicable) and "not h = a * h + b" in square.reason
    feedback = RULE.rewrite(recurrence("h = at * h + y[i * T + t]"), "L0", {"seqs": 2}, ctx)
    assert isinstance(feedback, NotApplicable) and "reads a buffer it writes" in feedback.reason
    wide = RULE.rewrite(recurrence(), "L0", {"seqs": 8}, ctx)
    assert isinstance(wide, NotApplicable) and "do not divide" in wide.reason
    # Without the spec's T the store index i * T + t cannot be shown distinct per iteration.
    unknown = RULE.rewrite(recurrence(), "L0", {"seqs": 2}, RuleContext())
    assert isinstance(unknown, NotApplicable) and "stores in the loop" in unknown.reason
    softmax = load_kernel(EXAMPLES / "softmax.cu").kernel
    assert RULE.sites(softmax) == []
    coop = RULE.rewrite(softmax, "L0", {"seqs": 1}, RuleContext())
    assert isinstance(coop, NotApplicable) and "shared memory" in coop.reason


def test_sweep_over_examples():
    sizes = {
        "flash_attn.cu": [{"B": 1, "H": 1, "N": 64, "D": 16, "T": 32}],
        "layernorm.cu": [{"rows": 3, "cols": 37}],
        "reduce.cu": [{"n": 1000}],
        "selective_scan.cu": [{"B": 1, "L": 64, "D": 4, "S": 4},
                              {"B": 2, "L": 37, "D": 4, "S": 4},
                              {"B": 1, "L": 13, "D": 8, "S": 4}],
        "sgemm.cu": [{"M": 32, "N": 32, "K": 32, "TILE": 16}],
        "softmax.cu": [{"rows": 4, "cols": 33}],
    }
    results = sweep([RULE], example_files(EXAMPLES), sizes)
    bad = [(str(a.step), a.kernel_file, a.detail) for a in results
           if a.status in ("changed", "error")]
    checked = sum(a.status == "same" for a in results)
    print(f"parallel-scan: {checked} applications checked")
    assert not bad
    assert checked == 12  # selective_scan: 3 sizes x 4 values of seqs
