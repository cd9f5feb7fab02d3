"""The verifier: each check fires at its statement's loc; good kernels pass."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from irgen import kernels
from kir.backends import TARGETS

from kir.errors import KirError, LimitError, Loc
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Break,
    Call,
    Cast,
    Const,
    Continue,
    Declare,
    For,
    If,
    Kernel,
    Launch,
    Load,
    Param,
    Return,
    Select,
    Special,
    Store,
    Var,
    While,
    const,
)
from kir.ir.parser import parse_kernel
from kir.ir.types import BOOL, F32, I32, U32, PointerType, VectorType
from kir.ir.verify import verify

BAD = Loc("bad.cu", 42, 7)
GID = Var("gid", I32)
N = Var("n", I32)
PARAMS = (Param("x", PointerType(F32, "global", const=True)), Param("y", PointerType(F32)),
          Param("n", I32))
PROLOGUE = (Declare("gid", I32, Cast(Special("thread", "x"), I32)),
            Declare("acc", F32, const(0.0)))


def kernel(*stmts, block=(256, 1, 1), shared_bytes=0, source=None) -> Kernel:
    return Kernel("k", PARAMS, Block(PROLOGUE + tuple(stmts)),
                  Launch(("1", "1", "1"), block, shared_bytes), source=source)


def good_kernel() -> Kernel:
    uniform = Cast(Special("block", "x"), I32)
    loop = For("L0", "i", I32, const(0), Binary("<", Var("i", I32), N, BOOL),
               Binary("+", Var("i", I32), const(1), I32),
               Block((Barrier(), Store("tile", Cast(Special("thread", "x"), I32),
                                       const(1.0)), Barrier())))
    return kernel(
        Alloc("tile", F32, 256),
        If(Binary("<", uniform, N, BOOL), Block((Barrier(),))),
        loop,
        If(Binary("<", GID, N, BOOL),
           Block((Store("y", GID, Binary("+", Load("x", GID, F32), Var("acc", F32), F32)),))),
    )


def test_good_kernel_passes_all_targets():
    verify(good_kernel())
    verify(good_kernel(), TARGETS["metal"])
    verify(good_kernel(), TARGETS["cuda"])


@given(kernels())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_kernels_verify(k):
    verify(k, TARGETS["metal"])


def in_range(*stmts):
    return If(Binary("<", GID, N, BOOL), Block(stmts))


CASES = [
    ("undeclared variable 'zz'", Assign("acc", Var("zz", F32), loc=BAD)),
    ("assignment to undeclared variable 'q'", Assign("q", const(1.0), loc=BAD)),
    ("load from unknown buffer 'w'", Assign("acc", Load("w", GID, F32), loc=BAD)),
    ("write to unknown buffer 'w'", Store("w", GID, const(1.0), loc=BAD)),
    ("operands of '+' differ: f32 and i32",
     Assign("acc", Binary("+", Var("acc", F32), GID, F32), loc=BAD)),
    ("storing i32 into 'y' of f32", Store("y", GID, GID, loc=BAD)),
    ("write to const buffer 'x'", Store("x", GID, const(1.0), loc=BAD)),
    ("write to const buffer 'x'", Atomic("add", "x", GID, const(1.0), loc=BAD)),
    ("condition has type f32", If(Var("acc", F32), Block(), loc=BAD)),
    ("condition has type f32", While(Var("acc", F32), Block(), loc=BAD)),
    ("assignment to kernel parameter 'n'", Assign("n", const(3), loc=BAD)),
    ("'acc' has type f32 but is assigned i32", Assign("acc", GID, loc=BAD)),
    ("'i' has type i32 but is assigned f32",
     For("L0", "i", I32, const(0), Binary("<", Var("i", I32), N, BOOL),
         Binary("+", Var("i", I32), const(1), I32),
         Block((Assign("i", const(1.0), loc=BAD),)))),
    ("loading i32x4 from 'y' of f32", Declare("v", VectorType(F32, 4),
                                         Load("y", GID, VectorType(I32, 4)), loc=BAD)),
    ("break outside a loop", Break(loc=BAD)),
    ("continue outside a loop", in_range(Continue(loc=BAD))),
    ("unknown intrinsic 'frobnicate'",
     Assign("acc", Call("frobnicate", (Var("acc", F32),), F32), loc=BAD)),
    ("select arms differ", Assign("acc", Select(Const(True, BOOL), Var("acc", F32), GID, F32),
                                  loc=BAD)),
    ("declared f32 but initialized with i32", Declare("z", F32, GID, loc=BAD)),
    ("barrier under thread-divergent control flow (condition at bad.cu:1:1 depends on "
     "thread.x)", If(Binary("<", Special("thread", "x"), Const(5, U32), BOOL),
                     Block((Barrier(loc=BAD),)), loc=Loc("bad.cu", 1, 1))),
    ("depends on data loaded from 'x'",
     If(Binary(">", Load("x", const(0), F32), const(0.0), BOOL), Block((Barrier(loc=BAD),)))),
    ("depends on 'gid', which varies",
     While(Binary("<", GID, N, BOOL), Block((Barrier(loc=BAD), Break())))),
    ("after a return under",
     in_range(Return()), Barrier(loc=BAD)),
    ("exited early by some threads only",
     For("L0", "i", I32, const(0), Binary("<", Var("i", I32), N, BOOL),
         Binary("+", Var("i", I32), const(1), I32),
         Block((Barrier(loc=BAD), If(Binary("==", Var("i", I32), GID, BOOL),
                                     Block((Break(),))))))),
    ("depends on 'm2', which varies",  # taint flows through assignments
     Declare("m", I32, const(0)), Declare("m2", I32, Var("m", I32)),
     in_range(Assign("m", const(1))),
     If(Binary("==", Var("m2", I32), const(0), BOOL), Block((Barrier(loc=BAD),)))),
]




@pytest.mark.parametrize("case", CASES, ids=[c[0][:40] for c in CASES])
def test_check_fires_with_loc(case):
    message, *stmts = case
    with pytest.raises(KirError) as info:
        verify(kernel(*stmts))
    assert message in str(info.value)
    assert info.value.loc == BAD


def test_uniform_conditions_and_warp_barriers_are_allowed():
    verify(kernel(
        If(Binary("<", Special("block", "y"), Const(2, U32), BOOL), Block((Barrier(),))),
        If(Binary("==", Special("lane"), Const(0, U32), BOOL), Block((Barrier("warp"),))),
        Declare("m", I32, N),
        If(Binary(">", Var("m", I32), const(4), BOOL), Block((Barrier(),))),
    ))


def test_error_shows_source_line_when_kernel_has_source():
    source = "\n" * 41 + "      y[i] = 1;\n"
    with pytest.raises(KirError) as info:
        verify(kernel(Store("x", GID, const(1.0), loc=BAD), source=source))
    assert "bad.cu:42:7: error: write to const buffer 'x'" in str(info.value)
    assert "y[i] = 1;" in str(info.value)


def test_threads_per_group_limit():
    with pytest.raises(LimitError, match="2048 threads; Metal allows at most 1024") as info:
        verify(kernel(block=(64, 32, 1)), TARGETS["metal"])
    assert "reduce the block size" in str(info.value)


def test_shared_memory_limit_counts_static_and_dynamic():
    big = Alloc("tile", F32, 8192, loc=BAD)  # 32 KiB: exactly Metal's limit
    verify(kernel(big), TARGETS["metal"])
    with pytest.raises(LimitError) as info:
        verify(kernel(big, shared_bytes=4), TARGETS["metal"])
    text = str(info.value)
    assert "32772 bytes of shared memory (tile: 32768 B, dynamic: 4 B)" in text
    assert "reduce the tile size" in text
    assert info.value.loc == BAD
    verify(kernel(big, shared_bytes=4), TARGETS["cuda"])
    tiny = dataclasses.replace(TARGETS["metal"], name="tiny", max_threads=64,
                               max_shared_bytes=1024, max_static_shared_bytes=1024)
    with pytest.raises(LimitError):
        verify(kernel(block=(128, 1, 1)), tiny)


def test_verify_parsed_text():
    text = """kernel @k(x: f32* global const, n: i32)
    grid=("1", "1", "1") block=(32, 1, 1) shared_bytes=0 {
  x[0] = 1.0                                        # k.cu:3:5
}
"""
    with pytest.raises(KirError) as info:
        verify(parse_kernel(text))
    assert str(info.value.loc) == "k.cu:3:5"
