"""Warp masks kir cannot read at compile time, and the cooperative-groups spellings of
LLM-training code and the CUDA samples: a reduction whose masks come from its block size
(``tests/frontend/data/samples_reduce.cu``) runs on every target, a mask that leaves out a
lane calling the intrinsic is stopped where it is used (one a lane only reads from is not),
and ``namespace cg =
cooperative_groups`` inside a body / ``using namespace cooperative_groups`` lower."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import KirError
from kir.frontends.cuda import load_cuda
from kir.interp import run_kernel
from kir.ir import Assert, Launch
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel

REDUCE = Path(__file__).parent / "data" / "samples_reduce.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_masks_from_the_block_size_on_every_target(target):
    check_everywhere(REDUCE, target, [{}, {"BS": 64}, {"BS": 96, "N": 777}], seed=3)


def test_a_mask_leaving_out_running_lanes_is_stopped_where_it_is_used():
    # 48 threads: the mask is 0xffff, but all 32 lanes of the first warp shuffle
    loaded = load_kernel(REDUCE, sizes={"BS": 48})
    with pytest.raises(KirError, match="__shfl_down_sync's mask leaves out a lane that calls"
                       ) as info:
        check_on_target(loaded, "interp", seed=3)
    assert (info.value.loc.line, info.value.loc.col) == (45, 9)


VOTE = """\
__global__ void vote(const float* x, unsigned* out, int n) {
    unsigned keep = 0xffffffffu >> (n & 31);
    out[threadIdx.x] = __ballot_sync(keep, x[threadIdx.x] > 0.0f);
}
"""


def _vote(n: int) -> dict:
    kernel = load_cuda(VOTE, "vote.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    x = np.where(np.arange(32) % 3 == 0, 1.0, -1.0).astype(np.float32)
    return run_kernel(kernel, {"x": x, "out": np.zeros(32, np.uint32), "n": n}, {})


def test_a_run_time_vote_mask_is_checked_lane_by_lane():
    expected = sum(1 << lane for lane in range(32) if lane % 3 == 0)
    assert (_vote(0)["out"] == expected).all()  # the full mask: every lane's vote
    with pytest.raises(KirError, match="__ballot_sync's mask leaves out a lane that calls"
                       ) as info:
        _vote(8)  # 0x00ffffff: lanes 24-31 vote outside it
    assert info.value.loc.line == 3
    assert "8 thread(s)" in str(info.value)


HALF_WARP = """\
__global__ void half_sum(const float* x, float* out) {
    float v = x[threadIdx.x];
    if (threadIdx.x < 16) {
        for (int o = 8; o > 0; o /= 2) v += __shfl_down_sync(0xffff, v, o);
        if (threadIdx.x == 0) out[0] = v;
    }
}
"""


def test_lanes_may_read_outside_the_mask_what_they_never_use():
    # lanes 8-15 read lanes 16-23, outside the mask (an undefined value in CUDA), but only
    # lane 0's sum, read from lanes 0-15, is stored
    kernel = load_cuda(HALF_WARP, "half.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    x = np.arange(32, dtype=np.float32)
    out = run_kernel(kernel, {"x": x, "out": np.zeros(1, np.float32)}, {})
    assert out["out"][0] == x[:16].sum()


BALLOT_STEP = """\
__global__ void ballot_step(const float* x, float* out) {
    float v = x[threadIdx.x];
    unsigned active = __ballot_sync(0xffffffff, threadIdx.x < 8);
    if (threadIdx.x < 8)
        for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(active, v, o);
    if (threadIdx.x == 0) out[0] = v;
}
"""


def test_a_value_read_from_a_lane_not_running_the_shuffle_is_nan():
    # the CUDA samples' last reduction step: lane 0 adds what lanes 16 and 8 hold, but they
    # skipped the branch (PTX: unpredictable), so the sum fails any check instead of
    # taking whatever kir might pick
    kernel = load_cuda(BALLOT_STEP, "step.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    out = run_kernel(kernel, {"x": np.ones(32, np.float32),
                              "out": np.zeros(1, np.float32)}, {})
    assert np.isnan(out["out"][0])


def test_the_check_keeps_its_message_through_the_ir_text():
    kernel = load_cuda(VOTE, "vote.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    again = parse_kernel(print_kernel(kernel))
    checks = [s for s in again.walk() if isinstance(s, Assert)]
    assert len(checks) == 1 and checks[0].message.startswith("__ballot_sync's mask")
    assert again == kernel


ALIAS = """\
#include <cooperative_groups.h>
__global__ void bias_grad(float* dbias, const float* dout, int rows, int channels) {
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int c = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (c >= channels) return;
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < rows; i += warp.size()) sum += dout[i * channels + c];
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    if (warp.thread_rank() == 0) dbias[c] += sum;
}
"""


def test_a_cooperative_groups_alias_inside_the_body():
    kernel = load_cuda(ALIAS, "bias.cu", launch=Launch(("2", "1", "1"), (64, 1, 1), 0))
    dout = np.random.default_rng(1).standard_normal((40, 4)).astype(np.float32)
    out = run_kernel(kernel, {"dbias": np.ones(4, np.float32), "dout": dout.ravel(),
                              "rows": 40, "channels": 4}, {})
    np.testing.assert_allclose(out["dbias"], 1 + dout.sum(axis=0), rtol=1e-5)


def test_another_alias_inside_the_body_is_refused_where_it_is_written():
    source = ALIAS.replace("namespace cg = cooperative_groups;",
                           "namespace grp = cooperative_groups;")
    with pytest.raises(KirError, match="namespace alias 'grp = cooperative_groups'") as info:
        load_cuda(source, "bias.cu", launch=Launch(("2", "1", "1"), (64, 1, 1), 0))
    assert info.value.loc.line == 3


WIDTHS = """\
__global__ void k(const float* x, float* a, float* b, float* c, float* d, int w) {
    int i = threadIdx.x;
    float v = x[i];
    a[i] = __shfl_sync(0xffffffff, v, 3, 16);
    b[i] = __shfl_down_sync(0xffffffff, v, 5, 8);
    c[i] = __shfl_up_sync(0xffffffff, v, 2, 4);
    d[i] = __shfl_up_sync(0xffffffff, v, 1, w);
}
"""
WIDTHS_REF = """\
import numpy as np

def k(args, sizes):
    x = np.asarray(args["x"], np.float32)
    lane = np.arange(64) % 32
    base = np.arange(64) - lane
    def group(width):
        return lane - lane % width
    a = x[base + group(16) + 3]
    rank8, rank4, rank16 = lane % 8, lane % 4, lane % 16
    b = np.where(rank8 + 5 < 8, x[np.minimum(np.arange(64) + 5, 63)], x)
    c = np.where(rank4 >= 2, x[np.maximum(np.arange(64) - 2, 0)], x)
    d = np.where(rank16 >= 1, x[np.maximum(np.arange(64) - 1, 0)], x)
    return {"a": a, "b": b, "c": c, "d": d}
"""


@pytest.mark.parametrize("target", ["interp", "emulate-metal", "emulate-cuda",
                                    "emulate-original"])
def test_shuffles_within_groups_narrower_than_a_warp(target, tmp_path):
    # widths below 32 are whole-warp shuffles on every target (Metal refused up, down and
    # idx of width 16, 8, 4), and a width held in a variable (the samples' shfl_scan)
    (tmp_path / "widths.cu").write_text(WIDTHS)
    (tmp_path / "widths_ref.py").write_text(WIDTHS_REF)
    outs = "".join(f'{n} = {{ dtype = "f32", shape = ["N"], role = "out", init = "none" }}\n'
                   for n in "abcd")
    (tmp_path / "widths.kir.toml").write_text(
        'kernel = "k"\nsizes = { N = 64 }\nlaunch = { grid = [1], block = ["N"] }\n'
        'reference = "widths_ref:k"\n[args]\nx = { dtype = "f32", shape = ["N"] }\n' + outs
        + 'w = { value = 16, dtype = "i32" }\n')
    check_everywhere(tmp_path / "widths.cu", target, [{}], seed=1)
