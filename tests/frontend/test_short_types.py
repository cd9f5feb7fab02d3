"""16-bit integer types (``short``, ``unsigned short``, ``int16_t``, ``uint16_t``): buffers,
locals that wrap at 16 bits, arithmetic promoted to int, and a ``uint16_t`` read over a byte
buffer, bit for bit on every target (the original kernel on the emulator included)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.ir import Declare
from kir.ir.types import I16, U16

KERNEL = Path(__file__).parent / "data" / "short_types.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_short_types_everywhere(target):
    check_everywhere(KERNEL, target, [{}, {"n": 61}], seed=3)


def test_short_locals_keep_their_type():
    kernel = load_kernel(KERNEL).kernel
    params = {p.name: str(p.type) for p in kernel.params}
    assert params["raw"].startswith("u16*") and params["offs"].startswith("i16*")
    types = {n.name: n.type for n in kernel.body.walk() if isinstance(n, Declare)}
    assert types["key"] == U16 and types["h"] == I16


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_emitted_cuda_compiles(tmp_path):
    from kir.backends import emit
    from tests.nvcc_build import nvcc_sm90

    loaded = load_kernel(KERNEL)
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)


@pytest.mark.parametrize("target", TARGETS)
def test_short_vectors_everywhere(target):
    check_everywhere(KERNEL.with_name("short_vectors.cu"), target, [{}, {"n": 37}], seed=4)
