"""Structs with data and member functions: methods inlined with the object's fields in
scope (``this->``, ``*this``, sibling calls), ``operator[]`` returning a reference,
``operator()`` on an object, ``static`` member functions and ``static constexpr``
constants, struct templates with data, and structs read over a scalar buffer through
``reinterpret_cast``; constructors stay refused where a struct would need one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere
from kir.frontends.cuda.struct_text import member_functions

from kir.errors import KirError, UnsupportedError
from kir.interp import run_kernel
from kir.ir import Launch

ROWS = Path(__file__).parent / "data" / "method_rows.cu"
ALIGNED = Path(__file__).parent / "data" / "aligned_vector.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_written_with_member_functions_matches_numpy(target):
    check_everywhere(ROWS, target, [{}, {"C": 132}], seed=3)


@pytest.mark.parametrize("target", TARGETS)
def test_aligned_vector_loads_through_pointers_to_local_structs(target):
    check_everywhere(ALIGNED, target, [{}, {"R": 5, "C": 36}], seed=1)


def run(src: str, args: dict, threads: int = 1):
    kernel = load_cuda(src, "m.cu", launch=Launch(("1", "1", "1"), (threads, 1, 1), 0))
    return run_kernel(kernel, args, {})


def test_a_method_writes_its_object_and_a_const_method_reads_it():
    got = run("""
    struct Acc { float total; int n;
      __device__ void add(float v) { total += v; n = n + 1; }
      __device__ float mean() const { return total / n; } };
    __global__ void f(const float* x, float* y) {
      Acc a{0.0f, 0};
      for (int i = 0; i < 5; ++i) a.add(x[i]);
      y[0] = a.mean(); y[1] = a.n; }""",
              {"x": np.arange(5, dtype=np.float32), "y": np.zeros(2, np.float32)})
    assert got["y"].tolist() == [2.0, 5.0]


def test_operator_index_returns_the_element_itself():
    got = run("""
    template <typename T> struct Vec { static constexpr int size = 3; T v[size];
      __device__ T& operator[](int i) { return v[i]; } };
    __global__ void f(float* y) {
      Vec<float> a;
      for (int k = 0; k < Vec<float>::size; ++k) a[k] = 10.0f * k;
      a[1] += 1.0f;
      for (int k = 0; k < a.size; ++k) y[k] = a[k]; }""", {"y": np.zeros(3, np.float32)})
    assert got["y"].tolist() == [0.0, 11.0, 20.0]


def test_call_operator_of_an_object_with_data_and_this():
    got = run("""
    struct Scaled { float k;
      __device__ float operator()(float x) const { return this->k * x; }
      __device__ Scaled twice() const { Scaled s = *this; s.k = 2.0f * k; return s; } };
    __global__ void f(float* y) { Scaled s{3.0f}; y[0] = s(y[0]); y[1] = s.twice()(y[1]); }""",
              {"y": np.array([2.0, 5.0], np.float32)})
    assert got["y"].tolist() == [6.0, 30.0]


def test_static_member_functions_call_each_other_unqualified():
    got = run("""
    struct P { float a; float b;
      __device__ static P make(float v) { P p; p.a = v; p.b = -v; return p; }
      __device__ static P unit() { return make(1.0f); } };
    __global__ void f(float* y) { P p = P::unit(); y[0] = p.a; y[1] = p.b; }""",
              {"y": np.zeros(2, np.float32)})
    assert got["y"].tolist() == [1.0, -1.0]


def test_a_struct_read_and_written_over_a_float_buffer():
    got = run("""
    struct Quad { float lo[2]; float2 hi; };
    __global__ void f(const float* x, float* y) {
      Quad q = reinterpret_cast<const Quad*>(x)[1];
      q.lo[0] += 100.0f;
      reinterpret_cast<Quad*>(y)->hi = q.hi;
      *reinterpret_cast<Quad*>(y + 4) = q; }""",
              {"x": np.arange(8, dtype=np.float32), "y": np.zeros(8, np.float32)})
    assert got["y"].tolist() == [0, 0, 6, 7, 104, 5, 6, 7]


def test_constructors_run_with_their_initializer_lists_and_default_member_values():
    got = run("""
    struct Acc {
      float m, s; int n = 7;
      __device__ Acc() : m(-INFINITY), s(0.0f) {}
      __device__ explicit Acc(float v, float w = 2.0f) : m(v), s{w * 2} { n += 1; }
      __device__ void push(float x) { m = fmaxf(m, x); s += x; } };
    struct Pair { Acc a; float k; __device__ Pair(float v) : a(v, 1.0f), k(v) {} };
    struct Plain { float u = 0.5f; int w{3}; float z = -1.0f; };
    struct Ordered { float a, b; __device__ Ordered(float x) : b(a * 2.0f), a(x) {} };
    __global__ void f(const float* x, float* y) {
      Acc a; Acc b{3.0f}; Acc c = Acc(4.0f, 5.0f); Pair p(6.0f); Plain q; Plain r{9.0f};
      Ordered o(1.5f);  // members initialized in declaration order: a first, then b = 2a
      a.push(x[0]);
      y[0] = a.m; y[1] = a.s; y[2] = a.n; y[3] = b.m; y[4] = b.s; y[5] = b.n; y[6] = c.s;
      y[7] = p.a.s + p.k; y[8] = q.u + q.w + q.z; y[9] = r.u + r.w; y[10] = o.b; }""",
              {"x": np.array([2.5], np.float32), "y": np.zeros(11, np.float32)})
    assert got["y"].tolist() == [2.5, 2.5, 7.0, 3.0, 4.0, 8.0, 10.0, 8.0, 2.5, 12.0, 3.0]


def test_methods_of_two_instances_of_a_struct_template_keep_their_types():
    got = run("""
    template <typename T, int N> struct Arr { T v[N];
      __device__ T sum() const { T s = 0; for (int i = 0; i < N; ++i) s += v[i]; return s; } };
    __global__ void f(float* y, int* z) {
      Arr<float, 2> a; a.v[0] = 0.5f; a.v[1] = 0.25f;
      Arr<int, 3> b; b.v[0] = 1; b.v[1] = 2; b.v[2] = 3;
      y[0] = a.sum(); z[0] = b.sum(); }""",
              {"y": np.zeros(1, np.float32), "z": np.zeros(1, np.int32)})
    assert got["y"][0] == 0.75 and got["z"][0] == 6


@pytest.mark.parametrize("body, message", [
    ("struct P { float a[2]; __device__ P() : a{1.0f, 2.0f} {} };"
     "__global__ void f(float* y) { P p; y[0] = p.a[0]; }", "initializer of member 'a'"),
    ("struct P { float a; P(float v) : a(v) {} };"
     "__global__ void f(float* y) { P p{2.0f}; y[0] = p.a; }", "is not __device__"),
    ("struct P { float a; __device__ P(float v) : b(v) {} };"
     "__global__ void f(float* y) { P p{2.0f}; y[0] = p.a; }", "has no member 'b'"),
    ("struct P { float a; __device__ float get() const; };"
     "__global__ void f(float* y) { P p{1.0f}; y[0] = p.get(); }", "declared but not defined"),
    ("struct P { float a; __device__ float get() const { return a; } };"
     "__global__ void f(float* y) { y[0] = P::get(); }", "is not static"),
    ("__global__ void f(float* y) { y[0] = this->a; }", "'this' outside a member function"),
    ("struct P { float a; float b; __device__ float& pick(bool f) { if (f) return a; "
     "return b; } }; __global__ void f(float* y) { P p{1.0f, 2.0f}; y[0] = p.pick(true); }",
     "returns a reference"),
    ("struct M { float a; int b; }; __global__ void f(const float* x, float* y) "
     "{ y[0] = reinterpret_cast<const M*>(x)->a; }", "needs all its members made of f32"),
])
def test_what_kir_cannot_do_with_a_method_is_a_located_refusal(body, message):
    with pytest.raises(KirError, match=message) as info:
        load_cuda(body, "m.cu")
    assert info.value.loc is not None and info.value.loc.line == 1
    assert isinstance(info.value, (UnsupportedError, KirError))


def test_member_functions_are_found_in_a_struct_text():
    text = """struct alignas(16) S {
      S() = default;
      __device__ explicit S(int v) : a(v) { }
      static constexpr int size = sizeof(float) * 2;
      float a;
      __device__ float& operator[](int i) { return (&a)[i]; }
      __device__ float operator()(float x) const { return a * x; }
      __device__ static S zero() { S s; s.a = 0; return s; }
    public:
      struct Inner { int q; };
      __device__ bool operator<(const S& o) const { return a < o.a; }
    };"""
    found = member_functions(text, base=100)
    assert [(m.name, m.static, m.has_body) for m in found] == [
        ("S", False, False), ("S", False, True), ("operator[]", False, True),
        ("operator()", False, True), ("zero", True, True), ("operator<", False, True)]
    assert [m.operator for m in found][2:4] == ["[]", "()"]
    index = found[2]
    assert text[index.name_start - 100:index.name_end - 100] == "operator[]"
    assert text[index.end - 100 - 1] == "}"
