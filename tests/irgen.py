"""Random valid kir kernels for property tests (print/parse round-trip, rule soundness).

``kernels()`` draws small kernels that pass :func:`kir.ir.verify.verify` and are well-defined
for the interpreter on any input: params ``x0`` (and maybe ``x1``), f32 inputs of length
``n``; ``y``, the f32 output of length ``n``; ``n: i32``. Launch: ``grid=(ceil(N / B), 1, 1)``,
``block=(B, 1, 1)``, so bind ``n = N``. Every load and store of a global buffer is guarded by
``gid < n``; shared memory is indexed modulo the block size; integer divisors are
``(d & 7) + 1``; shift counts are ``& 15``; floats never become integers (a NaN or huge value
converted to int is undefined in C); exp sees ``min(e, 4.0)``, sqrt sees ``abs(e)``, division
divides by ``abs(e) + 1.0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from kir.ir import (
    Alloc,
    Assign,
    Barrier,
    Binary,
    Block,
    Call,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Launch,
    Load,
    Param,
    Select,
    Special,
    Stmt,
    Store,
    Unary,
    Var,
)
from kir.ir.types import BOOL, F32, I32, U32, PointerType

_F32_CONSTS = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, -3.25, 0.125, 4.0])
_I32_CONSTS = st.integers(-8, 8)


@dataclass
class _Scope:
    """Variables visible at a point: name lists per type; ``assignable`` excludes gid/tid
    and loop variables (writing a loop variable could make a loop run forever)."""

    f32: list[str] = field(default_factory=list)
    i32: list[str] = field(default_factory=list)
    assignable: list[str] = field(default_factory=list)

    def child(self) -> "_Scope":
        return _Scope(list(self.f32), list(self.i32), list(self.assignable))


@dataclass
class _Counter:
    names: int = 0
    loops: int = 0

    def name(self) -> str:
        self.names += 1
        return f"v{self.names}"


def _i32(value: int) -> Const:
    return Const(value, I32)


def _f32(value: float) -> Const:
    return Const(value, F32)


def _f32_expr(draw, scope: _Scope, depth: int) -> Expr:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        if scope.f32 and draw(st.booleans()):
            return Var(draw(st.sampled_from(scope.f32)), F32)
        if draw(st.integers(0, 3)) == 0:
            return Cast(_i32_expr(draw, scope, 0), F32)
        return _f32(draw(_F32_CONSTS))
    sub = lambda: _f32_expr(draw, scope, depth - 1)  # noqa: E731
    choice = draw(st.sampled_from(["+", "-", "*", "/", "neg", "select", "call", "call2",
                                   "fma", "exp", "sqrt"]))
    if choice in ("+", "-", "*"):
        return Binary(choice, sub(), sub(), F32)
    if choice == "/":
        divisor = Binary("+", Call("abs", (sub(),), F32), _f32(1.0), F32)
        return Binary("/", sub(), divisor, F32)
    if choice == "neg":
        return Unary("-", sub(), F32)
    if choice == "select":
        return Select(_bool_expr(draw, scope, depth - 1), sub(), sub(), F32)
    if choice == "call":
        fn = draw(st.sampled_from(["abs", "tanh", "sin", "cos", "floor", "ceil"]))
        return Call(fn, (sub(),), F32)
    if choice == "call2":
        return Call(draw(st.sampled_from(["max", "min"])), (sub(), sub()), F32)
    if choice == "fma":
        return Call("fma", (sub(), sub(), sub()), F32)
    if choice == "exp":
        return Call("exp", (Call("min", (sub(), _f32(4.0)), F32),), F32,
                    fast=draw(st.booleans()))
    return Call("sqrt", (Call("abs", (sub(),), F32),), F32)


def _i32_expr(draw, scope: _Scope, depth: int) -> Expr:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.integers(0, 4))
        if kind == 0 and scope.i32:
            return Var(draw(st.sampled_from(scope.i32)), I32)
        if kind == 1:
            return Var("n", I32)
        if kind == 2:
            mask = Binary("&", Special("thread", "x"), Const(3, U32), U32)
            return Cast(mask, I32)
        if kind == 3:
            return Cast(Special("block", "x"), I32)
        return _i32(draw(_I32_CONSTS))
    sub = lambda: _i32_expr(draw, scope, depth - 1)  # noqa: E731
    choice = draw(st.sampled_from(["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>",
                                   "neg", "not", "select", "bool", "u32", "max"]))
    if choice in ("+", "-", "*", "&", "|", "^"):
        return Binary(choice, sub(), sub(), I32)
    if choice in ("/", "%"):
        divisor = Binary("+", Binary("&", sub(), _i32(7), I32), _i32(1), I32)
        return Binary(choice, sub(), divisor, I32)
    if choice in ("<<", ">>"):
        return Binary(choice, sub(), Binary("&", sub(), _i32(15), I32), I32)
    if choice == "neg":
        return Unary("-", sub(), I32)
    if choice == "not":
        return Unary("~", sub(), I32)
    if choice == "select":
        return Select(_bool_expr(draw, scope, depth - 1), sub(), sub(), I32)
    if choice == "bool":
        return Cast(_bool_expr(draw, scope, depth - 1), I32)
    if choice == "u32":
        return Cast(Binary("+", Cast(sub(), U32), Const(1, U32), U32), I32)
    return Call(draw(st.sampled_from(["max", "min"])), (sub(), sub()), I32)


def _bool_expr(draw, scope: _Scope, depth: int) -> Expr:
    choice = draw(st.integers(0, 4 if depth > 0 else 1))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
    if choice == 0:
        return Binary(op, _f32_expr(draw, scope, depth - 1), _f32_expr(draw, scope, depth - 1),
                      BOOL)
    if choice == 1:
        return Binary(op, _i32_expr(draw, scope, depth - 1), _i32_expr(draw, scope, depth - 1),
                      BOOL)
    if choice == 2:
        return Unary("!", _bool_expr(draw, scope, depth - 1), BOOL)
    logic = draw(st.sampled_from(["&&", "||"]))
    return Binary(logic, _bool_expr(draw, scope, depth - 1), _bool_expr(draw, scope, depth - 1),
                  BOOL)


def _stmts(draw, scope: _Scope, counter: _Counter, depth: int, top: bool) -> list[Stmt]:
    out: list[Stmt] = []
    for _ in range(draw(st.integers(0, 3 if depth > 0 else 2))):
        kinds = ["let_f", "let_i", "assign"] + (["for", "if"] if depth > 0 else [])
        kinds += ["barrier"] if top else []
        kind = draw(st.sampled_from(kinds))
        if kind == "let_f":
            name = counter.name()
            out.append(Declare(name, F32, _f32_expr(draw, scope, 2)))
            scope.f32.append(name)
            scope.assignable.append(name)
        elif kind == "let_i":
            name = counter.name()
            out.append(Declare(name, I32, _i32_expr(draw, scope, 2)))
            scope.i32.append(name)
            scope.assignable.append(name)
        elif kind == "assign" and scope.assignable:
            name = draw(st.sampled_from(scope.assignable))
            value = _f32_expr(draw, scope, 2) if name in scope.f32 else \
                _i32_expr(draw, scope, 2)
            out.append(Assign(name, value))
        elif kind == "for":
            label = f"L{counter.loops}"
            counter.loops += 1
            var = counter.name()
            inner = scope.child()
            inner.i32.append(var)
            i = Var(var, I32)
            trips = draw(st.integers(0, 3))
            body = _stmts(draw, inner, counter, depth - 1, top)
            out.append(For(label, var, I32, _i32(0), Binary("<", i, _i32(trips), BOOL),
                           Binary("+", i, _i32(1), I32), Block(tuple(body)),
                           unroll=draw(st.sampled_from([None, None, 0, 2]))))
        elif kind == "if":
            cond = _bool_expr(draw, scope, 2)
            then = _stmts(draw, scope.child(), counter, depth - 1, False)
            orelse = _stmts(draw, scope.child(), counter, depth - 1, False) \
                if draw(st.booleans()) else None
            out.append(If(cond, Block(tuple(then)),
                          None if orelse is None else Block(tuple(orelse))))
        elif kind == "barrier":
            out.append(Barrier("block"))
    return out


@st.composite
def kernels(draw) -> Kernel:
    """A small random kernel that verifies and is well-defined on any input (see module)."""
    inputs = draw(st.integers(1, 2))
    block_size = draw(st.sampled_from([32, 64]))
    params = [Param(f"x{k}", PointerType(F32, "global", const=True, restrict=True))
              for k in range(inputs)]
    params += [Param("y", PointerType(F32, "global")), Param("n", I32)]
    gid, tid, n = Var("gid", I32), Var("tid", I32), Var("n", I32)
    in_range = Binary("<", gid, n, BOOL)
    flat = Binary("+", Binary("*", Special("block", "x"), Special("block_dim", "x"), U32),
                  Special("thread", "x"), U32)
    body: list[Stmt] = [Declare("gid", I32, Cast(flat, I32)),
                        Declare("tid", I32, Cast(Special("thread", "x"), I32))]
    scope = _Scope(i32=["gid", "tid"])
    for k in range(inputs):
        name = f"a{k}"
        body.append(Declare(name, F32, _f32(0.0)))
        body.append(If(in_range, Block((Assign(name, Load(f"x{k}", gid, F32)),))))
        scope.f32.append(name)
        scope.assignable.append(name)
    counter = _Counter()
    if draw(st.booleans()):
        offset = _i32(draw(st.integers(0, block_size - 1)))
        index = Binary("%", Binary("+", tid, offset, I32), _i32(block_size), I32)
        body += [Alloc("tile", F32, block_size),
                 Store("tile", tid, _f32_expr(draw, scope, 2)),
                 Barrier("block"),
                 Declare("t0", F32, Load("tile", index, F32))]
        scope.f32.append("t0")
    body += _stmts(draw, scope, counter, 2, top=True)
    body.append(If(in_range, Block((Store("y", gid, _f32_expr(draw, scope, 3)),))))
    launch = Launch((f"ceil(N / {block_size})", "1", "1"), (block_size, 1, 1), 0)
    return Kernel("fuzz", tuple(params), Block(tuple(body)), launch)
