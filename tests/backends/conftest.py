"""Hand-built kir kernels and specs shared by the backend tests (no frontend needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir import ir
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Call,
    Cast,
    Const,
    Declare,
    For,
    If,
    Kernel,
    Launch,
    Load,
    Param,
    Select,
    Shuffle,
    Special,
    Store,
    Var,
)
from kir.ir.types import BOOL, F32, I32, PointerType
from kir.spec import ArgSpec, Spec

GIN = PointerType(F32, "global", const=True)
GOUT = PointerType(F32, "global")


def i32(v: int) -> Const:
    return Const(v, I32)


def f32(v: float) -> Const:
    return Const(float(v), F32)


def tid() -> ir.Expr:
    return Cast(Special("thread", "x"), I32)


def make_spec(args: dict[str, ArgSpec], sizes: dict[str, int], grid=("G", "1", "1"),
              block=("256", "1", "1"), shared_bytes="0", name="k") -> Spec:
    return Spec(path=Path(f"{name}.kir.toml"), kernel=name, sizes=sizes, ragged={},
                templates={}, grid=grid, block=block, shared_bytes=shared_bytes, rtol=None,
                atol=None, reference=None, args=args)


def block_sum_kernel(threads: int = 256, shared: int | None = None) -> Kernel:
    """out[block] = sum of x over the block's threads: shared tree + a warp shuffle."""
    size = shared if shared is not None else threads
    v, s, i = Var("v", F32), Var("s", I32), Var("i", I32)
    body = Block((
        Alloc("red", F32, size),
        Declare("i", I32, Binary("+", Binary("*", Cast(Special("block", "x"), I32),
                                             i32(threads), I32), tid(), I32)),
        Declare("v", F32, Select(Binary("<", i, Var("n", I32), BOOL),
                                 Load("x", i, F32), f32(0), F32)),
        Assign("v", Binary("+", v, Shuffle("xor", v, i32(16), F32), F32)),
        Store("red", tid(), v),
        Barrier("block"),
        For("L0", "s", I32, i32(threads // 2), Binary(">", s, i32(0), BOOL),
            Binary(">>", s, i32(1), I32),
            Block((If(Binary("<", tid(), s, BOOL),
                      Block((Store("red", tid(), Binary("+", Load("red", tid(), F32),
                                                        Load("red", Binary("+", tid(), s, I32),
                                                             F32), F32)),))),
                   Barrier("block")))),
        If(Binary("==", tid(), i32(0), BOOL),
           Block((Store("out", Cast(Special("block", "x"), I32), Load("red", i32(0), F32)),))),
    ))
    return Kernel("block_sum", (Param("x", GIN), Param("out", GOUT), Param("n", I32)), body,
                  Launch(("G", "1", "1"), (threads, 1, 1), 0))


def block_sum_spec(threads: int = 256) -> Spec:
    return make_spec({
        "x": ArgSpec("x", "f32", ("N",)),
        "out": ArgSpec("out", "f32", ("G",), role="out", init=0.0),
        "n": ArgSpec("n", "i32", (), value="N"),
    }, {"N": 1000, "G": 4}, block=(str(threads), "1", "1"), name="block_sum")


def inout_kernel() -> Kernel:
    """out = 2x; m = max(m, x) with m starting at -inf; acc += x with acc caller data."""
    i = Var("i", I32)
    gi = Binary("+", Binary("*", Cast(Special("block", "x"), I32), i32(64), I32), tid(), I32)
    x = Load("x", i, F32)
    body = Block((
        Declare("i", I32, gi),
        If(Binary("<", i, Var("n", I32), BOOL), Block((
            Store("out", i, Binary("*", x, f32(2), F32)),
            Store("m", i, Call("max", (Load("m", i, F32), x), F32)),
            Store("acc", i, Binary("+", Load("acc", i, F32), Call("exp", (x,), F32, fast=True),
                                   F32)),
        ))),
    ))
    params = (Param("x", GIN), Param("out", GOUT), Param("m", GOUT), Param("acc", GOUT),
              Param("n", I32))
    return Kernel("inout_k", params, body, Launch(("ceil(N / 64)", "1", "1"), (64, 1, 1), 0))


def inout_spec() -> Spec:
    return make_spec({
        "x": ArgSpec("x", "f32", ("N",)),
        "out": ArgSpec("out", "f32", ("N",), role="out", init=0.0),
        "m": ArgSpec("m", "f32", ("N",), role="inout", init=float("-inf")),
        "acc": ArgSpec("acc", "f32", ("N",), role="inout", init="input"),
        "n": ArgSpec("n", "i32", (), value="N"),
    }, {"N": 200}, grid=("ceil(N / 64)", "1", "1"), block=("64", "1", "1"), name="inout_k")


def atomic_kernel(with_max: bool = False) -> Kernel:
    """total[0] += x[i] atomically (and optionally m[0] = max(m[0], x[i]))."""
    i = Var("i", I32)
    stmts = [Declare("i", I32, Binary("+", Binary("*", Cast(Special("block", "x"), I32),
                                                   i32(128), I32), tid(), I32)),
             If(Binary("<", i, Var("n", I32), BOOL),
                Block((Atomic("add", "total", i32(0), Load("x", i, F32)),)))]
    params = [Param("x", GIN), Param("total", GOUT), Param("n", I32)]
    if with_max:
        stmts.append(Atomic("max", "m", i32(0), Load("x", Binary("%", i, Var("n", I32), I32),
                                                        F32)))
        params.append(Param("m", GOUT))
    return Kernel("atomic_sum", tuple(params), Block(tuple(stmts)),
                  Launch(("ceil(N / 128)", "1", "1"), (128, 1, 1), 0))


def atomic_spec(with_max: bool = False) -> Spec:
    args = {
        "x": ArgSpec("x", "f32", ("N",)),
        "total": ArgSpec("total", "f32", ("1",), role="out", init=0.0),
        "n": ArgSpec("n", "i32", (), value="N"),
    }
    if with_max:
        args["m"] = ArgSpec("m", "f32", ("1",), role="out", init=float("-inf"))
    return make_spec(args, {"N": 1000}, grid=("ceil(N / 128)", "1", "1"),
                     block=("128", "1", "1"), name="atomic_sum")


def dynamic_shared_kernel(shared_bytes: int = 1024) -> Kernel:
    """Copy through an extern __shared__ array, reversed within the block."""
    t = tid()
    body = Block((
        Alloc("buf", F32, 0, dynamic=True),
        Store("buf", t, Load("x", Binary("+", Binary("*", Cast(Special("block", "x"), I32),
                                                    i32(256), I32), t, I32), F32)),
        Barrier("block"),
        Store("y", Binary("+", Binary("*", Cast(Special("block", "x"), I32), i32(256), I32), t,
                          I32),
              Load("buf", Binary("-", i32(255), t, I32), F32)),
    ))
    return Kernel("reverse", (Param("x", GIN), Param("y", GOUT)), body,
                  Launch(("G", "1", "1"), (256, 1, 1), shared_bytes))


def dynamic_shared_spec(shared_bytes: int = 1024) -> Spec:
    return make_spec({
        "x": ArgSpec("x", "f32", ("256 * G",)),
        "y": ArgSpec("y", "f32", ("256 * G",), role="out", init=0.0),
    }, {"G": 3}, shared_bytes=str(shared_bytes), name="reverse")


@pytest.fixture
def block_sum():
    return block_sum_kernel(), block_sum_spec().bind()


@pytest.fixture
def inout():
    return inout_kernel(), inout_spec().bind()


@pytest.fixture
def atomic():
    return atomic_kernel(), atomic_spec().bind()


@pytest.fixture
def dyn_shared():
    return dynamic_shared_kernel(), dynamic_shared_spec().bind()
