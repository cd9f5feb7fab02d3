"""Half and bfloat16 intrinsics bit for bit against float64 references on every target
(``__hfma`` fused, one rounding; scalar bfloat16 ``__hmul``/``__hadd``/``__hfma``), and CUDA's
integer ``__hadd``/``__rhadd``: averages without overflow, not half additions (kir read
``__hadd(int, int)`` as a half addition, and the CPU emulator of original kernels computed
scalar bfloat16 products in half precision)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.ir import Call

DATA = Path(__file__).parent / "data"
KERNEL = DATA / "half_exact.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_half_intrinsics_round_once(target):
    pytest.importorskip("ml_dtypes")
    check_everywhere(KERNEL, target, [{}, {"n": 77}], seed=41)


def test_hfma_is_one_fused_call():
    kernel = load_kernel(KERNEL).kernel
    fused = [n for n in kernel.body.walk() if isinstance(n, Call) and n.fn == "fma"]
    assert [str(n.type) for n in fused] == ["f16", "bf16"]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_emitted_cuda_compiles(tmp_path):
    from kir.backends import emit
    from tests.nvcc_build import nvcc_sm90

    loaded = load_kernel(KERNEL)
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)
