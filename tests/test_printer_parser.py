"""IR text: printer and parser round-trip, golden dump, syntax errors with locations."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from irgen import kernels

from kir.errors import KirError, Loc
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
    Component,
    Const,
    Continue,
    Declare,
    For,
    If,
    Kernel,
    Launch,
    Load,
    MakeVector,
    Param,
    Return,
    Select,
    Shuffle,
    Special,
    Store,
    Unary,
    Var,
    WarpReduce,
    While,
    const,
)
from kir.ir.parser import _lark, parse_kernel
from kir.ir.printer import RESERVED, print_expr, print_kernel, print_stmt
from kir.ir.types import BF16, BOOL, F16, F32, F64, I32, I64, U32, U64, PointerType, VectorType

F32X4 = VectorType(F32, 4)


def at(line: int, col: int = 3) -> Loc:
    return Loc("softmax.cu", line, col)


def every_node_kernel() -> Kernel:
    """One kernel that holds every node kind and every printing corner."""
    n, i, row, acc = Var("n", I32), Var("i", I32), Var("row", I32), Var("acc", F32)
    v = Var("v", F32X4)
    params = (Param("x", PointerType(F32, "global", const=True, restrict=True)),
              Param("y", PointerType(F32)), Param("h", PointerType(F16, "shared")),
              Param("n", I32), Param("scale", F64))
    body = Block((
        Alloc("red", F32, 8, loc=at(7)),
        Alloc("dyn", F32, 0, dynamic=True),
        Alloc("priv", F32X4, 4, space="local"),
        Declare("row", I32, Cast(Special("block", "x"), I32), loc=at(8)),
        Declare("v", F32X4, Load("x", Binary("*", row, n, I32), F32X4)),
        Declare("acc", F32),
        Declare("old", F32),
        For("L0", "i", I32, Cast(Special("thread", "x"), I32), Binary("<", i, n, BOOL),
            Binary("+", i, const(256), I32),
            Block((Store("y", Binary("+", Binary("*", row, n, I32), i, I32),
                         Call("exp", (Load("x", i, F32),), F32), loc=at(10, 7)),
                   Assign("acc", Call("exp", (acc,), F32, fast=True)),
                   If(Binary(">", acc, Const(1e30, F32), BOOL), Block((Break(),))),
                   Continue())),
            kind="unroll", unroll=4, loc=at(9)),
        For("L1", "k", I32, const(0), Binary("<", Var("k", I32), const(4), BOOL),
            Binary("+", Var("k", I32), const(1), I32), Block(), unroll=0),
        While(Binary("<", Const(1.5, F16), Const(math.inf, F16), BOOL), Block((Return(),)),
              loc=at(11)),
        While(Binary("&&", Const(True, BOOL), Unary("!", Const(False, BOOL), BOOL), BOOL),
              Block((), loc=at(12)), test_first=False, loc=at(13)),
        If(Binary("==", Special("lane"), Const(0, U32), BOOL), Block((Barrier("warp"),)),
           Block((Barrier(),), loc=at(20)), loc=at(14)),
        If(Binary("!=", Special("warp"), Const(3, U32), BOOL),
           Block((Atomic("add", "y", i, acc, "old"), Atomic("max", "y", i, Const(-1.5, F32))))),
        Assign("acc", Select(Binary(">", acc, Const(-math.inf, F32), BOOL),
                             Component(v, 2, F32),
                             WarpReduce("sum", Shuffle("xor", acc, Const(16, U32), F32, 16),
                                        F32), F32)),
        Assign("acc", Shuffle("down", acc, Special("warp_size"), F32)),
        Assign("v", MakeVector((Const(1.0, F32), Const(2, F32), Const(math.nan, F32),
                                Unary("-", Const(1.0, F32), F32)), F32X4)),
        Assign("v", Binary("*", v, acc, F32X4)),
        Assign("row", Binary("&", Binary("<<", row, const(2), I32),
                             Binary("-", Binary("-", row, const(-1), I32),
                                    Binary("-", row, row, I32), I32), I32)),
        Assign("row", Unary("-", Unary("-", Unary("~", row, I32), I32), I32)),
        Declare("sp", I32, Special("thread", "y", I32)),
        Declare("d64", F64, Binary("*", Const(1e-300, F64), Var("scale", F64), F64)),
        Declare("b16", BF16, Cast(Load("h", const(0), F16), BF16)),
        Declare("lane", U64, Const(2 ** 60, U64)),
        Declare("odd name", I64, Cast(Var("zz", I32), I64)),
        Declare("f32", F32, Component(Load("x", const(0), F32X4), 3, F32)),
        Declare("nocall", F32, Call("rand", (), F32)),
        Block((Return(),), loc=at(30)),
    ), loc=at(40))
    return Kernel("softmax", params, body, Launch(("B", "ceil(N / 256)", "1"), (256, 1, 1), 64))


def stmt_locs(kernel: Kernel) -> list[tuple[str, Loc | None]]:
    return [(type(s).__name__, s.loc) for s in kernel.body.walk() if hasattr(s, "loc")]


def test_every_node_round_trips_with_locations():
    kernel = every_node_kernel()
    text = print_kernel(kernel)
    back = parse_kernel(text, "dump.ir")
    assert back == kernel
    assert stmt_locs(back) == stmt_locs(kernel)
    assert print_kernel(back) == text


def test_round_trip_without_locations_drops_them():
    kernel = every_node_kernel()
    text = print_kernel(kernel, locations=False)
    assert "softmax.cu" not in text
    back = parse_kernel(text)
    assert back == kernel
    assert all(loc is None for _, loc in stmt_locs(back))
    assert back.fingerprint() == kernel.fingerprint()


def test_dump_shows_types_only_where_needed():
    text = print_kernel(every_node_kernel())
    assert "let v: f32x4 = x[row * n] as f32x4" in text
    assert "for L0 [unroll, pragma_unroll(4)] i: i32 = i32(thread.x); i < n; i = i + 256 {" \
        in text
    assert "for L1 [pragma_unroll] k: i32 = 0; k < 4; k = k + 1 {" in text
    assert "while 1.5_f16 < inf_f16 {" in text
    assert "} while true && !false" in text
    assert "old = atomic.add(y[i], acc)" in text
    assert "atomic.max(y[i], -1.5)" in text
    assert "acc = select(acc > -inf, v.z, reduce.sum(shuffle.xor(acc, 16_u32, 16)))" in text
    assert "v = f32x4{1.0, 2_f32, nan, -(1.0)}" in text
    assert "row = (row << 2) & (row - -1 - (row - row))" in text
    assert "let sp: i32 = (thread.y : i32)" in text
    assert "let %lane: u64 = 1152921504606846976_u64" in text
    assert 'let %"odd name": i64 = i64((zz : i32))' in text
    assert "let nocall: f32 = (rand() : f32)" in text
    assert "acc = fast.exp(acc)" in text


GOLDEN = """\
kernel @scale(x: f32* global const restrict, y: f32* global, n: i32)
    grid=("ceil(N / 256)", "1", "1") block=(256, 1, 1) shared_bytes=0 {
  shared red: f32[8]                                # scale.cu:4:3
  let gid: i32 = i32(block.x * block_dim.x + thread.x)  # scale.cu:5:3
  if gid < n {                                      # scale.cu:6:3
    y[gid] = 2.0 * x[gid]                           # scale.cu:7:5
  }
  barrier block                                     # scale.cu:9:3
}
"""


def test_golden_print_of_small_kernel():
    gid = Var("gid", I32)
    flat = Binary("+", Binary("*", Special("block", "x"), Special("block_dim", "x"), U32),
                  Special("thread", "x"), U32)
    body = Block((
        Alloc("red", F32, 8, loc=Loc("scale.cu", 4, 3)),
        Declare("gid", I32, Cast(flat, I32), loc=Loc("scale.cu", 5, 3)),
        If(Binary("<", gid, Var("n", I32), BOOL),
           Block((Store("y", gid, Binary("*", const(2.0), Load("x", gid, F32), F32),
                        loc=Loc("scale.cu", 7, 5)),)), loc=Loc("scale.cu", 6, 3)),
        Barrier("block", loc=Loc("scale.cu", 9, 3)),
    ))
    kernel = Kernel("scale", (Param("x", PointerType(F32, "global", True, True)),
                              Param("y", PointerType(F32)), Param("n", I32)),
                    body, Launch(("ceil(N / 256)", "1", "1"), (256, 1, 1)))
    assert print_kernel(kernel) == GOLDEN
    assert parse_kernel(GOLDEN) == kernel


def test_print_expr_and_stmt_alone():
    a, b = Var("a", I32), Var("b", I32)
    assert print_expr(Binary("-", a, Binary("-", b, a, I32), I32)) == "a - (b - a)"
    assert print_expr(Binary("*", Binary("+", a, b, I32), a, I32)) == "(a + b) * a"
    assert print_expr(Binary("==", Binary("&", a, b, I32), a, BOOL)) == "(a & b) == a"
    assert print_expr(Binary("||", Binary("&&", Const(True, BOOL), Const(False, BOOL), BOOL),
                             Const(True, BOOL), BOOL)) == "(true && false) || true"
    assert print_expr(Component(Load("p", a, F32X4), 0, F32)) == "p[a].x"
    assert print_stmt(Assign("a", b, loc=Loc("f.cu", 1, 2))).endswith("# f.cu:1:2")


@pytest.mark.parametrize("value,type_,text", [
    (0.1, F32, "0.1"), (1e-05, F32, "1e-05"), (-2.5e+38, F32, "-2.5e+38"),
    (1e16, F64, "1e+16_f64"), (-math.inf, F32, "-inf"), (math.nan, F16, "nan_f16"),
    (7, U32, "7_u32"), (-3, I32, "-3"), (True, BOOL, "true"), (65504.0, F16, "65504.0_f16"),
])
def test_constants_print_exactly_and_round_trip(value, type_, text):
    c = Const(value, type_)
    assert print_expr(c) == text
    kernel = Kernel("k", (Param("y", PointerType(type_)),),
                    Block((Store("y", const(0), c),)), Launch(("1", "1", "1"), (1, 1, 1)))
    back = parse_kernel(print_kernel(kernel))
    got = back.body.stmts[0].value
    assert got.type == type_
    assert (math.isnan(got.value) if isinstance(value, float) and math.isnan(value)
            else got.value == value and type(got.value) is type(value))


def _sum_kernel(terms: int, right: bool) -> Kernel:
    e = Var("n", I32)
    for k in range(terms):
        e = Binary("-", const(k), e, I32) if right else Binary("+", e, const(k), I32)
    return Kernel("deep", (Param("y", PointerType(I32)), Param("n", I32)),
                  Block((Store("y", const(0), e),)), Launch(("1", "1", "1"), (1, 1, 1)))


@pytest.mark.parametrize("right", [False, True])
def test_long_expression_has_no_recursion_limit(right):
    kernel = _sum_kernel(3000, right)
    text = print_kernel(kernel)
    back = parse_kernel(text)
    # Comparing 3,000-deep trees with == recurses in dataclass __eq__; compare text instead.
    assert print_kernel(back) == text
    assert text.count(" + " if not right else " - ") == 3000


def test_deep_nesting_has_no_recursion_limit():
    body = Block((Return(),))
    for k in range(400):
        body = Block((If(Binary("<", Var("n", I32), const(k), BOOL), body),))
    kernel = Kernel("nest", (Param("n", I32),), body, Launch(("1", "1", "1"), (1, 1, 1)))
    text = print_kernel(kernel)
    assert print_kernel(parse_kernel(text)) == text


HEAD = ('kernel @k(x: f32* global, n: i32)\n'
        '    grid=("1", "1", "1") block=(32, 1, 1) shared_bytes=0 {\n')


@pytest.mark.parametrize("text,where,message", [
    (HEAD + "  let a: f32 = 1.0 +\n}\n", "4:1", "unexpected '}'"),
    (HEAD + "  let a: f33 = 1.0\n}\n", "3:10", "unexpected 'f33'"),
    (HEAD + "  let a: i32 = zz + 1\n}\n", "3:16", "cannot tell the type of variable 'zz'"),
    (HEAD + "  let a: f32 = x[0] $ 2\n}\n", "3:21", "unexpected character '$'"),
    (HEAD + "  for L0 i: i32 = 0; i < n; j = i + 1 {\n  }\n}\n", "3:29",
     "the update must assign the loop variable 'i'"),
    (HEAD + "  let a: f32 = 1.0\n", "3:16", "unexpected end of input"),
    ("kernel k()", "1:8", "unexpected 'k'"),
    (HEAD + "  let v: f32x4 = x[0] as f32x4\n  let a: f32 = v.q\n}\n", "4:18",
     "unknown vector component 'q'"),
    (HEAD + "  for L0 [bogus(3)] i: i32 = 0; i < n; i = i + 1 {\n  }\n}\n", "3:11",
     "unknown loop attribute 'bogus'"),
    (HEAD + "  let a: f32 = q[0]\n}\n", "3:16", "cannot tell the type of buffer 'q'"),
])
def test_malformed_ir_reports_file_line_col_and_caret(text, where, message):
    with pytest.raises(KirError) as info:
        parse_kernel(text, "bad.ir")
    err = info.value
    assert f"{err.loc.line}:{err.loc.col}" == where
    assert err.loc.file == "bad.ir"
    assert message in err.message
    rendered = str(err).splitlines()
    assert rendered[0].startswith(f"bad.ir:{where}: error:")
    assert rendered[2].strip() == "^"
    assert rendered[2].index("^") == 4 + err.loc.col - 1


def test_reserved_words_cover_every_grammar_keyword():
    keywords = {t.pattern.value for t in _lark().terminals
                if t.pattern.type == "str" and re.fullmatch(r"[A-Za-z_]\w*", t.pattern.value)}
    assert keywords <= RESERVED


@given(kernels())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_kernels_round_trip(kernel):
    text = print_kernel(kernel)
    back = parse_kernel(text)
    assert back == kernel
    assert print_kernel(back) == text


def test_specialized_launch_round_trips():
    import dataclasses as dc

    from kir.driver.load import load_kernel
    from kir.ir.parser import parse_kernel as parse
    from kir.ir.printer import print_kernel as dump

    kernel = load_kernel("examples/softmax.cu").kernel
    assert " specialized " not in dump(kernel)
    special = dc.replace(kernel, launch=dc.replace(kernel.launch, specialized=True))
    text = dump(special)
    assert "shared_bytes=0 specialized {" in text
    back = parse(text)
    assert back.launch.specialized and back == special
    assert parse(dump(kernel)).launch.specialized is False


def test_ignored_arguments_round_trip_and_must_be_scalar_parameters():
    import dataclasses as dc

    from kir.driver.load import load_kernel
    from kir.errors import KirError
    from kir.ir.parser import parse_kernel as parse
    from kir.ir.printer import print_kernel as dump
    from kir.ir.verify import verify

    kernel = load_kernel("examples/softmax.cu").kernel
    assert "ignores" not in dump(kernel)
    ignoring = dc.replace(kernel, launch=dc.replace(kernel.launch, ignores=("cols",)))
    text = dump(ignoring)
    assert "shared_bytes=0 ignores=(cols) {" in text
    back = parse(text)
    assert back == ignoring and back.launch.ignores == ("cols",)
    verify(back)
    stray = dc.replace(kernel, launch=dc.replace(kernel.launch, ignores=("x", "nope")))
    with pytest.raises(KirError, match="names x, nope: only scalar parameters"):
        verify(stray)
