"""Counters of the structures fast kernels have: SIMD-group matrices, shuffles apart from SIMD
reductions, contended atomics, fused multiply-adds, L1 reuse, sector footprint, registers."""

from __future__ import annotations

import numpy as np
import pytest

from kir.interp import Counters, run_kernel
from kir.interp.count_hooks import estimate_registers
from kir.ir.parser import parse_kernel
from tests.cost.kernels import GID, kernel, run

HEAD = ('kernel @frag(A: f32* global const, C: f32* global)\n'
        '    grid=("G", "1", "1") block=(64, 1, 1) shared_bytes=0 {\n')


def fragment_kernel(stride: int, from_shared: bool = True):
    """Two warps per group: each loads an 8x8 fragment of A (global) and one of a
    threadgroup copy with row ``stride`` (or A again), multiplies them, stores the product."""
    b = f"mload T[0] stride {stride}" if from_shared else "mload A[0] stride 8"
    return parse_kernel(HEAD + f"""\
  shared T: f32[{8 * stride}]
  let t: i32 = i32(thread.x)
  T[t % 8 + t / 8 % 8 * {stride}] = A[t]
  barrier block
  matrix a: f32m8x8 = mload A[0] stride 8
  matrix b: f32m8x8 = {b}
  matrix c: f32m8x8 = fill 0.0
  mma c += a * b
  mstore C[(i32(block.x) * 2 + i32(warp)) * 64] stride 8 = c
}}
""")


def count(k, groups: int = 3) -> tuple[Counters, dict]:
    counters = Counters()
    a = np.arange(64, dtype=np.float32) / 64
    out = run_kernel(k, {"A": a, "C": np.zeros(groups * 128, np.float32)}, {"G": groups},
                     counters=counters)
    return counters, out


def test_matrix_statements_are_counted_per_warp():
    c, out = count(fragment_kernel(8))
    warps = 3 * 2
    a = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    assert np.allclose(out["C"][:64].reshape(8, 8), a @ a, rtol=1e-6)
    assert c.matrix_mma == warps and c.matrix_flops == warps * 2 * 8 * 8 * 8
    assert c.matrix_loads == 2 * warps and c.matrix_stores == warps
    # the global fragment: 64 contiguous floats = 8 sectors, 2 lines, per warp; plus the
    # 64-lane scalar copy into T (8 sectors per group's two warps)
    assert c.global_load_bytes == warps * 256 + 3 * 64 * 4
    assert c.global_load_sectors == warps * 8 + 3 * 8
    assert c.global_store_bytes == warps * 256 and c.global_store_sectors == warps * 8
    assert c.global_unique_write_bytes == 3 * 128 * 4  # every element of C written once


@pytest.mark.parametrize("stride, wavefronts", [(8, 2), (9, 3), (32, 8), (36, 2)])
def test_fragment_bank_conflicts(stride, wavefronts):
    # 64 words need two wavefronts at best; a row stride of 32 floats puts every row of the
    # fragment on the same eight banks; with 9, bank 0 serves rows 0, 3 and 7.
    c, _ = count(fragment_kernel(stride), groups=1)
    without, _ = count(fragment_kernel(stride, from_shared=False), groups=1)
    assert c.shared_wavefronts - without.shared_wavefronts == 2 * wavefronts  # two warps
    assert c.bank_conflicts - without.bank_conflicts == 2 * (wavefronts - 2)


def test_shuffles_and_simd_reductions_are_told_apart():
    k = kernel("warps", GID + """
  let v: f32 = x[i]
  v = v + shuffle.xor(v, 1)
  v = v + shuffle.xor(v, 2)
  y[i] = reduce.sum(v)""")
    c, out = run(k, 256, 1)
    assert c.warp_ops == 3 * 8 and c.warp_reductions == 8
    assert np.allclose(out["y"][:32], out["x"][:32].sum() * 4, rtol=1e-5)


def test_the_hottest_atomic_address_is_counted():
    same = kernel("same", "  atomic.add(y[0], x[i32(thread.x)])")
    spread = kernel("spread", "  atomic.add(y[i32(thread.x) % 4], x[i32(thread.x)])")
    per_block = kernel("block", "  if i32(thread.x) == 0 {\n    atomic.add(y[0], 1.0)\n  }")
    assert run(same, 256, 2)[0].atomic_hot_address == 512
    assert run(spread, 256, 2)[0].atomic_hot_address == 128
    assert run(per_block, 256, 5)[0].atomic_hot_address == 5


def test_multiply_adds_are_counted_as_fused():
    c, _ = run(kernel("fma", GID + "  y[i] = x[i] * 2.0 + 1.0"), 256, 1)
    assert c.flops == 2 * 256 and c.fma == 256
    c, _ = run(kernel("nofma", GID + "  y[i] = x[i] * 2.0"), 256, 1)
    assert c.flops == 256 and c.fma == 0
    c, _ = run(kernel("call", GID + "  y[i] = fma(x[i], 2.0, 1.0)"), 256, 1)
    assert c.flops == 2 * 256 and c.fma == 256
    c, _ = run(kernel("int", GID + "  y[i] = f32(i * 2 + 1)"), 256, 1)
    assert c.fma == 0


def test_a_row_walk_reuses_its_sectors_in_l1():
    # One thread per row of 64 floats: a SIMD-group's 32 lanes hit 32 sectors per step, but
    # each sector serves 8 steps of the same lanes: 7 of 8 are L1 hits.
    walk = kernel("walk", GID + """
  let acc: f32 = 0.0
  for L0 k: i32 = 0; k < 64; k = k + 1 {
    acc = acc + x[i * 64 + k]
  }
  y[i] = acc""", block=32)
    c, _ = run(walk, 64 * 64, 2)
    assert c.global_load_sectors == 64 * 64 * 4 // 32 * 8  # 32 sectors x 64 steps x 2 warps
    assert c.global_load_sector_hits == c.global_load_sectors * 7 // 8
    coalesced, _ = run(kernel("copy", GID + "  y[i] = x[i]"), 4096, 16)
    assert coalesced.global_load_sector_hits == 0


def test_registers_grow_with_live_state():
    small = kernel("small", GID + "  y[i] = x[i]")
    big = kernel("big", GID + "".join(f"  let v{j}: f32x4 = x[i] as f32x4\n" for j in range(8))
                 + "  y[i] = v0.x")
    assert estimate_registers(big) == estimate_registers(small) + 8 * 4
    assert estimate_registers(fragment_kernel(8)) >= 3 * 2  # three 8x8 fragments


def test_matrix_counting_code_runs_only_with_counters(monkeypatch):
    import kir.interp.matrix_counts as matrix_counts

    def boom(*args, **kwargs):
        raise AssertionError("counting ran")
    monkeypatch.setattr(matrix_counts, "count_fragment", boom)
    a = np.arange(64, dtype=np.float32)
    out = run_kernel(fragment_kernel(8), {"A": a, "C": np.zeros(128, np.float32)}, {"G": 1})
    assert out["C"].any()


def test_registers_of_sibling_scopes_do_not_add_up():
    """Iterations written out one after another (cache-in-registers), each declaring its own
    temporaries inside its ``if``: their lives do not overlap, so the estimate counts the
    largest scope once, not the sum (which read as 225 registers a thread for a layer norm
    holding 16 floats, and made the model call the register cache slow for the wrong reason)."""
    from kir.frontends.cuda import load_cuda
    from kir.ir import Launch

    one = "if (threadIdx.x < n) { float a = x[threadIdx.x]; float b = a * a; y[threadIdx.x] = b; }"
    src = "__global__ void k(const float* x, float* y, int n) { %s }"
    launch = Launch(("1", "1", "1"), (32, 1, 1))
    single = load_cuda(src % one, "t.cu", launch=launch)
    four = load_cuda(src % (one * 4), "t.cu", launch=launch)
    assert estimate_registers(four) == estimate_registers(single)
    # Variables of one scope do add up.
    flat = load_cuda(src % "float a = x[0]; float b = x[1]; float c = x[2]; y[0] = a + b + c;",
                     "t.cu", launch=launch)
    assert estimate_registers(flat) >= estimate_registers(single) + 1
