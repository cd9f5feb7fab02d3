"""Constant folding with C semantics (kir.ir.fold)."""

import math

import numpy as np

from kir.ir import Binary, Block, Call, Cast, Const, If, Select, Store, Unary, Var
from kir.ir.fold import fold, fold_expr
from kir.ir.types import BOOL, F32, I32, U32

X = Var("x", I32)


def b(op, left, right, t=I32):
    return Binary(op, left, right, t)


def test_i32_wraps_and_division_truncates():
    assert fold_expr(b("+", Const(2**31 - 1, I32), Const(1, I32))) == Const(-2**31, I32)
    assert fold_expr(b("/", Const(-7, I32), Const(2, I32))) == Const(-3, I32)
    assert fold_expr(b("%", Const(-7, I32), Const(2, I32))) == Const(-1, I32)
    assert fold_expr(b("-", Const(0, U32), Const(1, U32), U32)) == Const(2**32 - 1, U32)


def test_undefined_operations_are_left_alone():
    div0 = b("/", Const(1, I32), Const(0, I32))
    assert fold_expr(div0) == div0
    shift = b("<<", Const(1, I32), Const(40, I32))
    assert fold_expr(shift) == shift


def test_f32_arithmetic_rounds_to_f32():
    got = fold_expr(b("+", Const(0.1, F32), Const(0.2, F32), F32))
    assert got.value == float(np.float32(0.1) + np.float32(0.2))
    assert got.value != 0.1 + 0.2


def test_comparisons_casts_select_calls():
    assert fold_expr(b("<", Const(3, I32), Const(4, I32), BOOL)) == Const(True, BOOL)
    assert fold_expr(Cast(Const(-2.7, F32), I32)) == Const(-2, I32)
    assert fold_expr(Select(Const(False, BOOL), X, Const(5, I32), I32)) == Const(5, I32)
    assert fold_expr(Call("max", (Const(3, I32), Const(9, I32)), I32)) == Const(9, I32)
    assert fold_expr(Unary("-", Const(2**31 - 1, I32), I32)) == Const(-2**31 + 1, I32)
    exp = Call("exp", (Const(1.0, F32),), F32)
    assert fold_expr(exp) == exp  # libm differences: not folded
    assert math.isinf(fold_expr(b("/", Const(1.0, F32), Const(0.0, F32), F32)).value)


def test_identities_and_nested():
    assert fold_expr(b("+", b("*", X, Const(1, I32)), b("-", Const(3, I32), Const(3, I32)))) == X
    assert fold_expr(b("*", X, Const(0, I32))) == Const(0, I32)
    xf = Var("f", F32)
    assert fold_expr(b("+", xf, Const(0.0, F32), F32)) != xf  # -0.0 + 0.0: not an identity


def test_fold_statements_drops_constant_ifs():
    store = Store("y", Const(0, I32), Const(1.0, F32))
    block = Block((If(b("<", Const(1, I32), Const(2, I32), BOOL), Block((store,))),
                   If(Const(False, BOOL), Block((store,)))))
    assert fold(block) == Block((store,))
