"""CUDA constructs lowered to the expected kir IR nodes."""

from __future__ import annotations

import glob
import math
import os
import shutil

import pytest
from kir.frontends.cuda import list_kernels, load_cuda

from kir.errors import KirError, UnsupportedError
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Call,
    Cast,
    Component,
    Const,
    Declare,
    For,
    If,
    Launch,
    Load,
    MakeVector,
    Return,
    Select,
    Shuffle,
    Special,
    Store,
    Unary,
    Var,
    While,
)
from kir.ir.types import BOOL, F16, F32, F64, I32, I64, U32, U64, PointerType, VectorType

F4 = VectorType(F32, 4)


def lower(body: str, params: str = "float* x, float* y, int n", prelude: str = "", **kw):
    src = f"{prelude}\n__global__ void k({params}) {{\n{body}\n}}\n"
    return load_cuda(src, "t.cu", **kw)


def stmts(kernel) -> tuple:
    return kernel.body.stmts


def nodes(kernel, cls) -> list:
    return [n for n in kernel.body.walk() if isinstance(n, cls)]


# ------------------------------------------------------------------------- kernels


def test_params_and_specials():
    k = lower("y[threadIdx.x] = x[blockIdx.y] * (float)n;",
              "const float* __restrict__ x, float* y, int n")
    assert k.name == "k"
    assert k.params[0].type == PointerType(F32, "global", True, True)
    assert k.params[1].type == PointerType(F32, "global", False, False)
    assert k.params[2].type == I32
    (store,) = stmts(k)
    assert store == Store("y", Special("thread", "x"),
                          Binary("*", Load("x", Special("block", "y"), F32),
                                 Cast(Var("n", I32), F32), F32))
    assert store.loc.file == "t.cu" and store.loc.line == 3
    assert k.launch == Launch(("1", "1", "1"), (1, 1, 1), 0)


def test_list_kernels_and_selection():
    src = "__global__ void a(float* x) {}\n__device__ float h(float v) { return v; }\n" \
          "__global__ void b(float* x) { x[0] = 1.0f; }\nint main() { return 0; }\n"
    assert list_kernels(src, "m.cu") == ["a", "b"]
    assert load_cuda(src, "m.cu", kernel="b").name == "b"
    with pytest.raises(KirError, match="several __global__ functions.*a, b"):
        load_cuda(src, "m.cu")
    with pytest.raises(KirError, match="no __global__ function named 'c'"):
        load_cuda(src, "m.cu", kernel="c")


def test_host_code_is_skipped():
    src = """
#include <cstdio>
struct Host { int a; char* name; };
static void helper(Host* h) { printf("%s", h->name); }
__global__ void k(float* x) { x[threadIdx.x] = 2.0f; }
int main() { float* d; cudaMalloc(&d, 16); k<<<1, 4>>>(d); return 0; }
"""
    k = load_cuda(src, "h.cu")
    assert stmts(k) == (Store("x", Special("thread", "x"), Const(2.0, F32)),)


def test_types_and_conversions():
    k = lower("unsigned u = 3; long long l = u; size_t s = n; double d = 1.0; bool b = n;\n"
              "half h = __float2half(1.5f); float f = __half2float(h); int i = u + n;")
    decls = {s.name: s for s in stmts(k) if isinstance(s, Declare)}
    assert decls["u"] == Declare("u", U32, Const(3, U32))
    assert decls["l"].type == I64 and decls["l"].init == Cast(Var("u", U32), I64)
    assert decls["s"].type == U64
    assert decls["d"].init == Const(1.0, F64)
    assert decls["b"].init == Binary("!=", Var("n", I32), Const(0, I32), BOOL)
    assert decls["h"].init == Const(1.5, F16)
    assert decls["f"].init == Cast(Var("h", F16), F32)
    # int + unsigned is unsigned, then converted back to int
    assert decls["i"].init == Cast(Binary("+", Var("u", U32), Cast(Var("n", I32), U32), U32), I32)


def test_double_literal_promotes_float():
    k = lower("y[0] = x[0] * 0.5;")
    (store,) = stmts(k)
    assert store.value == Cast(Binary("*", Cast(Load("x", Const(0, I32), F32), F64),
                                      Const(0.5, F64), F64), F32)


def test_operators_and_folding():
    k = lower("int a = -1; int b = 7 / 2 * 3 % 5; int c = (n << 2) | (n & 3) ^ ~n;"
              "bool d = n > 1 && n < 9 || !n; int e = n > 0 ? n : -n;")
    decls = {s.name: s for s in stmts(k)}
    assert decls["a"].init == Const(-1, I32)
    assert decls["b"].init == Const(4, I32)
    c = decls["c"].init
    assert isinstance(c, Binary) and c.op == "|"
    assert c.right.op == "^" and c.right.right == Unary("~", Var("n", I32), I32)
    d = decls["d"].init
    assert d.op == "||" and d.left.op == "&&" and d.type == BOOL
    assert decls["e"].init == Select(Binary(">", Var("n", I32), Const(0, I32), BOOL),
                                     Var("n", I32), Unary("-", Var("n", I32), I32), I32)


def test_compound_assignment_and_incdec():
    k = lower("int i = 0; i += 2; i <<= 1; i ^= n; i++; --i; float f = 1.0f; f /= 2;")
    s = stmts(k)
    assert s[1] == Assign("i", Binary("+", Var("i", I32), Const(2, I32), I32))
    assert s[2] == Assign("i", Binary("<<", Var("i", I32), Const(1, I32), I32))
    assert s[3] == Assign("i", Binary("^", Var("i", I32), Var("n", I32), I32))
    assert s[4] == Assign("i", Binary("+", Var("i", I32), Const(1, I32), I32))
    assert s[5] == Assign("i", Binary("-", Var("i", I32), Const(1, I32), I32))
    assert s[7] == Assign("f", Binary("/", Var("f", F32), Const(2.0, F32), F32))


def test_post_increment_value_is_captured():
    k = lower("int i = 0; y[i++] = 1.0f;")
    s = stmts(k)
    assert s[1] == Declare("old", I32, Var("i", I32))
    assert s[2] == Assign("i", Binary("+", Var("old", I32), Const(1, I32), I32))
    assert s[3] == Store("y", Var("old", I32), Const(1.0, F32))


def test_unroll_pragmas_on_unbraced_nested_loops():
    # `for (...) #pragma unroll for (...) {...}`: the inner loop is the outer loop's body
    # (the pragma once parsed as the whole body, the inner loop as the next statement).
    k = lower("""
    float acc = 0.0f;
    #pragma unroll
    for (int dy = 0; dy < 3; ++dy)
    #pragma unroll 2
        for (int dx = 0; dx < 3; ++dx) { acc += x[dy * 3 + dx]; }
    y[0] = acc;
    """)
    outer, inner = nodes(k, For)
    assert outer.unroll == 0 and inner.unroll == 2
    assert inner in list(outer.body.walk())
    import numpy as np
    from kir.interp import run_kernel

    x = np.arange(9, dtype=np.float32)
    got = run_kernel(k, {"x": x, "y": np.zeros(1, np.float32), "n": np.int32(9)}, {})["y"]
    assert got[0] == x.sum()


def test_for_loops_labels_and_unroll():
    k = lower("""
    for (int i = threadIdx.x; i < n; i += blockDim.x) { y[i] = 0.0f; }
    #pragma unroll 4
    for (int j = 0; j < 8; ++j) { for (int i = 0; i < 2; i++) y[i] = 1.0f; }
    #pragma unroll
    for (int s = 16; s > 0; s >>= 1) {}
    """)
    loops = nodes(k, For)
    assert [f.label for f in loops] == ["L0", "L1", "L2", "L3"]
    first = loops[0]
    assert first.var == "i" and first.type == I32 and first.unroll is None
    assert first.init == Cast(Special("thread", "x"), I32)
    # C's (int)((unsigned)i + blockDim.x), kept as the same bits in the counted form rules
    # recognize: i + (int)blockDim.x.
    assert first.update == Binary("+", Var("i", I32), Cast(Special("block_dim", "x"), I32), I32)
    assert loops[1].unroll == 4 and loops[2].var == "i_1" and loops[2].unroll is None
    assert loops[3].unroll == 0
    assert loops[3].update == Binary(">>", Var("s", I32), Const(1, I32), I32)


def test_while_do_break_continue_return():
    k = lower("int i = 0; while (i < n) { if (i == 3) break; i++; continue; }\n"
              "do { i--; } while (i > 0); if (n) return; while (i-- > 0) { }")
    s = stmts(k)
    w = s[1]
    assert isinstance(w, While) and w.test_first
    assert isinstance(w.body.stmts[0], If)
    assert type(w.body.stmts[0].then.stmts[0]).__name__ == "Break"
    assert type(w.body.stmts[-1]).__name__ == "Continue"
    assert isinstance(s[2], While) and not s[2].test_first
    assert s[3] == If(Binary("!=", Var("n", I32), Const(0, I32), BOOL), Block((Return(),)))
    # a condition with side effects is evaluated at the top of every pass
    last = s[4]
    assert last.cond == Const(True, BOOL) and isinstance(last.body.stmts[0], Declare)


def test_non_canonical_for_becomes_while():
    k = lower("int i; int j; for (i = 0, j = 1; i < n; i++, j++) { y[i] = 0.0f; }")
    assert not nodes(k, For)
    w = [s for s in stmts(k) if isinstance(s, While)][0]
    assert w.body.stmts[-2:] == (Assign("i", Binary("+", Var("i", I32), Const(1, I32), I32)),
                                 Assign("j", Binary("+", Var("j", I32), Const(1, I32), I32)))


def test_shadowed_locals_are_renamed():
    k = lower("int i = 1; { int i = 2; y[i] = 0.0f; } y[i] = 1.0f;")
    s = stmts(k)
    assert s[0] == Declare("i", I32, Const(1, I32))
    assert s[1] == Declare("i_1", I32, Const(2, I32))
    assert s[2].index == Var("i_1", I32) and s[3].index == Var("i", I32)


def test_shared_arrays_static_2d_and_dynamic():
    k = lower("extern __shared__ float sram[];\n__shared__ float t[32][33];\n"
              "t[threadIdx.y][threadIdx.x] = sram[5]; __syncthreads(); __syncwarp();",
              launch=Launch(("4", "1", "1"), (32, 32, 1), 1024))
    s = stmts(k)
    assert s[0] == Alloc("sram", F32, 256, "shared", True)
    assert s[1] == Alloc("t", F32, 32 * 33, "shared", False)
    assert s[2] == Store("t", Binary("+", Binary("*", Special("thread", "y"), Const(33, U32),
                                                 U32), Special("thread", "x"), U32),
                         Load("sram", Const(5, I32), F32))
    assert s[3] == Barrier("block") and s[4] == Barrier("warp")
    assert k.launch.shared_bytes == 1024


def test_local_arrays_with_initializer():
    k = lower("float acc[4] = {1.0f}; acc[n] += 2.0f; y[0] = acc[1];")
    s = stmts(k)
    assert s[0] == Alloc("acc", F32, 4, "local")
    assert s[1:5] == (Store("acc", Const(0, I32), Const(1.0, F32)),
                      Store("acc", Const(1, I32), Const(0.0, F32)),
                      Store("acc", Const(2, I32), Const(0.0, F32)),
                      Store("acc", Const(3, I32), Const(0.0, F32)))
    assert s[5] == Store("acc", Var("n", I32), Binary("+", Load("acc", Var("n", I32), F32),
                                                      Const(2.0, F32), F32))


def test_pointer_aliases():
    k = lower("extern __shared__ float sram[];\n"
              "float* Kj = &sram[64];\nconst float* row = x + blockIdx.x * n;\n"
              "Kj[3] = row[threadIdx.x]; *Kj = 1.0f; row += n; y[0] = *row; Kj++;",
              "const float* x, float* y, int n", launch=Launch(("1",) * 3, (32, 1, 1), 1024))
    s = stmts(k)
    assert s[1] == Declare("Kj", I32, Const(64, I32))
    assert s[2] == Declare("row", I32, Cast(Binary("*", Special("block", "x"),
                                                   Cast(Var("n", I32), U32), U32), I32))
    assert s[3] == Store("sram", Binary("+", Var("Kj", I32), Const(3, I32), I32),
                         Load("x", Binary("+", Cast(Var("row", I32), U32),
                                          Special("thread", "x"), U32), F32))
    assert s[4] == Store("sram", Var("Kj", I32), Const(1.0, F32))
    assert s[5] == Assign("row", Binary("+", Var("row", I32), Var("n", I32), I32))
    assert s[6] == Store("y", Const(0, I32), Load("x", Var("row", I32), F32))
    assert s[7] == Assign("Kj", Binary("+", Var("Kj", I32), Const(1, I32), I32))


def test_param_pointer_reassigned_gets_offset_variable():
    k = lower("x += blockIdx.x * 4; y[0] = x[1];", "const float* x, float* y")
    s = stmts(k)
    assert s[0] == Declare("x_off", I32, Const(0, I32))
    assert s[2] == Store("y", Const(0, I32),
                         Load("x", Binary("+", Var("x_off", I32), Const(1, I32), I32), F32))


def test_vector_loads_stores_and_components():
    k = lower("float4 v = reinterpret_cast<const float4*>(x)[threadIdx.x];\n"
              "float4 w = *reinterpret_cast<float4*>(&x[8]);\n"
              "v.y = w.x + v.z; ((float4*)y)[1] = v; y[0] = make_float2(1.0f, 2.0f).y;",
              "const float* x, float* y")
    s = stmts(k)
    assert s[0] == Declare("v", F4, Load("x", Binary("*", Special("thread", "x"),
                                                      Const(4, U32), U32), F4))
    assert s[1] == Declare("w", F4, Load("x", Const(8, I32), F4))
    v = Var("v", F4)
    assert s[2] == Assign("v", MakeVector((Component(v, 0, F32), Binary(
        "+", Component(Var("w", F4), 0, F32), Component(v, 2, F32), F32),
        Component(v, 2, F32), Component(v, 3, F32)), F4))
    assert s[3] == Store("y", Const(4, I32), v)
    assert s[4].value == Component(MakeVector((Const(1.0, F32), Const(2.0, F32)),
                                              VectorType(F32, 2)), 1, F32)


def test_vector_param_is_a_scalar_buffer_indexed_by_elements():
    k = lower("float4 a = in4[2]; out4[n] = a; out4[0].w = 1.0f;",
              "const float4* in4, float4* out4, int n")
    assert k.params[0].type == PointerType(F32, "global", True)
    s = stmts(k)
    assert s[0].init == Load("in4", Const(8, I32), F4)
    assert s[1] == Store("out4", Binary("*", Var("n", I32), Const(4, I32), I32), Var("a", F4))
    assert s[2] == Store("out4", Const(3, I32), Const(1.0, F32))


def test_shuffles_atomics_and_math():
    k = lower("float v = x[0];\n"
              "v += __shfl_xor_sync(0xffffffff, v, 16);\n"
              "v = __shfl_down_sync(0xffffffffu, v, 1, 16) + __shfl_sync(0xffffffff, v, 0)"
              " + __shfl_up_sync(0xffffffff, v, 2);\n"
              "atomicAdd(&y[0], v); float old = atomicMax(y + 1, v);\n"
              "y[2] = __expf(v) + expf(v) + sqrtf(v) + fmaxf(v, 1.0f) + rsqrtf(v) + powf(v, 2.0f)"
              " + fmaf(v, v, v) + tanhf(v) + erff(v) + exp(v) + sqrt(2.0);\n"
              "y[3] = __ldg(&x[1]); __stcs(&y[4], __ldcs(x + 2)); int m = max(n, 3);"
              " y[5] = -FLT_MAX + INFINITY + warpSize;")
    s = stmts(k)
    assert s[1] == Assign("v", Binary("+", Var("v", F32),
                                      Shuffle("xor", Var("v", F32), Const(16, I32), F32), F32))
    # (a width below the warp's: a whole-warp shuffle, the lane's own value outside its 16)
    shuffles = [n for n in k.body.walk() if isinstance(n, Shuffle)]
    assert [(x.mode, x.width) for x in shuffles][1:] == [("down", 32), ("idx", 32), ("up", 32)]
    s = tuple(x for x in s if not (isinstance(x, Declare) and x.name in ("rank", "shfl")))
    assert any(type(n).__name__ == "Select" for n in s[2].walk())
    assert s[3] == Atomic("add", "y", Const(0, I32), Var("v", F32), None)
    assert s[4] == Declare("old", F32) and s[5] == Atomic("max", "y", Const(1, I32),
                                                          Var("v", F32), "old")
    calls = [(c.fn, c.fast, c.type) for c in s[7].walk() if isinstance(c, Call)]
    assert ("exp", True, F32) in calls and ("exp", False, F32) in calls
    assert ("max", False, F32) in calls and ("pow", False, F32) in calls
    assert ("fma", False, F32) in calls and ("sqrt", False, F64) in calls
    assert s[8] == Store("y", Const(3, I32), Load("x", Const(1, I32), F32))
    assert s[9] == Store("y", Const(4, I32), Load("x", Const(2, I32), F32))
    assert s[10] == Declare("m", I32, Call("max", (Var("n", I32), Const(3, I32)), I32))
    assert math.isinf(s[11].value.left.right.value)


def test_device_function_inlining_single_exit():
    prelude = "__device__ __forceinline__ float sq(float v) { float r = v * v; return r; }"
    k = lower("float r = sq(x[0]); y[0] = sq(r);", prelude=prelude)
    s = stmts(k)
    assert s[0] == Declare("sq_ret", F32)
    assert s[1] == Declare("v", F32, Load("x", Const(0, I32), F32))
    assert s[2] == Declare("r", F32, Binary("*", Var("v", F32), Var("v", F32), F32))
    assert s[3] == Assign("sq_ret", Var("r", F32))
    assert s[4] == Declare("r_1", F32, Var("sq_ret", F32))
    assert s[-1] == Store("y", Const(0, I32), Var("sq_ret_1", F32))


def test_device_function_early_return_uses_done_flag():
    prelude = "__device__ int clampi(int v, int hi) { if (v > hi) return hi; v += 1; return v; }"
    k = lower("y[0] = clampi(n, 4);", prelude=prelude)
    s = stmts(k)
    assert s[1] == Declare("clampi_done", BOOL, Const(False, BOOL))
    first_if = s[4]
    assert first_if.then.stmts == (Assign("clampi_ret", Var("hi", I32)),
                                   Assign("clampi_done", Const(True, BOOL)))
    guard = s[5]
    assert guard.cond == Unary("!", Var("clampi_done", BOOL), BOOL)
    assert guard.then.stmts == (
        Assign("v", Binary("+", Var("v", I32), Const(1, I32), I32)),
        Assign("clampi_ret", Var("v", I32)), Assign("clampi_done", Const(True, BOOL)))
    assert s[-1] == Store("y", Const(0, I32), Cast(Var("clampi_ret", I32), F32))


def test_device_function_pointer_and_reference_params():
    prelude = ("__device__ void put(float* p, int i, float v) { p[i] = v; }\n"
               "__device__ void bump(float& a) { a += 1.0f; }")
    k = lower("float t = 0.0f; bump(t); put(y + 8, n, t);", prelude=prelude)
    s = stmts(k)
    assert s[1] == Assign("t", Binary("+", Var("t", F32), Const(1.0, F32), F32))
    assert s[2] == Declare("p", I32, Const(8, I32))
    assert s[-1] == Store("y", Binary("+", Var("p", I32), Var("i", I32), I32), Var("v", F32))


def test_templates_and_top_level_constants():
    src = """
constexpr int TILE = 8;
const float SCALE = 0.5f;
typedef float real;
template <int BM, int BK = 2>
__global__ void g(real* x) {
    __shared__ real t[BM * BK * TILE];
    t[0] = SCALE;
    x[0] = t[BM - 1];
}
"""
    k = load_cuda(src, "g.cu", template_values={"BM": 4})
    s = stmts(k)
    assert s[0] == Alloc("t", F32, 64, "shared")
    assert s[1] == Store("t", Const(0, I32), Const(0.5, F32))
    assert s[2] == Store("x", Const(0, I32), Load("t", Const(3, I32), F32))
    with pytest.raises(KirError, match="template parameter 'BM'"):
        load_cuda(src, "g.cu")


def test_short_circuit_with_effects_becomes_if():
    prelude = "__device__ bool pos(float v) { return v > 0.0f; }"
    k = lower("bool ok = n > 0 && pos(x[0]); y[0] = ok ? 1.0f : 0.0f;", prelude=prelude)
    s = stmts(k)
    assert s[0] == Declare("cond", BOOL, Binary(">", Var("n", I32), Const(0, I32), BOOL))
    assert isinstance(s[1], If) and s[1].cond == Var("cond", BOOL)
    assert s[1].then.stmts[-1] == Assign("cond", Var("pos_ret", BOOL))


def test_statement_locations_follow_source():
    k = load_cuda("#define N 4\n__global__ void k(float* x) {\n  for (int i = 0; i < N; i++)\n"
                  "    x[i] = 0.0f;\n}\n", "loc.cu")
    (loop,) = stmts(k)
    assert (loop.loc.line, loop.loc.col) == (3, 3)
    assert (loop.body.stmts[0].loc.line, loop.body.stmts[0].loc.col) == (4, 5)


def test_long_expression_and_deep_nesting_do_not_recurse():
    terms = "+".join(["x[0]"] * 5000)
    k = lower(f"y[0] = {terms};")
    depth, node = 0, stmts(k)[0].value
    while isinstance(node, Binary):
        depth, node = depth + 1, node.left
    assert depth == 4999
    nested = "{" * 200 + "y[0] = 1.0f;" + "}" * 200
    k = lower(nested)
    assert stmts(k) == (Store("y", Const(0, I32), Const(1.0, F32)),)
    ifs = "".join("if (n > %d) {" % i for i in range(200)) + "y[0] = 1.0f;" + "}" * 200
    k = lower(ifs)
    assert len(nodes(k, If)) == 200


def test_unsupported_has_location_and_caret():
    with pytest.raises(UnsupportedError) as info:
        lower("int i = 0;\n  goto end;")
    assert info.value.loc.line == 4 and "goto" in str(info.value)
    assert "^" in str(info.value)


EXAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                         "*.cu")))


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_examples_lower(path):
    text = open(path).read()
    k = load_cuda(text, path, template_values={"TILE": 16},
                  launch=Launch(("1", "1", "1"), (64, 1, 1), 8192))
    assert k.body.stmts and nodes(k, For)
    labels = [f.label for f in nodes(k, For)]
    assert labels == [f"L{i}" for i in range(len(labels))]


def test_extern_c_before_a_function_is_skipped():
    """``extern "C"`` on one function (how CuPy's RawKernel and ctypes users declare kernels)
    and the block form both reach the same kernel; locations still point into the file."""
    single = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 2.0f; }\n' \
             'extern "C++" __device__ float h(float v) { return v; }\n'
    block = 'extern "C" {\n__global__ void k(float* x) { x[threadIdx.x] = 2.0f; }\n}\n'
    a, b = load_cuda(single, "e.cu"), load_cuda(block, "e.cu")
    assert stmts(a) == stmts(b) == (Store("x", Special("thread", "x"), Const(2.0, F32)),)
    assert list_kernels(single, "e.cu") == ["k"]
    assert stmts(a)[0].loc.line == 1 and stmts(a)[0].loc.col == 42  # the `x` of `x[...]`


SWITCH = """
__device__ int pick(int v) {
    switch (v) {
    case 0: return 10;
    case 3: case 4: return 34;
    default: break;
    }
    return -1;
}
__global__ void k(const int* in, int* out, int n) {
    int i = threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    int r = 0;
    switch (v % 4) {
    case 0:
        r = 100;
        break;
    default:
        r = -5;
        break;
    case 2: {
        for (int j = 0; j < 10; ++j) { if (j == v) break; r += 1; }
        break;
    }
    case 3:
        r = pick(v);
    }
    out[i] = r;
}
"""


def _switch_expected(v: int) -> int:
    m = v % 4  # inputs are non-negative: C's % agrees with Python's
    if m == 0:
        return 100
    if m == 2:
        return min(v, 10)
    if m == 3:
        return {0: 10, 3: 34, 4: 34}.get(v, -1)
    return -5


def test_switch_becomes_an_if_chain_with_cs_meaning():
    """Several labels on one case, default in the middle, a loop's own break inside a case,
    return inside a device function's cases, and a last case without break."""
    import numpy as np

    from kir.interp import run_kernel

    k = load_cuda(SWITCH, "s.cu", kernel="k")
    assert not any(type(n).__name__ == "Switch" for n in k.body.walk())
    values = np.array([0, 1, 2, 3, 4, 5, 6, 7, 11, 14, 15, 8], dtype=np.int32)
    got = run_kernel(dataclasses_replace_launch(k, len(values)),
                     {"in": values, "out": np.zeros_like(values), "n": len(values)}, {})
    assert got["out"].tolist() == [_switch_expected(int(v)) for v in values]


FALLING = """
__device__ unsigned tail_mix(const unsigned char* tail, int len, unsigned h) {
    unsigned k = 0;
    switch (len & 3) {
    case 3: k ^= tail[2] << 16;
    case 2: k ^= tail[1] << 8;
    case 1: k ^= tail[0];
            k *= 0xcc9e2d51u;
            h ^= k;
    }
    return h;
}
__global__ void k(const unsigned char* bytes, const int* mode, unsigned* out) {
    int i = threadIdx.x;
    unsigned r = tail_mix(bytes + 4 * i, i, 7u);
    switch (mode[i]) {
    case 0: r += 1;
    default: r += 10;
    case 5: r += 100; break;
    case 6: r += 1000;
    }
    out[i] = r;
}
"""


def _falling_expected(tail: list, i: int, mode: int) -> int:
    k, h = 0, 7
    n = i & 3
    if n >= 3:
        k ^= tail[2] << 16
    if n >= 2:
        k ^= tail[1] << 8
    if n >= 1:
        k ^= tail[0]
        k = (k * 0xCC9E2D51) & 0xFFFFFFFF
        h ^= k
    entry = {0: 0, 5: 2, 6: 3}.get(mode, 1)  # the case it enters at (default: second)
    adds = [1, 10, 100, 1000]
    stop = 3 if entry <= 2 else 4  # case 5 ends in break
    return (h + sum(adds[entry:stop])) & 0xFFFFFFFF


def test_cases_falling_through_run_on_from_the_case_entered():
    """A hash's tail (each case falls into the next) and a default in the middle falling
    through into a case that breaks: every case from the one entered up to the break."""
    import numpy as np

    from kir.interp import run_kernel

    k = load_cuda(FALLING, "f.cu", kernel="k")
    rng = np.random.default_rng(3)
    threads = 12
    data = rng.integers(0, 256, 4 * threads).astype(np.uint8)
    mode = np.array([0, 1, 5, 6, 7, 0, 5, 6, 2, 3, 0, 6], np.int32)
    got = run_kernel(dataclasses_replace_launch(k, threads),
                     {"bytes": data, "mode": mode, "out": np.zeros(threads, np.uint32)}, {})
    assert got["out"].tolist() == [
        _falling_expected(data[4 * i:4 * i + 3].tolist(), i, int(mode[i]))
        for i in range(threads)]


def dataclasses_replace_launch(kernel, threads):
    import dataclasses

    return dataclasses.replace(kernel, launch=dataclasses.replace(
        kernel.launch, block=(threads, 1, 1)))


@pytest.mark.parametrize("target", ["interp", "emulate-metal", "emulate-cuda"])
def test_warp_votes_match_numpy(target):
    """__ballot_sync / __any_sync / __all_sync with the full mask, on the interpreter and as
    emitted Metal and CUDA on the emulator, against a numpy reference per warp."""
    from pathlib import Path

    from kir.driver.load import load_kernel
    from kir.driver.runners import check_on_target

    if target != "interp":
        from kir.backends.emulate import emulator_available

        if not emulator_available():
            pytest.skip("no host C++ compiler for the emulator")
    loaded = load_kernel(Path(__file__).parent / "data" / "votes.cu")
    for seed in (0, 1):
        outcome = check_on_target(loaded, target, seed=seed)
        assert outcome.result.ok, outcome.result.describe()


def test_a_vote_over_a_partial_mask_is_refused():
    with pytest.raises(UnsupportedError, match="partial mask"):
        lower("unsigned b = __ballot_sync(0xffff, x[0] > 0.0f); y[0] = (float)b;")


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_warp_votes_compile_with_nvcc(tmp_path):
    from pathlib import Path

    from kir.backends import emit
    from kir.driver.load import load_kernel
    from tests.nvcc_build import nvcc_sm90

    loaded = load_kernel(Path(__file__).parent / "data" / "votes.cu")
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)


def test_signed_counters_stepped_by_unsigned_amounts_are_counted_loops():
    """``i += warp.size()`` / ``i += 32u`` / ``i += blockDim.x`` on an int counter lower to
    ``i = i + step`` (the same bits as C's unsigned sum converted back), which the counted
    loop form of the rules recognizes; other updates stay as written."""
    from kir.analysis.walk import canonical

    k = lower("""
    for (int i = threadIdx.x; i < n; i += 32u) { y[i] = 0.0f; }
    for (int j = threadIdx.x; j < n; j += blockDim.x * gridDim.x) { y[j] = 1.0f; }
    for (unsigned int u = threadIdx.x; u < n; u += blockDim.x) { y[u] = 2.0f; }
    for (int m = 1; m < n; m = (int)((unsigned)m * 2u)) { y[m] = 3.0f; }
    """)
    loops = nodes(k, For)
    assert loops[0].update == Binary("+", Var("i", I32), Const(32, I32), I32)
    assert canonical(loops[0]) is not None and canonical(loops[0]).step == 32
    grid = Binary("*", Special("block_dim", "x"), Special("grid_dim", "x"), U32)
    assert loops[1].update == Binary("+", Var("j", I32), Cast(grid, I32), I32)
    assert loops[2].update == Binary("+", Var("u", U32), Special("block_dim", "x"), U32)
    assert isinstance(loops[3].update, Cast)  # a product: left as C computes it
