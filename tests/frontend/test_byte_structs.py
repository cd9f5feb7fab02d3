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


DEQUANTIZE = """#include <cuda_fp16.h>
#include <cstdint>
#define QK 32
typedef struct { half d; int8_t qs[QK]; } block_q8;
typedef void (*dequantize_fn)(const void* vx, const int64_t ib, const int iqs, float2& v);

static __device__ void dequantize_q8(const void* vx, const int64_t ib, const int iqs,
                                     float2& v) {
    const block_q8* x = (const block_q8*)vx;
    const float d = __half2float(x[ib].d);
    v.x = x[ib].qs[iqs + 0] * d;
    v.y = x[ib].qs[iqs + 1] * d;
}

template <int qk, dequantize_fn dequantize, typename dst_t>
static __global__ void dequantize_block(const void* __restrict__ vx, dst_t* __restrict__ y,
                                        const int64_t k) {
    const int64_t i = 2 * ((int64_t)blockDim.x * blockIdx.x + threadIdx.x);
    if (i >= k) return;
    float2 v;
    dequantize(vx, i / qk, (int)(i % qk), v);
    y[i] = v.x;
    y[i + 1] = v.y;
}

template <int qk, dequantize_fn dequantize, typename dst_t>
static void dequantize_cuda(const void* vx, dst_t* y, const int64_t k) {
    dequantize_block<qk, dequantize><<<(k + 511) / 512, 256>>>(vx, y, k);
}

void run(const void* vx, float* y, int64_t k) { dequantize_cuda<QK, dequantize_q8>(vx, y, k); }
"""

DEQUANTIZE_SPEC = """kernel = "dequantize_block"
sizes = { k = 2048 }
templates = { dst_t = "f32" }
launch = { grid = ["ceil(k / 512)"], block = [256] }
reference = "deq_ref:dequantize"
[args]
vx = { dtype = "u8", shape = ["k // 32", 34], range = [0, 255] }
y = { dtype = "f32", shape = ["k"], role = "out", init = "none" }
k = { value = "k", dtype = "i64" }
"""

DEQUANTIZE_REF = '''import numpy as np


def dequantize(args, sizes):
    raw = np.ascontiguousarray(np.asarray(args["vx"], np.uint8))
    d = raw[:, 0:2].copy().view(np.float16)[:, 0].astype(np.float32)
    q = raw[:, 2:].copy().view(np.int8).astype(np.float32)
    with np.errstate(invalid="ignore"):  # (infinite scales times zero quants)
        return {"y": (q * d[:, None]).reshape(-1)}
'''


@pytest.mark.parametrize("target", TARGETS)
def test_a_function_pointer_typedef_template_launched_from_a_host_template(target, tmp_path):
    """ggml's dequantize kernels: ``template <int qk, dequantize_fn dequantize, ...>`` (a
    function pointer typedef as a template parameter type), launched inside a host template
    the file instantiates with the function's name."""
    (tmp_path / "deq.cu").write_text(DEQUANTIZE)
    (tmp_path / "deq.kir.toml").write_text(DEQUANTIZE_SPEC)
    (tmp_path / "deq_ref.py").write_text(DEQUANTIZE_REF)
    check_everywhere(tmp_path / "deq.cu", target, [{}], seed=4)
