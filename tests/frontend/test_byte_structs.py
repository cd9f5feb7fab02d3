"""Structs of mixed member types over raw bytes, as quantized inference engines store their
weights (``struct { half scale; int8_t q[32]; }`` behind a ``const void*``): read and written
member by member in C's layout on every target, bit for bit against numpy's reading of the
bytes and against the original kernels on the emulator; ``kir spec init`` sizes the byte
buffers from ``sizeof`` of the file's structs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kir.frontends.cuda import load_cuda, struct_sizes
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.driver.spec_draft import draft_spec
from kir.errors import KirError
from kir.ir import Launch

DATA = Path(__file__).parent / "data"
GEMV = DATA / "q8_blocks.cu"
QUANTIZE = DATA / "q8_quantize.cu"
ONE = Launch(("1", "1", "1"), (1, 1, 1), 0)


@pytest.mark.parametrize("target", TARGETS)
def test_reading_blocks_through_void_pointers(target):
    check_everywhere(GEMV, target, [{}, {"rows": 13, "cols": 64}], seed=12)


@pytest.mark.parametrize("target", TARGETS)
def test_writing_blocks_through_void_pointers(target):
    check_everywhere(QUANTIZE, target, [{}, {"n": 96}], seed=13)


def test_the_void_pointer_is_a_byte_buffer():
    params = {p.name: str(p.type) for p in load_kernel(GEMV).kernel.params}
    assert params["weights"].startswith("u8*")


def test_struct_sizes_and_spec_init(tmp_path):
    assert struct_sizes(GEMV.read_text(), str(GEMV)) == {"block_q8": 34}
    source = tmp_path / "g.cu"
    kernels = GEMV.read_text().split("void launch(")[0]  # (the file's own launcher out)
    source.write_text(kernels + """
int main() {
    const int rows = 64, cols = 512;
    void* w; float *x, *y;
    cudaMalloc(&w, rows * (cols / QK) * sizeof(block_q8));
    cudaMalloc(&x, cols * sizeof(float));
    cudaMalloc(&y, rows * sizeof(float));
    q8_gemv<<<(rows + 3) / 4, dim3(32, 4)>>>(w, x, y, rows, cols);
}
""")
    assert 'weights = { dtype = "u8", shape = ["rows", "cols // 32", 34]' in \
        draft_spec(source).text


def test_a_pointer_member_over_bytes_is_refused():
    source = """struct blk { float* p; int n; };
__global__ void k(const void* v, float* y) {
    const blk* b = (const blk*)v;
    y[0] = b->n;
}
"""
    with pytest.raises(KirError, match="member 'p' is a pointer") as info:
        load_cuda(source, "b.cu", launch=ONE)
    assert info.value.loc.line == 3


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("path", [GEMV, QUANTIZE], ids=["gemv", "quantize"])
def test_emitted_cuda_compiles(path, tmp_path):
    from kir.backends import emit
    from tests.nvcc_build import nvcc_sm90

    loaded = load_kernel(path)
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)
