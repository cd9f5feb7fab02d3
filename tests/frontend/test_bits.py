"""Bits moved between types (``kir.frontends.cuda.lower_bits``): LLM-training-style packs
built from an ``int4`` with ``memcpy`` and read and written through
``reinterpret_cast<int4*>`` over bf16 and float buffers, ``memcpy`` of a float4 and of a
float's bits, a float4 read over halves seen through a pointer to it — on every target
against numpy — and what is refused, located."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere, spec_variant

from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import Launch

DATA = Path(__file__).parent / "data"
PACKED = DATA / "packed_bits.cu"
ONE = Launch(("1", "1", "1"), (1, 1, 1), 0)


@pytest.mark.parametrize("target", TARGETS)
def test_bf16_packs_through_int4_bits_match_numpy(target):
    # (emulate-original: the original kernel reads real 2-byte bf16 elements)
    check_everywhere(PACKED, target, [{}, {"R": 3, "C": 40}], seed=21)


@pytest.mark.parametrize("target", TARGETS)
def test_float_packs_through_int4_bits_match_numpy(target, tmp_path):
    spec = spec_variant(PACKED, tmp_path, {'E = "bf16"': 'E = "f32"',
                                           'out = { dtype = "bf16"': 'out = { dtype = "f32"',
                                           'a = { dtype = "bf16"': 'a = { dtype = "f32"',
                                           'bias = { dtype = "bf16"': 'bias = { dtype = "f32"'})
    check_everywhere(PACKED, target, [{}], seed=22, spec=spec)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("spec", ["packed_bits_memcpy", "packed_bits_half"])
def test_memcpy_and_vectors_over_other_elements_match_numpy(target, spec):
    check_everywhere(PACKED, target, [{}, {"N": 45}], seed=23,
                     spec=DATA / f"{spec}.kir.toml")


def test_bf16_bits_go_through_unchanged():
    kernel = load_cuda("""#include <cuda_bf16.h>
    __global__ void f(const __nv_bfloat16* x, __nv_bfloat16* y) {
      int4 raw = *reinterpret_cast<const int4*>(x);
      __nv_bfloat16 lanes[8];
      memcpy(lanes, &raw, sizeof(raw));
      int4 back;
      memcpy(&back, lanes, 16);
      reinterpret_cast<int4*>(y)[1] = back; }""", "b.cu", launch=ONE)
    x = np.array([1.0, -2.0, 0.5, 3.0, -0.25, 8.0, 2.0 ** -10, -7.0], np.float32)
    got = run_kernel(kernel, {"x": x, "y": np.zeros(16, np.float32)}, {})["y"]
    np.testing.assert_array_equal(got[8:], x.astype(np.float32))  # exact: no conversion
    assert not got[:8].any()


def test_a_floats_bits_through_memcpy_are_exact():
    kernel = load_cuda("""__global__ void f(const float* x, unsigned* u, float* y) {
      unsigned b; memcpy(&b, &x[0], 4); u[0] = b;
      b ^= 0x80000000u; float g; memcpy(&g, &b, sizeof g); y[0] = g; }""", "m.cu",
                       launch=ONE)
    got = run_kernel(kernel, {"x": np.array([1.5], np.float32), "u": np.zeros(1, np.uint32),
                              "y": np.zeros(1, np.float32)}, {})
    assert got["u"][0] == 0x3FC00000 and got["y"][0] == -1.5


@pytest.mark.parametrize("source, message", [
    ("float f[2]; __half h[4]; h[0] = x[0]; memcpy(f, h, 8); y[0] = f[0];",
     "memcpy between elements of different sizes"),
    ("float f[2]; memcpy(f, x, n); y[0] = f[0];", "memcpy's size must be a compile-time"),
    ("float f[2]; memcpy(f, y, 12); y[0] = f[0];", "destination does not hold 12 bytes"),
    ("memcpy(y, y + 1024, 1 << 20);", "memcpy of 1048576 bytes: kir copies element by"),
    ("int4 v = *reinterpret_cast<const int4*>(x + 4); y[0] = v.x;", "no member"),
    ("const double* d = reinterpret_cast<const double*>(x); y[0] = d[0];",
     "reading the bits of 4 f16 as a f64 not supported"),
    ("const __half* h = reinterpret_cast<const __half*>(y); y[1] = h[0];",
     "reinterpreting a f32 buffer as f16 not supported"),
])
def test_what_kir_does_not_model_is_refused_where_it_is_written(source, message):
    with pytest.raises(KirError, match=message) as info:
        load_cuda("#include <cuda_fp16.h>\n__global__ void f(const __half* x, float* y, "
                  "int n) {\n  " + source + " }", "r.cu", launch=ONE)
    assert info.value.loc.line == 3


LAYERNORM = Path(__file__).parents[1] / "rules" / "data" / "layernorm_packed_bf16.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_a_bf16_layer_norm_of_int4_packs_matches_numpy(target):
    check_everywhere(LAYERNORM, target, [{}, {"N": 5, "C": 72}], seed=24)


def test_a_packs_copies_leave_one_array_a_pack():
    from kir.driver.load import load_kernel
    from kir.ir import Alloc, For

    kernel = load_kernel(LAYERNORM).kernel
    for loop in (n for n in kernel.body.stmts if isinstance(n, For)):
        arrays = [s for s in loop.body.walk() if isinstance(s, Alloc)]
        # each pack is one array (its 16 bytes loaded or stored there): 1, or x, w, b, y
        assert [a.size for a in arrays] == [8] * len(arrays) and len(arrays) in (1, 4)


def test_an_int4_over_floats_moves_as_one_vector(tmp_path):
    """The code's int4 access asserts 16-byte alignment, so a carrier of four floats is
    read and written as one float4, one of eight bf16 as two bf16x4 (kir's vectors have at
    most four lanes)."""
    from kir.driver.load import load_kernel
    from kir.ir import Load, Store
    from kir.ir.types import VectorType

    spec = spec_variant(PACKED, tmp_path, {'E = "bf16"': 'E = "f32"',
                                           'out = { dtype = "bf16"': 'out = { dtype = "f32"',
                                           'a = { dtype = "bf16"': 'a = { dtype = "f32"',
                                           'bias = { dtype = "bf16"': 'bias = { dtype = "f32"'})
    for path, vectors in ((spec, 4), (PACKED.with_suffix(".kir.toml"), 8)):
        kernel = load_kernel(PACKED, spec_path=path).kernel
        wide = [n for n in kernel.walk() if isinstance(n, (Load, Store))
                and isinstance(n.type if isinstance(n, Load) else n.value.type, VectorType)]
        assert len(wide) == vectors, (path, wide)  # a and bias read, out written in two places


@pytest.mark.parametrize("head, vectors", [("struct alignas(16) P", 2),
                                           ("struct __align__(16) P", 2), ("struct P", 0)])
def test_a_struct_declared_16_byte_aligned_moves_as_one_vector(head, vectors):
    from kir.ir import Load, Store
    from kir.ir.types import VectorType

    kernel = load_cuda(head + """ { float v[4]; };
    __global__ void f(const float* x, float* y) {
      P p = *reinterpret_cast<const P*>(x + 4 * threadIdx.x);
      for (int k = 0; k < 4; ++k) p.v[k] *= 2.0f;
      *reinterpret_cast<P*>(y + 4 * threadIdx.x) = p; }""", "p.cu",
                       launch=Launch(("1", "1", "1"), (2, 1, 1), 0))
    wide = [n for n in kernel.walk() if isinstance(n, (Load, Store))
            and isinstance(n.type if isinstance(n, Load) else n.value.type, VectorType)]
    assert len(wide) == vectors
    x = np.arange(8, dtype=np.float32)
    got = run_kernel(kernel, {"x": x, "y": np.zeros(8, np.float32)}, {})["y"]
    np.testing.assert_array_equal(got, 2 * x)


@pytest.mark.parametrize("align, size, vectors", [("sizeof(T) * N", 4, 2), ("sizeof(T) * N", 2, 2),
                                                  ("4", 4, 0), ("2 * 4", 2, 2)])
def test_an_alignment_written_as_an_expression_of_template_parameters(align, size, vectors):
    """``struct alignas(sizeof(T) * N) AlignedVector`` (deep-learning frameworks' vectors):
    evaluated with the struct's template arguments; two floats aligned to 8 bytes move as
    a float2, four to 16 as a float4, an alignment of one element leaves them one by one."""
    from kir.ir import Load, Store
    from kir.ir.types import VectorType

    kernel = load_cuda(f"""template <typename T, int N> struct alignas({align}) V {{ T v[N]; }};
    __global__ void f(const float* x, float* y) {{
      V<float, {size}> p = *reinterpret_cast<const V<float, {size}>*>(x + {size} * threadIdx.x);
      for (int k = 0; k < {size}; ++k) p.v[k] += 1.0f;
      *reinterpret_cast<V<float, {size}>*>(y + {size} * threadIdx.x) = p; }}""", "v.cu",
                       launch=Launch(("1", "1", "1"), (2, 1, 1), 0))
    wide = [n for n in kernel.walk() if isinstance(n, (Load, Store))
            and isinstance(n.type if isinstance(n, Load) else n.value.type, VectorType)]
    assert len(wide) == vectors
    x = np.arange(2 * size, dtype=np.float32)
    got = run_kernel(kernel, {"x": x, "y": np.zeros(2 * size, np.float32)}, {})["y"]
    np.testing.assert_array_equal(got, x + 1)


def test_a_union_is_refused_where_a_kernel_uses_it_and_located_at_its_definition():
    source = """union F4 { float4 v; float a[4]; };
    __global__ void uses(const float* x, float* y) { F4 u; u.v = ((const float4*)x)[0];
      y[0] = u.a[1]; }
    __global__ void other(const float* x, float* y) { y[0] = x[0]; }"""
    with pytest.raises(KirError, match="'F4' is a union: unions not supported") as info:
        load_cuda(source, "u.cu", kernel="uses", launch=ONE)
    assert (info.value.loc.line, info.value.loc.col) == (1, 1)
    assert "memcpy" in info.value.hint
    kernel = load_cuda(source, "u.cu", kernel="other", launch=ONE)  # (it names no union)
    assert kernel.name == "other"
