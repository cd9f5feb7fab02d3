"""Ampere's warp reduce and match intrinsics (``__reduce_*_sync``, ``__match_any_sync``,
``__match_all_sync``) on every target, the original kernel on the emulator included; partial
masks and float values refused where written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.frontend.everywhere import TARGETS, assert_call_refused, check_everywhere

from kir.driver.load import load_kernel

KERNEL = Path(__file__).parent / "data" / "warp_sync.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_warp_reduce_and_match_everywhere(target):
    check_everywhere(KERNEL, target, [{}, {"n": 96, "K": 3}], seed=4)


@pytest.mark.parametrize("call, message", [
    ("__reduce_add_sync(0xffff, (int)x[0])", "partial mask"),
    ("__reduce_max_sync(0xffffffff, x[0])", "of a f32 value"),
    ("__match_any_sync(0x0000ffff, (int)x[0])", "partial mask"),
])
def test_what_kir_does_not_model_is_refused(call, message):
    assert_call_refused(call, message, "unsigned")


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_emitted_cuda_compiles(tmp_path):
    from kir.backends import emit
    from tests.nvcc_build import nvcc_sm90

    loaded = load_kernel(KERNEL)
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)
