"""kir.spec.size_to_ir: size expressions as IR over a kernel's scalar parameters."""

import dataclasses
import itertools

import pytest
from kir.frontends.cuda import load_cuda

from kir.ir import Assign, Binary, Block, Const, Launch, Var, transform
from kir.ir.fold import fold_expr
from kir.ir.printer import print_expr
from kir.ir.types import I32, U32
from kir.spec.size_to_ir import grid_to_ir, size_expr_to_ir, size_params
from kir.spec.sizeexpr import eval_size_expr

SRC = """
__global__ void k(float* y, int n_rows, int n_cols, unsigned m, float eps, int t) {
  y[0] = eps + n_rows + n_cols + m + t;
}
"""
EXPRS = {"n_rows": "rows", "n_cols": "cols", "m": "M", "eps": "1e-5", "t": "T"}


def _kernel():
    """The kernel, with an assignment to the parameter ``t`` (kir text allows it; the CUDA
    frontend copies parameters it assigns into locals)."""
    k = load_cuda(SRC, "t.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    bump = Assign("t", Binary("+", Var("t", I32), Const(1, I32), I32))
    return dataclasses.replace(k, body=Block((bump,) + k.body.stmts))


def _value(expr, env):
    """Fold ``expr`` with each Var bound to ``env``; the integer it computes."""
    done = fold_expr(transform(expr, lambda n: Const(env[n.name], n.type)
                               if isinstance(n, Var) else None))
    assert isinstance(done, Const), done
    return int(done.value)


def test_size_params():
    # eps is a float, t is assigned in the body, M maps to the unsigned m.
    assert size_params(_kernel(), EXPRS) == {"rows": "n_rows", "cols": "n_cols", "M": "m"}
    assert size_params(_kernel(), {"n_rows": "ceil(rows / 2)"}) == {}


@pytest.mark.parametrize("text", [
    "rows", "7", "ceil(rows / 4)", "ceil(rows * cols / 128)", "ceil((ceil(rows / 4)) / 2)",
    "rows // 3 + 1", "rows % 5", "floor(rows / 3)", "ceil(rows)", "min(rows, cols)",
    "max(rows, 2 * cols)", "(rows + cols) * 2 - 1", "ceil(M / 32)"])
def test_translations_agree_with_sizeexpr(text):
    k = _kernel()
    expr = grid_to_ir(k, text, EXPRS)
    assert expr is not None and expr.type == U32
    for rows, cols, m in itertools.product((1, 4, 5, 127, 128, 129, 1000), (1, 3, 64), (0, 33)):
        sizes = {"rows": rows, "cols": cols, "M": m}
        want = eval_size_expr(text, sizes)
        assert _value(expr, {"n_rows": rows, "n_cols": cols, "m": m}) == want, (text, sizes)


def test_golden():
    expr = grid_to_ir(_kernel(), "ceil(rows / 4)", EXPRS)
    assert print_expr(expr) == "(u32(n_rows) + 3_u32) / 4_u32"
    assert print_expr(grid_to_ir(_kernel(), "12", {})) == "12_u32"
    i32 = size_expr_to_ir("ceil(n / 32)", {"n": Var("n", I32)}, I32)
    assert print_expr(i32) == "(n + 31) / 32"


@pytest.mark.parametrize("text", [
    "rows / 2",            # true division outside ceil/floor
    "ceil(rows / 2 * 3)",  # nor inside an expression under ceil
    "rows ** 2", "sqrt(rows)", "-rows", "2.5", "abs(rows)", "min(rows)",
    "T",                   # t is assigned in the kernel
    "B",                   # no parameter carries B
    "rows +",              # malformed
])
def test_refusals(text):
    assert grid_to_ir(_kernel(), text, EXPRS) is None


def test_check_against_spec_sizes():
    k = _kernel()
    # The parameter's value agrees with the size: kept.
    assert grid_to_ir(k, "ceil(rows / 4)", EXPRS, check={"rows": 10, "cols": 3}) is not None
    # A size missing from the check sizes: refused rather than unchecked.
    assert grid_to_ir(k, "ceil(rows / 4)", EXPRS, check={"cols": 3}) is None
