"""Pointers swapped between two shared arrays (``kir.frontends.cuda.shared_pairs``): the
arrays laid out in one allocation, each pointer an offset into it, checked against numpy on
every target; pointers moved between arrays that cannot share memory keep the located
refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.errors import UnsupportedError
from kir.frontends.cuda import load_cuda
from kir.ir import Alloc, Launch

KERNEL = Path(__file__).parent / "data" / "shared_ping_pong.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_double_buffers_swapped_by_pointer_on_every_target(target):
    check_everywhere(KERNEL, target, [{}, {"R": 2, "S": 4}], seed=5)


def _lower(body: str):
    return load_cuda(body, "p.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))


def test_the_two_arrays_are_one_allocation():
    kernel = _lower(KERNEL.read_text().replace("#define ROW 128", "#define ROW 32"))
    allocs = [(a.name, a.size) for a in kernel.body.walk() if isinstance(a, Alloc)]
    assert allocs == [("ping", 64)]


@pytest.mark.parametrize("other,moved", [("__shared__ float b[4][8];", "&b[1][0]"),
                                         ("float* b = g;", "b")],
                         ids=["two-dimensional", "global"])
def test_arrays_that_cannot_share_memory_keep_the_refusal(other, moved):
    with pytest.raises(UnsupportedError, match="two buffers") as raised:
        _lower(f"""
__global__ void k(float* g) {{
    __shared__ float a[32];
    {other}
    float* p = a;
    p = {moved};
    p[threadIdx.x] = 1.0f;
}}""")
    assert raised.value.loc.line == 6
