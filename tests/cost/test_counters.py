"""The interpreter's optional counters: coalescing, bank conflicts, ops, sync, divergence."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from kir.driver.load import load_kernel
from kir.interp import Counters, run_kernel
from tests.cost.kernels import (
    COPY,
    STRIDED,
    UNIFORM,
    exp_kernel,
    kernel,
    per_block,
    run,
    shared_stride,
)

N = 8192


def test_coalesced_copy_touches_four_sectors_per_warp():
    c, out = run(COPY, N, N // 256)
    assert np.array_equal(out["y"], out["x"])
    assert c.global_load_requests == N // 32 and c.global_store_requests == N // 32
    assert c.global_load_sectors == N * 4 // 32
    assert c.global_store_sectors == N * 4 // 32
    assert c.global_load_bytes == c.global_store_bytes == N * 4
    assert c.global_unique_read_bytes == c.global_unique_write_bytes == N * 4
    assert (c.groups, c.threads_per_group, c.grid) == (N // 256, 256, (N // 256, 1, 1))


def test_strided_read_touches_one_sector_per_lane():
    c, out = run(STRIDED, N, N // 256, scalar=N // 32)
    assert sorted(out["y"].tolist()) == sorted(out["x"].tolist())  # a permutation
    assert c.global_load_sectors == N
    assert c.global_store_sectors == N * 4 // 32
    assert c.global_unique_read_bytes == N * 4


def test_uniform_address_is_one_sector_per_warp():
    c, _ = run(UNIFORM, N, N // 256)
    assert c.global_load_sectors == N // 32
    assert c.global_unique_read_bytes == 4


@pytest.mark.parametrize("stride, degree", [(1, 1), (2, 2), (4, 4), (32, 32), (33, 1)])
def test_bank_conflict_degree(stride, degree):
    c, out = run(shared_stride(stride), 64, 2)
    assert np.array_equal(out["y"], out["x"])
    warps = 2 * 2  # one warp per block, a store and a load
    assert c.shared_accesses == warps
    assert c.shared_wavefronts == warps * degree
    assert c.bank_conflicts == warps * (degree - 1)
    assert c.barriers == 2 and c.threadgroup_bytes == (32 * stride + 1) * 4


def test_broadcast_read_has_no_conflict():
    k = kernel("bcast", """
  shared s: f32[32]
  s[i32(thread.x)] = 1.0
  barrier block
  y[i32(thread.x)] = s[0]""", 32)
    c, _ = run(k, 32, 1)
    assert c.shared_wavefronts == 2 and c.bank_conflicts == 0


def test_fast_and_precise_special_functions_are_counted_apart():
    precise, _ = run(exp_kernel(False, repeat=8), 512, 2)
    fast, _ = run(exp_kernel(True, repeat=8), 512, 2)
    assert precise.sfu == 8 * 512 and precise.sfu_fast == 0
    assert fast.sfu_fast == 8 * 512 and fast.sfu == 0
    assert precise.flops == fast.flops == 8 * 512  # acc * 0.5
    assert precise.loop_iterations == 8 * 512
    assert precise.loop_warp_iterations == 8 * 512 // 32


def test_divergence_counts_idle_lanes():
    full = kernel("full", "  let i: i32 = i32(thread.x)\n  y[i] = x[i] * 3.0")
    half = kernel("half", """
  let i: i32 = i32(thread.x)
  if i % 2 == 0 {
    y[i] = x[i] * 3.0
  }""")
    cf, _ = run(full, 256, 1)
    ch, _ = run(half, 256, 1)
    assert cf.flops == 256 and ch.flops == 128
    assert ch.idle_lanes >= 128  # the multiply ran on 8 warps with half their lanes idle
    assert cf.idle_lanes == 0


def test_atomics_record_same_address_contention():
    same = kernel("same", "  atomic.add(y[0], x[i32(thread.x)])")
    spread = kernel("spread", "  atomic.add(y[i32(thread.x)], x[i32(thread.x)])")
    cs, out = run(same, 256, 1)
    cd, _ = run(spread, 256, 1)
    assert out["y"][0] == pytest.approx(np.arange(256, dtype=np.float32).sum() / 256, rel=1e-5)
    assert cs.atomics == cd.atomics == 256
    assert cs.atomic_serial == 256 and cd.atomic_serial == 1


def test_loop_work_per_block():
    c, out = run(per_block(1024), 4096, 4)
    assert np.allclose(out["y"], out["x"] * 2)
    assert c.loop_iterations == 4096 and c.flops == 4096


def test_counting_does_not_change_results_and_pickles():
    loaded = load_kernel("examples/softmax.cu", sizes={"rows": 4, "cols": 300})
    inputs = loaded.bound.make_inputs(0)
    plain = run_kernel(loaded.kernel, inputs, loaded.bound.sizes)
    counters = Counters()
    counted = run_kernel(loaded.kernel, inputs, loaded.bound.sizes, counters=counters)
    assert np.array_equal(plain["y"], counted["y"])
    assert counters.warp_ops > 0 and counters.sfu > 0 and counters.barriers == 2 * 4
    again = pickle.loads(pickle.dumps(counters))
    assert again.as_dict() == counters.as_dict()


def test_no_counting_code_runs_without_counters(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("counting ran")
    for name in ("alu", "access", "barrier", "iteration", "warp_op", "lanes_warps"):
        monkeypatch.setattr(Counters, name, boom)
    loaded = load_kernel("examples/softmax.cu", sizes={"rows": 2, "cols": 100})
    run_kernel(loaded.kernel, loaded.bound.make_inputs(0), loaded.bound.sizes)
