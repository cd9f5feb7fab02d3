"""CUDA reads a half's (or bfloat16's) bits through a 32-bit register the compiler must keep
(``kir_half_bits``): on the H200 through MLX 0.30.1, NVRTC stored the low byte of a half's
bits held in a 16-bit register as 0 (tests/frontend/test_frontend_gpu.py's q8_quantize)."""

from __future__ import annotations

from pathlib import Path

from kir.backends import emit

from kir.driver.load import load_kernel

QUANTIZE = Path(__file__).parent.parent / "frontend" / "data" / "q8_quantize.cu"


def test_half_bits_go_through_the_helper():
    loaded = load_kernel(QUANTIZE)
    emitted = emit(loaded.kernel, loaded.bound, "cuda")
    source = emitted.header + emitted.source
    assert "kir_half_bits((__half)d)" in source
    assert 'asm volatile("" : "+r"(bits));' in source
    assert "__half_as_ushort((__half)" not in source
