"""Tests of kir.interp: kernels written directly as kir IR, run in lockstep on numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kir import ir
from kir.errors import BarrierError, KirError, Loc
from kir.interp import run_kernel
from kir.ir import cops
from kir.ir.types import BOOL, F32, I32, U32, PointerType, ScalarType, VectorType

LOGICAL = ir.COMPARISONS + ("&&", "||")


def C(value, t: ScalarType = I32) -> ir.Const:
    return ir.Const(value, t)


def V(name: str, t=I32) -> ir.Var:
    return ir.Var(name, t)


def bin_(op: str, a: ir.Expr, b: ir.Expr) -> ir.Binary:
    return ir.Binary(op, a, b, BOOL if op in LOGICAL else a.type)


def add(a, b):
    return bin_("+", a, b)


def mul(a, b):
    return bin_("*", a, b)


def lt(a, b):
    return bin_("<", a, b)


def i32(e: ir.Expr) -> ir.Expr:
    return e if e.type == I32 else ir.Cast(e, I32)


TID = ir.Special("thread", "x")
BID = ir.Special("block", "x")
BDIM = ir.Special("block_dim", "x")
GID = i32(add(mul(BID, BDIM), TID))
T = i32(TID)


def load(buf: str, index: ir.Expr, t=F32) -> ir.Load:
    return ir.Load(buf, index, t)


def store(buf: str, index: ir.Expr, value: ir.Expr, loc: Loc | None = None) -> ir.Store:
    return ir.Store(buf, index, value, loc=loc)


def block(*stmts: ir.Stmt) -> ir.Block:
    return ir.Block(tuple(stmts))


def if_(cond, then: list, orelse: list | None = None) -> ir.If:
    return ir.If(cond, block(*then), block(*orelse) if orelse is not None else None)


def for_(label: str, var: str, start: ir.Expr, cond: ir.Expr, update: ir.Expr, body: list,
         t=I32) -> ir.For:
    return ir.For(label, var, t, start, cond, update, block(*body))


def buf(name: str, elem=F32, const: bool = False) -> ir.Param:
    return ir.Param(name, PointerType(elem, "global", const))


def scalar(name: str, t=I32) -> ir.Param:
    return ir.Param(name, t)


def kernel(params: list, stmts: list, grid=("1", "1", "1"), block_dims=(32, 1, 1),
           shared_bytes: int = 0, name: str = "k") -> ir.Kernel:
    return ir.Kernel(name, tuple(params), block(*stmts),
                     ir.Launch(tuple(grid), tuple(block_dims), shared_bytes))




def run(k, args, sizes=None, **kw):
    return run_kernel(k, args, sizes, **kw)


# ------------------------------------------------------------------------------- basics


def test_vector_add_with_bounds_check():
    n = V("n")
    k = kernel([buf("a", const=True), buf("b", const=True), buf("c"), scalar("n")],
               [if_(lt(GID, n), [store("c", GID, add(load("a", GID), load("b", GID)))])],
               grid=("ceil(N / 128)", "1", "1"), block_dims=(128, 1, 1))
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1000)  # float64 in: converted to the f32 element type
    b = rng.standard_normal(1000).astype(np.float32)
    a_before = a.copy()
    out = run(k, {"a": a, "b": b, "c": np.zeros(1000, np.float32), "n": 1000}, {"N": 1000})
    assert out["c"].dtype == np.float32
    np.testing.assert_array_equal(out["c"], a.astype(np.float32) + b)
    np.testing.assert_array_equal(a, a_before)  # the caller's arrays are never modified
    assert set(out) == {"a", "b", "c"}


def test_outputs_keep_their_shapes_and_inputs_are_copied():
    k = kernel([buf("x")], [store("x", T, add(load("x", T), C(1.0, F32)))],
               block_dims=(6, 1, 1))
    x = np.zeros((2, 3), np.float32)
    out = run(k, {"x": x})
    assert out["x"].shape == (2, 3)
    np.testing.assert_array_equal(out["x"], np.ones((2, 3)))
    assert not x.any()


def test_2d_indices_and_grid():
    tx, ty = ir.Special("thread", "x"), ir.Special("thread", "y")
    bx, by = ir.Special("block", "x"), ir.Special("block", "y")
    gx = ir.Special("grid_dim", "x")
    # linear block id * 12 + linear thread id
    value = add(mul(add(mul(by, gx), bx), C(12, U32)), add(mul(ty, C(4, U32)), tx))
    k = kernel([buf("o", U32)], [store("o", i32(value), value)],
               grid=("G", "2", "1"), block_dims=(4, 3, 1))
    out = run(k, {"o": np.zeros(72, np.uint32)}, {"G": 3})
    np.testing.assert_array_equal(out["o"], np.arange(72))


# --------------------------------------------------------------------- C semantics


def _int_kernel(exprs, t=I32):
    stmts = [store("o", C(i), e) for i, e in enumerate(exprs)]
    return kernel([buf("o", t), scalar("a"), scalar("b")], stmts, block_dims=(1, 1, 1))


def test_c_integer_division_and_remainder_truncate():
    a, b = V("a"), V("b")
    k = _int_kernel([bin_("/", a, b), bin_("%", a, b), bin_("/", a, C(0)), bin_("%", a, C(0)),
                     bin_("/", C(7), bin_("-", C(0), b))])
    out = run(k, {"o": np.zeros(5, np.int32), "a": -7, "b": 2})["o"]
    assert out[0] == -3 and out[1] == -1  # numpy would give -4 and 1
    assert out[2] == -1 and out[3] == -7  # division by zero does not crash
    assert out[4] == -3


def test_int32_overflow_wraps_and_shifts_mask_their_count():
    a = V("a")
    k = _int_kernel([add(a, C(1)), bin_("<<", C(1), C(33)), bin_(">>", C(-8), C(1)),
                     bin_("<<", C(1), C(31)), mul(a, a)])
    out = run(k, {"o": np.zeros(5, np.int32), "a": 2**31 - 1, "b": 0})["o"]
    assert out[0] == -(2**31)
    assert out[1] == 2  # 1 << (33 & 31)
    assert out[2] == -4  # arithmetic shift of a negative int
    assert out[3] == -(2**31)
    assert out[4] == 1  # (2^31-1)^2 mod 2^32


def test_u32_underflow_and_casts_wrap():
    zero_u = C(0, U32)
    k = kernel([buf("o", U32), buf("s", I32), buf("f", F32)],
               [store("o", C(0), bin_("-", zero_u, C(1, U32))),
                store("o", C(1), bin_(">>", C(0x80000000, U32), C(31, U32))),
                store("o", C(2), bin_("/", C(0xFFFFFFFF, U32), C(2, U32))),
                store("s", C(0), ir.Cast(C(0xFFFFFFFF, U32), I32)),
                store("s", C(1), ir.Cast(C(-2.7, F32), I32)),
                store("s", C(2), ir.Cast(load("f", C(0)), I32)),
                store("s", C(3), ir.Cast(load("f", C(1)), I32)),
                store("o", C(3), ir.Cast(C(-1), U32))],
               block_dims=(1, 1, 1))
    out = run(k, {"o": np.zeros(4, np.uint32), "s": np.zeros(4, np.int32),
                  "f": np.array([np.nan, 1e20], np.float32)})
    np.testing.assert_array_equal(out["o"], [0xFFFFFFFF, 1, 0x7FFFFFFF, 0xFFFFFFFF])
    assert list(out["s"]) == [-1, -2, 0, 2**31 - 1]


def test_masked_lanes_dividing_by_zero_do_not_raise():
    # b[t] is 0 on the lanes the branch masks off.
    bt = load("b", T, I32)
    k = kernel([buf("b", I32), buf("o", I32)],
               [if_(bin_("!=", bt, C(0)), [store("o", T, bin_("/", C(100), bt))])],
               block_dims=(4, 1, 1))
    out = run(k, {"b": np.array([0, 5, 0, -3]), "o": np.full(4, 9)})
    assert list(out["o"]) == [9, 20, 9, -33]


def test_f32_arithmetic_stays_f32():
    x, y = load("x", C(0)), load("x", C(1))
    # (1e8 + 1) - 1e8 is 0 in f32 and 1 in f64; 0.1f * 3 differs from 0.3 in f64 too.
    k = kernel([buf("x"), buf("o"), scalar("s", F32)],
               [ir.Declare("t", F32, add(x, y)),
                store("o", C(0), bin_("-", V("t", F32), x)),
                store("o", C(1), mul(V("s", F32), C(3.0, F32))),
                store("o", C(2), ir.Call("exp", (V("s", F32),), F32))],
               block_dims=(1, 1, 1))
    out = run(k, {"x": np.array([1e8, 1.0], np.float32), "o": np.zeros(3, np.float32),
                  "s": 0.1})["o"]
    assert out.dtype == np.float32
    assert out[0] == 0.0
    assert out[1] == np.float32(0.1) * np.float32(3.0)
    assert out[2] == np.exp(np.float32(0.1))


def test_intrinsics():
    x = load("x", T)
    fns = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos",
           "floor", "ceil", "abs"]
    stmts = [store("o", add(mul(C(i), C(8)), T), ir.Call(fn, (x,), F32, fast=i % 2 == 0))
             for i, fn in enumerate(fns)]
    stmts.append(store("p", T, ir.Call("fma", (x, x, C(-1.0, F32)), F32)))
    stmts.append(store("p", add(T, C(8)), ir.Call("max", (x, C(2.0, F32)), F32)))
    stmts.append(store("p", add(T, C(16)), ir.Call("pow", (x, C(2.5, F32)), F32)))
    k = kernel([buf("x"), buf("o"), buf("p")], stmts, block_dims=(8, 1, 1))
    xs = np.linspace(0.1, 3.7, 8).astype(np.float32)
    out = run(k, {"x": xs, "o": np.zeros(8 * len(fns), np.float32),
                  "p": np.zeros(24, np.float32)})
    x64 = xs.astype(np.float64)
    refs = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
            "rsqrt": lambda v: 1 / np.sqrt(v), "tanh": np.tanh,
            "erf": np.vectorize(math.erf), "sin": np.sin, "cos": np.cos, "floor": np.floor,
            "ceil": np.ceil, "abs": np.abs}
    for i, fn in enumerate(fns):
        np.testing.assert_allclose(out["o"][8 * i:8 * i + 8], refs[fn](x64), rtol=3e-7,
                                   atol=1e-7, err_msg=fn)
    np.testing.assert_allclose(out["p"][:8], x64 * x64 - 1, rtol=1e-7)
    np.testing.assert_array_equal(out["p"][8:16], np.maximum(xs, 2))
    np.testing.assert_allclose(out["p"][16:], x64 ** 2.5, rtol=3e-7)


def test_erf_reference_accuracy():
    xs = np.linspace(-6, 6, 20001)
    want = np.array([math.erf(v) for v in xs])
    assert np.max(np.abs(cops.erf(xs) - want)) < 1e-7


# ----------------------------------------------------------------- shared memory, barriers


def _tree_reduction(elem):
    s = ir.Alloc("s", elem, 64, "shared")
    stride = V("stride")
    load_in = ir.Select(lt(GID, V("n")), load("x", GID, elem), C(0, elem), elem)
    return kernel(
        [buf("x", elem), buf("total", elem), scalar("n")],
        [s, store("s", T, load_in), ir.Barrier(),
         for_("L0", "stride", C(32), bin_(">", stride, C(0)), bin_(">>", stride, C(1)),
              [if_(lt(T, stride),
                   [store("s", T, add(load("s", T, elem), load("s", add(T, stride), elem)))]),
               ir.Barrier()]),
         if_(bin_("==", T, C(0)), [ir.Atomic("add", "total", C(0), load("s", C(0), elem))])],
        grid=("ceil(N / 64)", "1", "1"), block_dims=(64, 1, 1))


def test_block_tree_reduction_with_barriers_and_atomics():
    xs = np.arange(1, 301, dtype=np.int32)
    out = run(_tree_reduction(I32), {"x": xs, "total": np.zeros(1, np.int32), "n": 300},
              {"N": 300})
    assert out["total"][0] == xs.sum()
    xf = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    out = run(_tree_reduction(F32), {"x": xf, "total": np.zeros(1, np.float32), "n": 300},
              {"N": 300})
    assert out["total"].dtype == np.float32
    np.testing.assert_allclose(out["total"][0], xf.astype(np.float64).sum(), rtol=1e-5)


def test_divergent_barrier_raises_with_its_location():
    where = Loc("k.cu", 12, 5)
    k = kernel([buf("o")], [if_(lt(T, C(16)), [ir.Barrier(loc=where)])],
               grid=("2", "1", "1"), block_dims=(32, 1, 1))
    with pytest.raises(BarrierError) as info:
        run(k, {"o": np.zeros(1, np.float32)})
    assert info.value.loc == where
    text = str(info.value)
    assert "k.cu:12:5" in text and "block (0, 0, 0)" in text and "16 of 32" in text


def test_barrier_after_early_return_and_uniform_branch_is_fine():
    k = kernel([buf("o")],
               [if_(bin_(">=", T, C(20)), [ir.Return()]),
                if_(lt(i32(BID), C(1)), [ir.Barrier()]),  # uniform per block
                ir.Barrier(),
                store("o", GID, C(1.0, F32))],
               grid=("2", "1", "1"), block_dims=(32, 1, 1))
    out = run(k, {"o": np.zeros(64, np.float32)})["o"]
    assert out.reshape(2, 32)[:, :20].all() and not out.reshape(2, 32)[:, 20:].any()


def test_dynamic_shared_and_local_arrays():
    dyn = ir.Alloc("d", F32, 0, "shared", dynamic=True)
    loc_arr = ir.Alloc("l", I32, 4, "local")
    k = kernel([buf("o")],
               [dyn, loc_arr,
                store("d", T, ir.Cast(T, F32)),
                for_("L0", "i", C(0), lt(V("i"), C(4)), add(V("i"), C(1)),
                     [store("l", V("i"), mul(V("i"), T))]),
                ir.Barrier(),
                store("o", GID, add(load("d", bin_("-", C(15), T)),
                                    ir.Cast(load("l", C(3), I32), F32)))],
               grid=("2", "1", "1"), block_dims=(16, 1, 1), shared_bytes=64)
    out = run(k, {"o": np.zeros(32, np.float32)})["o"]
    t = np.tile(np.arange(16), 2)
    np.testing.assert_array_equal(out, (15 - t) + 3 * t)


# ------------------------------------------------------------------------------- warps


def test_shuffle_xor_butterfly_sum():
    v = V("v", F32)
    body = [ir.Declare("v", F32, load("x", GID))]
    for offset in (16, 8, 4, 2, 1):
        body.append(ir.Assign("v", add(v, ir.Shuffle("xor", v, C(offset), F32))))
    body.append(store("o", GID, v))
    k = kernel([buf("x"), buf("o")], body, grid=("2", "1", "1"), block_dims=(64, 1, 1))
    xs = np.arange(128, dtype=np.float32)
    out = run(k, {"x": xs, "o": np.zeros(128, np.float32)})["o"]
    np.testing.assert_array_equal(out, np.repeat(xs.reshape(4, 32).sum(1), 32))


def test_shuffle_down_reduction_and_edges():
    v = V("v", I32)
    body = [ir.Declare("v", I32, load("x", GID, I32)),
            store("edge", GID, ir.Shuffle("down", v, C(1), I32)),
            store("up", GID, ir.Shuffle("up", v, C(3), I32, width=8)),
            store("idx", GID, ir.Shuffle("idx", v, C(5), I32))]
    for offset in (16, 8, 4, 2, 1):
        body.append(ir.Assign("v", add(v, ir.Shuffle("down", v, C(offset), I32))))
    body.append(store("o", GID, v))
    names = ["x", "o", "edge", "up", "idx"]
    k = kernel([buf(n, I32) for n in names], body, block_dims=(64, 1, 1))
    xs = np.arange(64, dtype=np.int32) * 3
    out = run(k, {n: (xs if n == "x" else np.zeros(64, np.int32)) for n in names})
    assert out["o"][0] == xs[:32].sum() and out["o"][32] == xs[32:].sum()
    edge = out["edge"]
    assert edge[30] == xs[31] and edge[31] == xs[31] and edge[63] == xs[63]  # own value
    lane = np.arange(64) % 32
    up_src = np.where(lane % 8 >= 3, np.arange(64) - 3, np.arange(64))
    np.testing.assert_array_equal(out["up"], xs[up_src])
    np.testing.assert_array_equal(out["idx"], xs[(np.arange(64) // 32) * 32 + 5])


def test_shuffle_down_from_inactive_lane_returns_own_value():
    v = load("x", GID, I32)
    k = kernel([buf("x", I32), buf("o", I32)],
               [if_(lt(T, C(8)), [store("o", T, ir.Shuffle("down", v, C(4), I32))])],
               block_dims=(32, 1, 1))
    xs = np.arange(32, dtype=np.int32) + 100
    out = run(k, {"x": xs, "o": np.zeros(32, np.int32)})["o"]
    np.testing.assert_array_equal(out[:8], [104, 105, 106, 107, 104, 105, 106, 107])


def test_warp_reduce_over_active_lanes_and_partial_warps():
    x = load("x", GID, I32)
    k = kernel([buf("x", I32), buf("s", I32), buf("m", I32)],
               [store("m", GID, ir.WarpReduce("max", x, I32)),
                if_(lt(T, C(10)), [store("s", GID, ir.WarpReduce("sum", x, I32))])],
               grid=("2", "1", "1"), block_dims=(40, 1, 1))  # warps of 32 and 8
    xs = np.random.default_rng(2).integers(-50, 50, 80).astype(np.int32)
    out = run(k, {"x": xs, "s": np.zeros(80, np.int32), "m": np.zeros(80, np.int32)})
    blocks = xs.reshape(2, 40)
    for b in range(2):
        m = out["m"][40 * b:40 * b + 40]
        assert (m[:32] == blocks[b, :32].max()).all() and (m[32:] == blocks[b, 32:].max()).all()
        assert (out["s"][40 * b:40 * b + 10] == blocks[b, :10].sum()).all()
        assert not out["s"][40 * b + 10:40 * b + 40].any()


def test_lane_and_warp_ids():
    lane, warp = ir.Special("lane"), ir.Special("warp")
    k = kernel([buf("o", U32)],
               [store("o", T, add(mul(warp, C(100, U32)), lane))], block_dims=(70, 1, 1))
    out = run(k, {"o": np.zeros(70, np.uint32)})["o"]
    t = np.arange(70)
    np.testing.assert_array_equal(out, (t // 32) * 100 + t % 32)


# ------------------------------------------------------------------------ control flow


def test_loop_with_break_and_continue():
    i, total = V("i"), V("total")
    k = kernel([buf("o", I32)],
               [ir.Declare("total", I32, C(0)),
                for_("L0", "i", C(0), lt(i, C(100)), add(i, C(1)),
                     [if_(bin_("==", bin_("%", i, C(3)), C(1)), [ir.Continue()]),
                      if_(bin_(">=", i, T), [ir.Break()]),
                      ir.Assign("total", add(total, i))]),
                store("o", T, total)],
               block_dims=(40, 1, 1))
    out = run(k, {"o": np.zeros(40, np.int32)})["o"]
    want = [sum(j for j in range(t) if j % 3 != 1) for t in range(40)]
    assert list(out) == want


def test_nested_loops_break_only_the_inner_one_and_declare_reinitializes():
    i, j = V("i"), V("j")
    k = kernel([buf("o", I32)],
               [ir.Declare("count", I32, C(0)),
                for_("L0", "i", C(0), lt(i, C(5)), add(i, C(1)),
                     [ir.Declare("inner", I32, C(0)),
                      for_("L1", "j", C(0), lt(j, C(10)), add(j, C(1)),
                           [if_(bin_(">", j, bin_("+", i, T)), [ir.Break()]),
                            ir.Assign("inner", add(V("inner"), C(1)))]),
                      ir.Assign("count", add(V("count"), V("inner")))]),
                store("o", T, V("count"))],
               block_dims=(4, 1, 1))
    out = run(k, {"o": np.zeros(4, np.int32)})["o"]
    assert list(out) == [sum(min(i + t + 1, 10) for i in range(5)) for t in range(4)]


def test_early_return():
    k = kernel([buf("o", I32)],
               [if_(bin_(">=", T, C(5)), [if_(lt(T, C(7)), [store("o", T, C(7))]),
                                            ir.Return()]),
                store("o", T, C(1)),
                for_("L0", "i", C(0), lt(V("i"), C(3)), add(V("i"), C(1)),
                     [if_(bin_("==", T, C(2)), [ir.Return()]),
                      store("o", T, add(load("o", T, I32), C(10)))]),
                store("o", T, add(load("o", T, I32), C(100)))],
               block_dims=(8, 1, 1))
    out = run(k, {"o": np.zeros(8, np.int32)})["o"]
    assert list(out) == [131, 131, 1, 131, 131, 7, 7, 0]


def test_while_and_do_while():
    x = V("x")
    k = kernel([buf("o", I32), buf("p", I32)],
               [ir.Declare("x", I32, add(T, C(1))),
                ir.While(lt(x, C(100)), block(ir.Assign("x", mul(x, C(2))))),
                store("o", T, x),
                ir.Declare("y", I32, C(50)),
                ir.While(lt(V("y"), C(10)), block(ir.Assign("y", add(V("y"), T))),
                         test_first=False),
                store("p", T, V("y"))],
               block_dims=(8, 1, 1))
    out = run(k, {"o": np.zeros(8, np.int32), "p": np.zeros(8, np.int32)})
    want = []
    for t in range(8):
        v = t + 1
        while v < 100:
            v *= 2
        want.append(v)
    assert list(out["o"]) == want
    assert list(out["p"]) == [50 + t for t in range(8)]  # the body ran once


def test_non_terminating_loop_is_reported():
    where = Loc("spin.cu", 3, 1)
    k = kernel([buf("o", I32)],
               [ir.While(C(True, BOOL), block(ir.Assign("x", C(1))), loc=where)],
               block_dims=(4, 1, 1))
    k = kernel([buf("o", I32)], [ir.Declare("x", I32, C(0))] + list(k.body.stmts),
               block_dims=(4, 1, 1))
    with pytest.raises(KirError, match="did not terminate") as info:
        run(k, {"o": np.zeros(1, np.int32)}, max_steps=1000)
    assert info.value.loc == where


# ---------------------------------------------------------------------- memory errors


def test_out_of_bounds_load_on_active_lane_raises():
    where = Loc("oob.cu", 9, 3)
    k = kernel([buf("x"), buf("o")], [store("o", T, load("x", add(T, C(1))), loc=where)],
               block_dims=(8, 1, 1))
    with pytest.raises(KirError) as info:
        run(k, {"x": np.zeros(8, np.float32), "o": np.zeros(8, np.float32)})
    text = str(info.value)
    assert "'x'" in text and "index 8" in text and "oob.cu:9:3" in text
    assert "thread (7, 0, 0)" in text


def test_out_of_bounds_index_on_masked_lane_is_ignored():
    guarded = if_(lt(add(T, C(1)), C(8)), [store("o", T, load("x", add(T, C(1))))])
    selected = store("p", T, ir.Select(lt(T, C(7)), load("x", add(T, C(1))), C(-1.0, F32),
                                       F32))
    both = store("q", T, ir.Cast(bin_("&&", lt(T, C(7)),
                                      bin_(">", load("x", add(T, C(1))), C(2.0, F32))), F32))
    k = kernel([buf("x"), buf("o"), buf("p"), buf("q")], [guarded, selected, both],
               block_dims=(8, 1, 1))
    xs = np.arange(8, dtype=np.float32)
    out = run(k, {"x": xs, "o": np.zeros(8, np.float32), "p": np.zeros(8, np.float32),
                  "q": np.zeros(8, np.float32)})
    np.testing.assert_array_equal(out["o"], [1, 2, 3, 4, 5, 6, 7, 0])
    np.testing.assert_array_equal(out["p"], [1, 2, 3, 4, 5, 6, 7, -1])
    np.testing.assert_array_equal(out["q"], [0, 0, 1, 1, 1, 1, 1, 0])


def test_out_of_bounds_store_raises():
    k = kernel([buf("o")], [store("o", bin_("-", T, C(1)), C(1.0, F32))],
               block_dims=(4, 1, 1))
    with pytest.raises(KirError, match="out-of-bounds store to 'o'.*index -1"):
        run(k, {"o": np.zeros(4, np.float32)})


def test_bad_arguments_raise_kir_errors():
    k = kernel([buf("o"), scalar("n")], [], block_dims=(4, 1, 1))
    with pytest.raises(KirError, match="missing argument 'n'"):
        run(k, {"o": np.zeros(4)})
    with pytest.raises(KirError, match="no parameter"):
        run(k, {"o": np.zeros(4), "n": 1, "m": 2})
    with pytest.raises(KirError, match="unknown size"):
        run(kernel([buf("o")], [], grid=("N", "1", "1")), {"o": np.zeros(4)})


# ------------------------------------------------------------------------------ vectors


def test_vector_f32x4_load_store_and_components():
    f4 = VectorType(F32, 4)
    base = mul(T, C(4))
    v = ir.Load("x", base, f4)
    scale = ir.MakeVector((C(1.0, F32), C(2.0, F32), C(3.0, F32), C(4.0, F32)), f4)
    k = kernel([buf("x"), buf("y"), buf("s")],
               [ir.Declare("v", f4, ir.Binary("*", v, scale, f4)),
                store("y", base, V("v", f4)),
                store("s", T, add(add(ir.Component(V("v", f4), 0, F32),
                                      ir.Component(V("v", f4), 1, F32)),
                                  add(ir.Component(V("v", f4), 2, F32),
                                      ir.Component(V("v", f4), 3, F32))))],
               block_dims=(8, 1, 1))
    xs = np.arange(32, dtype=np.float32)
    out = run(k, {"x": xs, "y": np.zeros(32, np.float32), "s": np.zeros(8, np.float32)})
    want = xs.reshape(8, 4) * [1, 2, 3, 4]
    np.testing.assert_array_equal(out["y"], want.reshape(-1))
    np.testing.assert_array_equal(out["s"], want.sum(1))


def test_vector_load_past_the_end_raises():
    f4 = VectorType(F32, 4)
    k = kernel([buf("x"), buf("y")], [store("y", mul(T, C(4)), ir.Load("x", add(T, C(4)), f4))],
               block_dims=(1, 1, 1))
    run(k, {"x": np.zeros(8, np.float32), "y": np.zeros(4, np.float32)})
    with pytest.raises(KirError, match="4 elements at index 4"):
        run(k, {"x": np.zeros(7, np.float32), "y": np.zeros(4, np.float32)})


def test_misaligned_vector_access_raises():
    """A float4 (float2) load or store at an index that is not a multiple of 4 (2) faults or
    reads the wrong elements on a GPU: the interpreter refuses it, naming the index."""
    f4, f2 = VectorType(F32, 4), VectorType(F32, 2)
    load = kernel([buf("x"), buf("y")], [store("y", mul(T, C(4)), ir.Load("x", add(T, C(1)), f4))],
                  block_dims=(1, 1, 1))
    with pytest.raises(KirError, match="misaligned vector load from 'x': 4 elements at index 1"):
        run(load, {"x": np.zeros(8, np.float32), "y": np.zeros(4, np.float32)})
    pair = kernel([buf("x"), buf("y")], [store("y", add(mul(T, C(2)), C(1)),
                                               ir.Load("x", mul(T, C(2)), f2))],
                  block_dims=(2, 1, 1))
    with pytest.raises(KirError, match="misaligned vector store"):
        run(pair, {"x": np.zeros(4, np.float32), "y": np.zeros(8, np.float32)})



def test_vector_reads_of_a_shared_array_are_aligned_by_index_in_every_block():
    """Each block has its own shared array, aligned on a GPU (the emitters declare arrays read
    as vectors 16-byte aligned): a float4 read at index 0 (the same index on every lane) is
    aligned in every block, also when the array's size (5) is not a multiple of 4."""
    f4 = VectorType(F32, 4)
    s = ir.Alloc("s", F32, 5, "shared")
    bid = i32(BID)
    k = kernel([buf("x"), buf("y")],
               [s, if_(bin_("<", T, C(5)), [store("s", T, load("x", add(mul(bid, C(5)), T)))]),
                ir.Barrier(),
                if_(bin_("==", T, C(0)),
                    [store("y", bid, ir.Component(ir.Load("s", C(0), f4), 3, F32))])],
               grid=("2", "1", "1"), block_dims=(8, 1, 1))
    xs = np.arange(10, dtype=np.float32)
    out = run(k, {"x": xs, "y": np.zeros(2, np.float32)})
    np.testing.assert_array_equal(out["y"], [3.0, 8.0])

# ------------------------------------------------------------------------------ atomics


def test_atomic_add_with_result_gives_prefix_sums():
    k = kernel([buf("c", I32), buf("v", I32), buf("old", I32)],
               [ir.Declare("r", I32),
                ir.Atomic("add", "c", C(0), load("v", GID, I32), result="r"),
                store("old", GID, V("r"))],
               grid=("2", "1", "1"), block_dims=(48, 1, 1))
    vals = np.random.default_rng(3).integers(1, 20, 96).astype(np.int32)
    out = run(k, {"c": np.array([5], np.int32), "v": vals, "old": np.zeros(96, np.int32)})
    assert out["c"][0] == 5 + vals.sum()
    # Every lane sees the counter before its own add: some order of the prefix sums.
    order = np.argsort(out["old"], kind="stable")
    np.testing.assert_array_equal(out["old"][order], 5 + np.cumsum(vals[order]) - vals[order])


def test_atomics_on_shared_and_float_results():
    s = ir.Alloc("h", I32, 4, "shared")
    k = kernel([buf("o", I32), buf("f"), buf("old")],
               [s, if_(lt(T, C(4)), [store("h", T, C(0))]), ir.Barrier(),
                ir.Atomic("add", "h", bin_("%", T, C(4)), C(1)),
                ir.Atomic("max", "o", C(4), T),
                ir.Declare("r", F32),
                ir.Atomic("add", "f", C(0), C(0.5, F32), result="r"),
                store("old", GID, V("r", F32)),
                ir.Atomic("exch", "o", C(5), T),
                ir.Barrier(),
                if_(lt(T, C(4)), [store("o", T, load("h", T, I32))])],
               block_dims=(10, 1, 1))
    out = run(k, {"o": np.zeros(6, np.int32), "f": np.zeros(1, np.float32),
                  "old": np.zeros(10, np.float32)})
    assert list(out["o"]) == [3, 3, 2, 2, 9, 9]
    assert out["f"][0] == 5.0
    assert sorted(out["old"]) == [0.5 * i for i in range(10)]


# ------------------------------------------------------------- fast paths keep semantics


def _dot_kernel(guarded: bool) -> ir.Kernel:
    k_, acc = V("k"), V("acc", F32)
    loop = for_("L0", "k", C(0), lt(k_, V("d")), add(k_, C(1)),
                [ir.Assign("acc", add(acc, mul(load("a", add(mul(GID, V("d")), k_)),
                                               load("b", k_))))])
    body = [ir.Declare("acc", F32, C(0.5, F32)),
            if_(lt(GID, V("rows")), [loop]) if guarded else loop,
            store("o", GID, acc)]
    return kernel([buf("a"), buf("b"), buf("o"), scalar("d"), scalar("rows")], body,
                  grid=("2", "1", "1"), block_dims=(32, 1, 1))


@pytest.mark.parametrize("guarded", [False, True])
def test_whole_loop_sums_are_bit_identical_to_the_loop(monkeypatch, guarded):
    import kir.interp.reduce as reduce

    rng = np.random.default_rng(5)
    args = {"a": rng.standard_normal(64 * 37).astype(np.float32),
            "b": rng.standard_normal(37).astype(np.float32),
            "o": np.zeros(64, np.float32), "d": 37, "rows": 50 if guarded else 64}
    fast = run(_dot_kernel(guarded), args)["o"]
    monkeypatch.setattr(reduce, "MAX_ELEMENTS", 0)  # forces iteration by iteration
    slow = run(_dot_kernel(guarded), args)["o"]
    np.testing.assert_array_equal(fast, slow)
    want = args["a"].reshape(64, 37).astype(np.float64) @ args["b"] + 0.5
    if guarded:
        want[50:] = 0.5
    np.testing.assert_allclose(fast, want, rtol=1e-5)


def test_whole_loop_sum_reports_out_of_bounds():
    args = {"a": np.zeros(64 * 37 - 1, np.float32), "b": np.zeros(37, np.float32),
            "o": np.zeros(64, np.float32), "d": 37, "rows": 64}
    with pytest.raises(KirError, match="out-of-bounds load from 'a': index 2367.*"
                                       r"block \(1, 0, 0\) thread \(31, 0, 0\)"):
        run(_dot_kernel(False), args)


def test_assigned_scalar_parameter_is_not_treated_as_constant():
    n = V("n")
    k = kernel([buf("o", I32), scalar("n")],
               [store("o", add(n, T), C(1)),
                ir.Assign("n", add(n, C(4))),
                store("o", add(n, T), C(2))], block_dims=(4, 1, 1))
    out = run(k, {"o": np.zeros(12, np.int32), "n": 2})["o"]
    assert list(out) == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0]


def test_top_level_lets_after_an_early_return_and_loop_counters_under_divergence():
    row, j = V("row"), V("j")
    k = kernel([buf("o", I32)],
               [if_(bin_(">=", T, C(6)), [ir.Return()]),
                ir.Declare("row", I32, mul(T, C(3))),
                if_(lt(T, C(4)),
                    [for_("L0", "j", C(0), lt(j, C(3)), add(j, C(1)),
                          [ir.Declare("v", I32, add(j, T)),
                           if_(bin_("==", j, C(1)), [ir.Continue()]),
                           store("o", add(row, j), V("v"))])])],
               block_dims=(8, 1, 1))
    out = run(k, {"o": np.full(24, -1, np.int32)})["o"].reshape(8, 3)
    for t in range(8):
        want = [t, -1, 2 + t] if t < 4 else [-1, -1, -1]
        assert list(out[t]) == want


def test_half_precision_stays_half():
    from kir.ir.types import F16

    h = load("x", T, F16)
    k = kernel([buf("x", F16), buf("o", F16)],
               [store("o", T, add(mul(h, h), ir.Call("exp", (h,), F16)))], block_dims=(4, 1, 1))
    xs = np.array([0.1, 1.5, 3.0, -2.0], np.float16)
    out = run(k, {"x": xs, "o": np.zeros(4, np.float16)})["o"]
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, xs * xs + np.exp(xs.astype(np.float32)).astype(np.float16))


def test_very_deep_expressions_do_not_overflow_the_stack():
    expr = T
    for _ in range(3000):
        expr = add(expr, C(1))
    k = kernel([buf("o", I32)], [store("o", T, expr)], block_dims=(2, 1, 1))
    assert list(run(k, {"o": np.zeros(2, np.int32)})["o"]) == [3000, 3001]


def test_large_grids_run_in_chunks(monkeypatch):
    import kir.interp.run as run_module

    monkeypatch.setattr(run_module, "LANES_PER_CHUNK", 256)
    k = kernel([buf("o", I32), buf("c", I32)],
               [store("o", GID, i32(BID)), ir.Atomic("add", "c", C(0), C(1))],
               grid=("40", "1", "1"), block_dims=(64, 1, 1))
    out = run(k, {"o": np.zeros(2560, np.int32), "c": np.zeros(1, np.int32)})
    np.testing.assert_array_equal(out["o"], np.repeat(np.arange(40), 64))
    assert out["c"][0] == 2560


# ------------------------------------------------------- a realistic kernel: attention


def flash_attention_kernel(bc: int, d: int) -> ir.Kernel:
    """flash-attention-minimal's forward kernel (one block per (batch, head), Bc = Br
    threads, K/V tiles and scores in dynamic shared memory), as kir IR."""
    f = lambda n: V(n, F32)  # noqa: E731
    call = lambda fn, *a: ir.Call(fn, tuple(a), F32, fast=True)  # noqa: E731
    sub = lambda a, b: bin_("-", a, b)  # noqa: E731
    tx, dd, ts = T, C(d), C(bc * d)
    by, bx, gy = (i32(ir.Special(k, a)) for k, a in (("block", "y"), ("block", "x"),
                                                     ("grid_dim", "y")))
    j, i, x, y, n = V("j"), V("i"), V("x"), V("y"), V("N")
    qkv, lm = V("qkv"), V("lm")
    kj = lambda e: add(ts, e)  # noqa: E731
    vj = lambda e: add(C(2 * bc * d), e)  # noqa: E731
    sc = lambda e: add(C(3 * bc * d), e)  # noqa: E731
    sram = lambda e: load("sram", e)  # noqa: E731
    mine = add(mul(tx, dd), x)
    row = add(add(qkv, mul(ts, i)), mine)
    srow = add(mul(C(bc), tx), y)
    lrow = add(add(lm, mul(C(bc), i)), tx)
    loop = lambda label, var, end, body: for_(label, var, C(0), lt(V(var), end),  # noqa: E731
                                              add(V(var), C(1)), body)
    e_prev, e_cur = call("exp", sub(f("mp"), f("mn"))), call("exp", sub(f("mx"), f("mn")))
    body = [
        ir.Alloc("sram", F32, 0, "shared", dynamic=True),
        ir.Declare("qkv", I32, mul(add(mul(bx, gy), by), mul(n, dd))),
        ir.Declare("lm", I32, mul(add(mul(bx, gy), by), n)),
        loop("L0", "j", V("Tc"), [
            loop("L1", "x", dd, [
                store("sram", kj(mine), load("K", add(add(qkv, mul(ts, j)), mine))),
                store("sram", vj(mine), load("V", add(add(qkv, mul(ts, j)), mine)))]),
            ir.Barrier(),
            loop("L2", "i", V("Tc"), [
                loop("L3", "x", dd, [store("sram", mine, load("Q", row))]),
                ir.Declare("mp", F32, load("m", lrow)),
                ir.Declare("lp", F32, load("l", lrow)),
                ir.Declare("mx", F32, C(float("-inf"), F32)),
                loop("L4", "y", C(bc), [
                    ir.Declare("s", F32, C(0.0, F32)),
                    loop("L5", "x", dd, [ir.Assign("s", add(f("s"), mul(
                        sram(mine), sram(kj(add(mul(y, dd), x))))))]),
                    ir.Assign("s", mul(f("s"), f("scale"))),
                    store("sram", sc(srow), f("s")),
                    if_(bin_(">", f("s"), f("mx")), [ir.Assign("mx", f("s"))])]),
                ir.Declare("lsum", F32, C(0.0, F32)),
                loop("L6", "y", C(bc), [
                    store("sram", sc(srow), call("exp", sub(sram(sc(srow)), f("mx")))),
                    ir.Assign("lsum", add(f("lsum"), sram(sc(srow))))]),
                ir.Declare("mn", F32, call("max", f("mp"), f("mx"))),
                ir.Declare("ln", F32, add(mul(e_prev, f("lp")), mul(e_cur, f("lsum")))),
                loop("L7", "x", dd, [
                    ir.Declare("pv", F32, C(0.0, F32)),
                    loop("L8", "y", C(bc), [ir.Assign("pv", add(f("pv"), mul(
                        sram(sc(srow)), sram(vj(add(mul(y, dd), x))))))]),
                    store("O", row, mul(bin_("/", C(1.0, F32), f("ln")), add(
                        mul(mul(f("lp"), e_prev), load("O", row)), mul(e_cur, f("pv")))))]),
                store("m", lrow, f("mn")),
                store("l", lrow, f("ln"))]),
            ir.Barrier()]),
    ]
    params = [buf("Q", const=True), buf("K", const=True), buf("V", const=True), scalar("N"),
              scalar("Tc"), scalar("scale", F32), buf("l"), buf("m"), buf("O")]
    return kernel(params, body, grid=("B", "H", "1"), block_dims=(bc, 1, 1),
                  shared_bytes=(3 * bc * d + bc * bc) * 4, name="flash")


def run_attention(b: int, h: int, n: int, d: int, bc: int = 32):
    """Outputs of the flash kernel and of a float64 softmax attention on the same inputs."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((b, h, n, d)).astype(np.float32) for _ in range(3))
    args = dict(Q=q, K=k, V=v, N=n, Tc=n // bc, scale=1 / math.sqrt(d),
                l=np.zeros((b, h, n), np.float32), m=np.full((b, h, n), -np.inf, np.float32),
                O=np.zeros((b, h, n, d), np.float32))
    out = run_kernel(flash_attention_kernel(bc, d), args, {"B": b, "H": h})
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    return out["O"], (p / p.sum(-1, keepdims=True)) @ v


def test_flash_attention_matches_softmax_attention():
    out, want = run_attention(1, 2, 32, 16, bc=16)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


if __name__ == "__main__":  # benchmark: python tests/test_interp.py [N]
    import sys
    import time

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    start = time.perf_counter()
    got, ref = run_attention(1, 4, size, 64)
    print(f"flash attention B=1 H=4 N={size} D=64: {time.perf_counter() - start:.2f} s, "
          f"max error {np.abs(got - ref).max():.2e}")


def test_shared_and_local_memory_start_poisoned():
    """Memory a kernel never wrote reads as the emulator's poison (NaN, -1), not 0: a kernel
    reading an unwritten part of a shared tile must not pass as its own reference."""
    from kir.frontends.cuda import load_cuda

    source = """__global__ void k(float* f, int* i) {
    __shared__ float tile[64];
    int scratch[4];
    tile[threadIdx.x] = 1.0f;
    scratch[0] = 5;
    __syncthreads();
    f[threadIdx.x] = tile[threadIdx.x + 32];
    i[threadIdx.x] = scratch[1] + scratch[0];
}"""
    kernel = load_cuda(source, "p.cu", launch=ir.Launch(("1", "1", "1"), (32, 1, 1), 0))
    out = run_kernel(kernel, {"f": np.zeros(32, np.float32), "i": np.zeros(32, np.int32)})
    assert np.isnan(out["f"]).all() and (out["i"] == 4).all()


def test_vector_loads_and_stores_at_64_bit_unsigned_addresses():
    """A size_t offset makes the address u64; numpy adds u64 and int64 in float64, which
    crashed the vector load (a half2 read at ``(size_t)row * 64``) and the vector store."""
    from kir.ir.parser import parse_kernel

    kernel = parse_kernel("""kernel @k(x: f32* global const, y: f32* global)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
  let at: u64 = u64(thread.x) * 4
  let v: f32x4 = x[at] as f32x4
  y[at] = v + v
}
""")
    x = np.arange(16, dtype=np.float32)
    out = run_kernel(kernel, {"x": x, "y": np.zeros(16, np.float32)})
    assert np.array_equal(out["y"], 2 * x)


def test_fma_rounds_once_to_its_type():
    """fmaf and __hfma round the exact a*b+c once; the interpreter rounded it to f64 first
    (then f32, then for halves f16), one ulp off where the f64 sum lands on a midpoint of
    the narrower type (cases a probe found against nvcc's results)."""
    from fractions import Fraction

    from kir.ir.cops import call_intrinsic
    from kir.ir.types import F16

    def nearest(got, want: Fraction) -> bool:
        err = abs(Fraction(float(got)) - want)
        return all(err <= abs(Fraction(float(np.nextafter(got, t))) - want)
                   for t in (np.float32(-np.inf), np.float32(np.inf)))

    a, b, c = (np.float32(v) for v in (1 + 2**-15, (1 - 2**-15) * 2**-24, 1 + 2**-23))
    got = call_intrinsic("fma", [np.array(a), np.array(b), np.array(c)], F32)
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    assert nearest(got, exact)
    twice = np.float32(np.float64(a) * np.float64(b) + np.float64(c))  # (the old way)
    assert not nearest(twice, exact)
    halves = [np.array(np.float16(v)) for v in (0.0613, 0.007965, 1.291)]
    assert float(call_intrinsic("fma", halves, F16)) == 1.2919921875
    rng = np.random.default_rng(1)
    x, y, z = (rng.standard_normal(4000).astype(np.float32) for _ in range(3))
    y *= np.float32(2.0) ** rng.integers(-30, 0, 4000).astype(np.float32)
    got = call_intrinsic("fma", [x, y, z], F32)
    for k in range(0, 4000, 7):  # against exact rational arithmetic
        assert nearest(got[k], Fraction(float(x[k])) * Fraction(float(y[k]))
                       + Fraction(float(z[k])))
