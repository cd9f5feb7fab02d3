"""Inline PTX reading a lane's special registers (``%%laneid``, ``%%lanemask_*``), as
PyTorch's and inference engines' warp helpers write it: the same values on every target, the
original included (its emulator build reads them from the emulator's lanes); any other
inline assembly is refused where it is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.errors import KirError
from kir.frontends.cuda import load_cuda
from kir.frontends.cuda.ptx_reads import patched
from kir.ir import Launch

KERNEL = Path(__file__).parent / "data" / "lane_asm.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_lane_registers_on_every_target(target):
    check_everywhere(KERNEL, target, [{}, {"N": 77}], seed=5)


def test_the_read_keeps_every_position():
    text = 'x;\n  asm volatile ( "mov.u32 %0, %%lanemask_lt;" : "=r" ( m[i] ) );\ny;'
    out = patched(text)
    assert len(out) == len(text) and out.count("\n") == 2
    assert out.split("\n")[1].split() == ["(m[i])", "=", "__kir_ptx_lanemask_lt()", ";"]


@pytest.mark.parametrize("asm", [
    'asm("mov.u32 %0, %%warpid;" : "=r"(w));',  # the hardware slot, not threadIdx.x / 32
    'asm("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(x));',
])
def test_other_inline_assembly_is_refused_where_it_is_written(asm):
    source = ("__global__ void k(const float* x, float* out) {\n    unsigned w = 0; float v = 0;\n"
              f"    {asm}\n    out[threadIdx.x] = v + w;\n}}\n")
    with pytest.raises(KirError, match="inline assembly not supported") as info:
        load_cuda(source, "k.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    assert (info.value.loc.line, info.value.loc.col) == (3, 5)
