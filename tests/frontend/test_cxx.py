"""The C++ real kernels are written in, lowered and run on the interpreter against numpy:
references, POD structs, aliases, enums, typename templates, qualified names, auto,
default arguments and null pointers, static_cast, numeric_limits, assert, atomicSub,
pointer-alignment tests, log1p/expm1/cosh/sinh, list-initialization. (The emulator runs of
the same constructs are the corpus tests: tests/corpus/test_corpus.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from kir.frontends.cuda import ArgFacts, load_cuda

from kir.errors import KirError, UnsupportedError
from kir.interp import run_kernel
from kir.ir import Assert, Launch, Load, Select
from kir.ir.printer import print_kernel
from kir.ir.types import F32

RNG = np.random.default_rng(7)


def run(src: str, args: dict, *, kernel: str | None = None, threads: int = 32, blocks: int = 1,
        templates: dict | None = None, facts: ArgFacts | None = None, file: str = "c.cu"):
    launch = Launch((str(blocks), "1", "1"), (threads, 1, 1), 0)
    k = load_cuda(src, file, kernel=kernel, launch=launch, template_values=templates or {},
                  args=facts)
    return k, run_kernel(k, args, {})


def f32(*shape):
    return RNG.uniform(-2, 2, size=shape).astype(np.float32)


# --------------------------------------------------------------------------- references

REFS = """
__device__ void scale(float4& v, float s) { v.x *= s; v.y *= s; v.z *= s; v.w *= s; }
__device__ void bump(float& a, const float& b) { a += b; }
template <typename T> __device__ void swap_if(T& a, T& b) { if (a > b) { T t = a; a = b; b = t; } }
__global__ void k(float4* v, float* x, int n) {
    int i = threadIdx.x;
    if (i >= n) return;
    float4 local = v[i];
    scale(local, 2.0f);      // a local through a reference
    v[i] = local;
    scale(v[i], 0.5f);       // a buffer element through a reference
    float& r = x[2 * i];     // a reference variable bound once
    bump(r, x[2 * i + 1]);
    swap_if(x[2 * i], x[2 * i + 1]);
}
"""


def test_references_bind_locals_and_buffer_elements():
    v, x = f32(8, 4), f32(16)
    _, got = run(REFS, {"v": v, "x": x, "n": 8})
    np.testing.assert_allclose(got["v"], v, rtol=1e-6)
    pairs = x.reshape(8, 2).astype(np.float64)
    pairs[:, 0] += pairs[:, 1]
    np.testing.assert_allclose(got["x"].reshape(8, 2), np.sort(pairs, axis=1), rtol=1e-6)


def test_a_reference_keeps_the_element_it_was_bound_to():
    src = """__global__ void k(float* x) {
        int i = threadIdx.x; float& r = x[i]; i = 0; r = 5.0f; }"""
    _, got = run(src, {"x": np.zeros(4, np.float32)}, threads=4)
    assert got["x"].tolist() == [5.0] * 4


# ------------------------------------------------------------------------------ structs

STRUCTS = """
struct __align__(8) MS { float m; float s; };
typedef struct { MS ms; int count; float taps[2]; } Acc;
__device__ MS merge(MS a, MS b) { float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)}; }
__device__ Acc start(float t0) { Acc a; a.ms = MS{-INFINITY, 0.0f}; a.count = 0;
    a.taps[0] = t0; a.taps[1] = 1.0f - t0; return a; }
__global__ void k(const float* x, float* out, int cols) {
    __shared__ MS red[4];
    Acc acc = start(0.25f);
    for (int c = threadIdx.x; c < cols; c += 4) {
        MS one{x[blockIdx.x * cols + c], 1.0f};
        acc.ms = merge(acc.ms, one);
        acc.count++;
    }
    red[threadIdx.x] = acc.ms;
    __syncthreads();
    if (threadIdx.x == 0) {
        MS total = red[0];
        for (int w = 1; w < 4; ++w) total = merge(total, red[w]);
        MS pick = total.m > 0.0f ? total : MS{0.0f, 0.0f};
        out[blockIdx.x * 4 + 0] = total.m;
        out[blockIdx.x * 4 + 1] = total.s;
        out[blockIdx.x * 4 + 2] = (float)acc.count * (acc.taps[0] + acc.taps[1]);
        out[blockIdx.x * 4 + 3] = pick.s + sizeof(MS);
    }
}
"""


CONVERTED = """
__device__ float scale(const float& d, int q) { return d * q; }
__device__ int bucket(const int& v, int nb) { return (v * 7) % nb; }
__global__ void k(const half* h, const int* i, const float* x, float* y, float* z, int* b) {
    int t = threadIdx.x;
    y[t] = scale(h[t], i[t]);  // ggml's `const float& d` taking a half
    z[t] = scale(i[t], i[t]);  // float arithmetic, not an int product that overflows
    b[t] = bucket(x[t], 5);    // the float truncated to int, as C++ converts it
}
"""


def test_a_const_reference_to_another_type_binds_a_converted_copy():
    h = RNG.uniform(-1, 1, 32).astype(np.float16)
    i = RNG.integers(100, 60000, 32).astype(np.int32)
    x = RNG.uniform(0, 1000, 32).astype(np.float32)
    _, got = run(CONVERTED, {"h": h, "i": i, "x": x, "y": np.zeros(32, np.float32),
                             "z": np.zeros(32, np.float32), "b": np.zeros(32, np.int32)})
    np.testing.assert_allclose(got["y"], h.astype(np.float32) * i.astype(np.float32),
                               rtol=1e-6)
    np.testing.assert_allclose(got["z"], i.astype(np.float32) * i.astype(np.float32),
                               rtol=1e-6)
    np.testing.assert_array_equal(got["b"], (x.astype(np.int32) * 7) % 5)


BYTE_BLOCK_MEMBER = """
typedef struct { half d; unsigned char qs[2]; } block_q;
__device__ float dequant(const float d, int q) { return d * (q - 8); }
__global__ void k(const void* vx, float* y) {
    const block_q* b = (const block_q*) vx;
    y[threadIdx.x] = dequant(b[threadIdx.x].d, b[threadIdx.x].qs[0]);
}
"""


def test_a_half_member_of_a_byte_block_passes_to_a_float_parameter():
    blocks = np.zeros(32, np.dtype([("d", np.float16), ("qs", np.uint8, 2)]))
    blocks["d"] = RNG.uniform(-1, 1, 32)
    blocks["qs"][:, 0] = RNG.integers(0, 16, 32)
    _, got = run(BYTE_BLOCK_MEMBER, {"vx": blocks.view(np.uint8),
                                     "y": np.zeros(32, np.float32)})
    want = blocks["d"].astype(np.float32) * (blocks["qs"][:, 0].astype(np.float32) - 8)
    np.testing.assert_allclose(got["y"], want, rtol=1e-6)


CONSTEXPR_CALLS = """
__host__ __device__ constexpr int div_up(int a, int b) { return (a + b - 1) / b; }
__device__ int twice(int v) { int t = v; t = t + v; return t; }
template <int D>
__global__ void k(const float* x, float* y) {
    constexpr int V = div_up(D, 4);   // a register array sized by a constexpr call
    float r[V];
    float s[div_up(D, 8) + twice(1)];
    const int from_memory = twice((int)x[0]);  // not a constant: stays a variable
    for (int j = 0; j < V; ++j) r[j] = x[j];
    for (int j = 0; j < div_up(D, 8) + 2; ++j) s[j] = 1.0f;
    y[threadIdx.x] = r[V - 1] + s[div_up(D, 8) + 1] + from_memory;
}
"""


def test_constexpr_calls_with_constants_are_constants():
    x = np.arange(8, dtype=np.float32) + 3
    _, got = run(CONSTEXPR_CALLS, {"x": x, "y": np.zeros(32, np.float32)},
                 templates={"D": 10})
    assert (got["y"] == x[2] + 1.0 + 2 * 3).all()  # V = 3, s has 2 + 2 elements


DEBUG_PRINT = """
#include <cstdio>
__global__ void k(const float* x, float* y, int n) {
    int i = threadIdx.x;
    if (i == 0) printf("n = %d, first %f, at %p\\n", n, x[0], x);
    y[i] = 2.0f * x[i];
}
"""


def test_printf_is_dropped():
    x = f32(32)
    kernel, got = run(DEBUG_PRINT, {"x": x, "y": np.zeros(32, np.float32), "n": 32})
    np.testing.assert_array_equal(got["y"], 2 * x)
    assert "printf" not in print_kernel(kernel)


def test_structs_locals_returns_arrays_of_structs_and_members():
    x = f32(3, 10)
    _, got = run(STRUCTS, {"x": x, "out": np.zeros(12, np.float32), "cols": 10}, threads=4,
                 blocks=3)
    got = got["out"].reshape(3, 4)
    m = x.max(axis=1)
    s = np.exp(x - m[:, None]).sum(axis=1)
    np.testing.assert_allclose(got[:, 0], m, rtol=1e-6)
    np.testing.assert_allclose(got[:, 1], s, rtol=1e-5)
    np.testing.assert_allclose(got[:, 2], 3.0)  # thread 0 saw columns 0, 4, 8
    np.testing.assert_allclose(got[:, 3], np.where(m > 0, s, 0.0) + 8, rtol=1e-5)


def test_struct_kir_cannot_construct_is_refused_where_used_only():
    src = """struct P { float a[2]; __device__ P() : a{1.0f, 2.0f} {} };
    __global__ void uses(float* x) { P p; x[0] = 1.0f; }
    __global__ void other(float* x) { x[0] = 2.0f; }"""
    load_cuda(src, "s.cu", kernel="other")
    with pytest.raises(KirError) as info:
        load_cuda(src, "s.cu", kernel="uses")
    assert info.value.loc.line == 1  # the constructor's initializer kir cannot run


# ---------------------------------------------------------------- aliases, enums, auto

def test_aliases_enums_constexpr_and_auto():
    src = """
    typedef float floatX;
    using acc_t = double;
    enum { kScale = 3 };
    enum class Mode : int { Add = 1, Mul = 2 };
    namespace cfg { constexpr int twice(int v) { return 2 * v; } constexpr int kBias = 1; }
    __global__ void k(const floatX* x, floatX* y) {
        using idx_t = int;
        typedef float local_t;
        idx_t i = threadIdx.x;
        auto v = static_cast<acc_t>(x[i]) * kScale;
        local_t w = (local_t)v + cfg::twice(cfg::kBias);
        y[i] = Mode::Mul == Mode::Add ? 0.0f : w;
    }"""
    x = f32(32)
    _, got = run(src, {"x": x, "y": np.zeros(32, np.float32)})
    np.testing.assert_allclose(got["y"], x.astype(np.float64) * 3 + 2, rtol=1e-6)


# --------------------------------------------------------------------------- templates

TEMPLATES = """
template <typename T> __device__ T twice(T v) { return v + v; }
template <typename T, int N>
__device__ T power(T v) { T r = 1; for (int i = 0; i < N; ++i) r *= v; return r; }
template <typename T, typename AccT = double>
__global__ void k(const T* x, T* y, int n) {
    int i = threadIdx.x;
    if (i < n) y[i] = static_cast<T>(twice(static_cast<AccT>(x[i])) + power<T, 3>(x[i]));
}
"""


@pytest.mark.parametrize("dtype,np_dtype", [("f32", np.float32), ("i32", np.int32),
                                            ("f64", np.float64)])
def test_kernel_templates_take_types_from_the_spec_dtypes(dtype, np_dtype):
    x = RNG.integers(-5, 5, size=32).astype(np_dtype)
    facts = ArgFacts({"x": dtype, "y": dtype, "n": "i32"})
    k, got = run(TEMPLATES, {"x": x, "y": np.zeros_like(x), "n": 32}, facts=facts)
    assert str(k.params[0].type).startswith(dtype)
    want = 2 * x.astype(np.float64) + x.astype(np.float64) ** 3
    np.testing.assert_allclose(got["y"], want.astype(np_dtype))


def test_template_type_given_by_the_spec_templates_table():
    x = f32(32)
    _, got = run(TEMPLATES, {"x": x, "y": np.zeros(32, np.float32), "n": 32},
                 templates={"T": "f32", "AccT": "f32"})
    np.testing.assert_allclose(got["y"], 2 * x + x ** 3, rtol=1e-5)


def test_unbound_template_type_says_how_to_give_it():
    with pytest.raises(UnsupportedError, match=r"templates = \{ T = \"f32\" \}"):
        run(TEMPLATES, {})


# ------------------------------------------------------- null pointers and defaults

NULLS = """
__global__ void k(const float* x, float* y, int n, const float* bias = nullptr,
                  float scale = 2.0f, int* count = NULL) {
    int i = threadIdx.x;
    if (i >= n) return;
    float b = bias != nullptr ? bias[i] : 0.0f;
    if (bias && !count) b += 1.0f;
    if (count != NULL) atomicAdd(count, 1);
    y[i] = x[i] * scale + b;
}
"""


def test_null_arguments_fold_their_tests_and_defaults_fill_in():
    x = f32(32)
    facts = ArgFacts({"x": "f32", "y": "f32", "n": "i32"})
    k, got = run(NULLS, {"x": x, "y": np.zeros(32, np.float32), "n": 32}, facts=facts)
    assert [p.name for p in k.params] == ["x", "y", "n"]
    np.testing.assert_allclose(got["y"], x * 2.0, rtol=1e-6)


NULL_FLAGS = """
__global__ void k(const float* x, float* y, int n, const float* scale, const float* bias) {
    const bool has_scale = scale != nullptr;  // FasterTransformer's style: the test held
    const auto has_bias = bias != NULL;
    int i = threadIdx.x;
    float v = x[i];
    if (has_scale) v *= scale[0];
    y[i] = has_bias ? v + bias[i] : v;
}
"""


def test_a_null_test_held_in_a_const_local_decides_its_branches():
    x = f32(32)
    facts = ArgFacts({"x": "f32", "y": "f32", "n": "i32"}, frozenset({"scale", "bias"}))
    _, got = run(NULL_FLAGS, {"x": x, "y": np.zeros(32, np.float32), "n": 32}, facts=facts)
    np.testing.assert_array_equal(got["y"], x)


def test_present_optional_arguments_are_used():
    x, bias = f32(32), f32(32)
    facts = ArgFacts({"x": "f32", "y": "f32", "n": "i32", "bias": "f32", "scale": "f32"},
                     frozenset({"count"}))
    _, got = run(NULLS, {"x": x, "y": np.zeros(32, np.float32), "n": 32, "bias": bias,
                         "scale": 3.0}, facts=facts)
    np.testing.assert_allclose(got["y"], x * 3.0 + bias + 1.0, rtol=1e-6)


def test_a_null_argument_that_is_read_is_an_error_at_the_read():
    src = "__global__ void k(float* x, const float* b) { x[0] = b[0]; }"
    with pytest.raises(KirError) as info:
        load_cuda(src, "n.cu", args=ArgFacts({"x": "f32"}, frozenset({"b"})))
    assert (info.value.loc.line, info.value.loc.col) == (1, 54)
    assert "null pointer is read" in info.value.message


# --------------------------------------------------------------------- odds and ends

def test_numeric_limits_math_and_list_initialization():
    src = """
    #include <limits>
    __global__ void k(const float* x, float* y) {
        int i = threadIdx.x;
        float lo = std::numeric_limits<float>::lowest();
        float4 v{x[i], 1.0f, 2.0f};
        y[6 * i + 0] = fmaxf(lo, x[i]) + v.z + v.w;
        y[6 * i + 1] = log1pf(x[i] * 1e-6f);
        y[6 * i + 2] = expm1f(x[i] * 1e-6f);
        y[6 * i + 3] = coshf(x[i]);
        y[6 * i + 4] = sinhf(x[i]);
        y[6 * i + 5] = std::numeric_limits<int>::max() == 2147483647 ? 1.0f : 0.0f;
    }"""
    x = f32(32)
    _, got = run(src, {"x": x, "y": np.zeros(32 * 6, np.float32)})
    y, xd = got["y"].reshape(32, 6), x.astype(np.float64)
    np.testing.assert_allclose(y[:, 0], xd + 2.0, rtol=1e-6)
    np.testing.assert_allclose(y[:, 1], np.log1p(xd * 1e-6), rtol=1e-5)
    np.testing.assert_allclose(y[:, 2], np.expm1(xd * 1e-6), rtol=1e-5)
    np.testing.assert_allclose(y[:, 3], np.cosh(xd), rtol=1e-5)
    np.testing.assert_allclose(y[:, 4], np.sinh(xd), rtol=1e-5, atol=1e-6)
    assert (y[:, 5] == 1.0).all()


def test_assert_is_checked_on_the_interpreter():
    src = "__global__ void k(float* x, int n) { assert(n % 4 == 0); x[threadIdx.x] = n; }"
    k, got = run(src, {"x": np.zeros(32, np.float32), "n": 8})
    assert any(isinstance(s, Assert) for s in k.body.walk())
    with pytest.raises(KirError, match=r"assertion failed in 32 thread\(s\)") as info:
        run(src, {"x": np.zeros(32, np.float32), "n": 6})
    assert info.value.loc.line == 1


def test_atomic_sub_and_alignment_tests():
    src = """
    #include <cstdint>
    __global__ void k(const float* x, float* y, int* left) {
        int i = threadIdx.x;
        atomicSub(left, 2);
        bool aligned = reinterpret_cast<uintptr_t>(x + i) % 16 == 0;
        y[i] = aligned ? 1.0f : 0.0f;
    }"""
    _, got = run(src, {"x": f32(32), "y": np.zeros(32, np.float32),
                       "left": np.array([100], np.int32)})
    assert got["left"].tolist() == [100 - 64]
    assert got["y"].tolist() == [1.0 if i % 4 == 0 else 0.0 for i in range(32)]


def test_an_address_used_beyond_an_alignment_test_is_refused():
    src = """__global__ void k(const float* x, float* y) {
        y[0] = (float)(reinterpret_cast<uintptr_t>(x) % 64); }"""
    with pytest.raises(UnsupportedError, match="modulo 16 bytes"):
        load_cuda(src, "a.cu")


def test_qualified_names_and_user_namespaces():
    src = """
    #include <cuda/std/cmath>
    namespace ops { namespace detail { __device__ float sq(float v) { return v * v; } } }
    __global__ void k(const float* x, float* y) {
        int i = threadIdx.x;
        y[i] = std::min(ops::detail::sq(x[i]), cuda::std::fabs(x[i])) + ::sqrtf(4.0f);
    }"""
    x = f32(32)
    _, got = run(src, {"x": x, "y": np.zeros(32, np.float32)})
    np.testing.assert_allclose(got["y"], np.minimum(x * x, np.abs(x)) + 2.0, rtol=1e-6)


def test_overloads_are_picked_by_argument_types():
    src = """
    __device__ float conv(float v) { return v + 1.0f; }
    __device__ float conv(int v) { return (float)v * 10.0f; }
    __device__ float conv(float4 v) { return v.x + v.w; }
    __global__ void k(const float* x, float* y) {
        int i = threadIdx.x;
        y[i] = conv(x[i]) + conv(i) + conv(make_float4(1.f, 2.f, 3.f, 4.f));
    }"""
    x = f32(32)
    _, got = run(src, {"x": x, "y": np.zeros(32, np.float32)})
    np.testing.assert_allclose(got["y"], x + 1 + np.arange(32) * 10.0 + 5.0, rtol=1e-6)


def test_a_struct_select_is_a_select_per_field():
    src = """struct P { float v; int i; };
    __global__ void k(const float* x, float* y) {
        P a = {x[0], 0}; P b = {x[1], 1}; P c = a.v > b.v ? a : b;
        y[0] = c.v; y[1] = c.i; }"""
    k, got = run(src, {"x": np.array([1.0, 3.0], np.float32), "y": np.zeros(2, np.float32)},
                 threads=1)
    assert got["y"].tolist() == [3.0, 1.0]
    assert sum(isinstance(n, Select) for n in k.body.walk()) == 2
    assert any(isinstance(n, Load) and n.type == F32 for n in k.body.walk())


# ------------------------------------------------------------ char types and byte pools

CHARS = """
#include <stdint.h>
__global__ void k(const uchar4* rgba, unsigned char* grey, int8_t* q, const float* x) {
    int i = threadIdx.x;
    uchar4 p = rgba[i];
    grey[i] = (unsigned char)(p.x / 4 + p.y / 2 + p.z / 4);
    char c = (char)rintf(x[i] * 40.0f);
    c += 1;
    q[i] = c - 1;
}
"""


def test_char_types_promote_and_wrap_as_c_does():
    from kir.ir.parser import parse_kernel
    from kir.ir.printer import print_kernel

    rgba = RNG.integers(0, 256, size=(32, 4)).astype(np.uint8)
    x = RNG.uniform(-3, 3, size=32).astype(np.float32)
    k, got = run(CHARS, {"rgba": rgba, "grey": np.zeros(32, np.uint8),
                         "q": np.zeros(32, np.int8), "x": x})
    r = rgba.astype(np.int32)
    assert got["grey"].tolist() == (r[:, 0] // 4 + r[:, 1] // 2 + r[:, 2] // 4).tolist()
    assert got["q"].tolist() == np.rint(x * np.float32(40)).astype(np.int8).tolist()
    assert parse_kernel(print_kernel(k)) == k  # i8 / u8 / u8x4 in IR text


POOL = """
__global__ void k(const float* x, float* out, int n) {
    extern __shared__ char smem[];
    float* a = reinterpret_cast<float*>(smem);
    float* b = (float*)(smem + n * sizeof(float));
    int t = threadIdx.x;
    a[t] = x[t];
    b[t] = 2.0f * x[t];
    __syncthreads();
    out[t] = a[n - 1 - t] + b[t];
}
"""


def test_a_byte_array_of_dynamic_shared_memory_takes_the_type_of_its_casts():
    from kir.ir import Alloc

    x = f32(32)
    launch = Launch(("1", "1", "1"), (32, 1, 1), 2 * 32 * 4)
    k = load_cuda(POOL, "p.cu", launch=launch)
    (alloc,) = [s for s in k.body.walk() if isinstance(s, Alloc)]
    assert (alloc.elem, alloc.size, alloc.dynamic) == (F32, 64, True)
    got = run_kernel(k, {"x": x, "out": np.zeros(32, np.float32), "n": 32}, {})
    np.testing.assert_allclose(got["out"], x[::-1] + 2 * x, rtol=1e-6)


@pytest.mark.parametrize("body,line,what", [
    ("smem[0] = 1; float* a = (float*)smem; a[1] = 2.0f;", 4, "used as bytes before"),
    ("float* a = (float*)smem; int* b = (int*)(smem + 8); b[0] = 1;", 4, "cast to i32 after"),
    ("float* a = (float*)(smem + n); a[0] = 1.0f;", 4, r"not a multiple of sizeof\(f32\)"),
    ("float* a = (float*)smem; a[0] = 1.0f; x[0] = smem[3];", 4, "used as bytes, but it holds"),
])
def test_byte_array_misuse_is_refused_where_it_happens(body, line, what):
    src = f"__global__ void k(float* x, int n) {{\n    extern __shared__ char smem[];\n\n" \
          f"    {body}\n}}\n"
    with pytest.raises(UnsupportedError, match=what) as info:
        load_cuda(src, "p.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 256))
    assert info.value.loc.line == line


# ------------------------------------------------------------- a variable hiding a type name

HIDING = """
__device__ int halve(int half) { return half / 2; }   // a parameter named half
__global__ void k(const float* x, float* out, int n) {
    __shared__ float s[64];
    int tid = threadIdx.x;
    s[tid] = x[tid] + x[tid + 32];
    __syncthreads();
    for (int half = 16; half > 0; half >>= 1) {       // common in reductions
        if (tid < half) s[tid] += s[tid + half];
        __syncthreads();
    }
    unsigned uint = halve(n);                          // another builtin type name
    if (tid == 0) out[0] = s[0] + (float)uint;
    half h = (half)1.0f;                               // the type, where no variable hides it
    (void)h;
}
"""


def test_a_variable_may_hide_a_builtin_type_name():
    """``int half = ...`` declares a variable (C++ lets a name hide a type; nvcc accepts it
    without cuda_fp16.h too); it is an identifier from there on, and the type elsewhere."""
    x = f32(64)
    _, out = run(HIDING, {"x": x, "out": np.zeros(1, np.float32), "n": 10})
    want = np.float32(x[:32].astype(np.float64).sum() + x[32:].astype(np.float64).sum() + 5)
    np.testing.assert_allclose(out["out"][0], want, rtol=1e-5)
