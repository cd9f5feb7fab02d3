"""GEMMs that ``warp-tile-matmul``'s loop readers do not take, recognised by what they compute.

The loop readers (:mod:`~kir.rewrites.matmul.tiled_nest`, ``direct_nest``, ``unguarded_nest``)
each prove C = A·B from one style of nest whose k loop is one ``acc += a * b``. GEMM tutorials
go on from there: register blocking (a thread's TM, or TM x TN, results in a register array,
the dot loop outside the result loop, a hoisted operand), vectorized tile copies, warp tiles —
each a new shape to prove. As ``mma-attention`` does for attention
(:mod:`kir.rewrites.attention.recognize`), this module takes the *roles* from the spec and
checks the *function* by running the kernel on kir's interpreter:

1. roles from the spec: two read-only f32 matrices A (M x K) and B (K x N, or N x K as a
   linear layer's weight is), one written f32 matrix C (M x N), their dimensions named by
   spec sizes, and scalar arguments bound to M, N and K (the rebuilt kernel reads them);
2. the function: at the sizes a search validates at (the spec's check table or sizes shrunk
   from the compiled ones), on random inputs and again with the float scalars halved, C must
   come out as alpha·A·B + beta·C, alpha 1 or a float scalar argument, beta 0, 1 or another.

This is evidence by evaluation, as kir's validation is, not a proof; the rebuilt kernel is
validated like every candidate. It checks every bound (M, N and K), so it is right at sizes
where an original that checks none is not.
"""

from __future__ import annotations

import itertools

import numpy as np

from kir.errors import KirError
from kir.ir import Assign, Binary, Block, Cast, For, If, Kernel, Load, Store, Var
from kir.ir.types import BOOL, F32, I32, U32, PointerType
from kir.rewrites.matmul.tiled_nest import MatmulNest
from kir.rewrites.matmul.warp_tiles import Gemm
from kir.rewrites.recognized import floats_halved, recognized

# Loop iterations the interpreter may spend on one run of the kernel being recognised (a
# 128 x 128 x 32 GEMM takes about a million).
PROBE_STEPS = 1 << 22
# The kernel against the formula in f64 (f32 sums in another order).
RTOL, ATOL = 2e-3, 2e-4
# The epilogue's names for the output row, column and the sum (the template renames them).
ROW, COL, ACC = "gemm_row", "gemm_col", "gemm_acc"

_CACHE: dict[tuple, MatmulNest] = {}


def looks_like_gemm(kernel: Kernel) -> bool:
    """The cheap test (no run): a multiply-add of floats inside two nested loops, and three
    buffer parameters at least (A, B and C)."""
    if sum(isinstance(p.type, PointerType) for p in kernel.params) < 3:
        return False
    for outer in kernel.body.walk():
        if isinstance(outer, For):
            for inner in outer.body.walk():
                if isinstance(inner, For) and any(_multiply_add(n) for n in inner.body.walk()):
                    return True
    return False


def _multiply_add(node) -> bool:
    value = node.value if isinstance(node, (Assign, Store)) else None
    return isinstance(value, Binary) and value.op == "+" and value.type == F32 and any(
        isinstance(side, Binary) and side.op == "*" for side in (value.left, value.right))


def recognize(kernel: Kernel, ctx) -> MatmulNest:
    """The nest for ``kernel`` under rule context ``ctx`` (which carries the bound spec), or
    one whose ``refusal`` says why not; remembered per kernel text and sizes."""
    return recognized(kernel, ctx, _CACHE, "a GEMM by what it computes", _recognize,
                      lambda reason: MatmulNest(refusal=reason))


def _recognize(kernel: Kernel, bound) -> MatmulNest:
    spec = bound.spec
    params = {p.name: p for p in kernel.params}
    matrices = {name: a for name, a in spec.args.items()
                if a.is_buffer and name in params and a.dtype == "f32" and len(a.shape) == 2}
    written = list(bound.outputs)
    read = [n for n in matrices if n not in written]
    if len(written) != 1 or written[0] not in matrices or len(read) != 2:
        return MatmulNest(refusal="not two read-only f32 matrices and one written f32 matrix, "
                                  "the only output")
    c = written[0]
    roles = _roles(read, matrices, tuple(matrices[c].shape))
    if roles is None:
        return MatmulNest(refusal="no A (M x K) and B (K x N or N x K) for C (M x N) among "
                                  "the matrices' shapes")
    a, b, b_transposed, (m, n, k) = roles
    ints = {name for name, p in params.items() if p.type in (I32, U32)}
    bound_to = {str(arg.value): name for name, arg in spec.args.items()
                if arg.is_scalar and name in ints and arg.value}
    missing = [dim for dim in (m, n, k) if dim not in bound_to]
    if missing:
        return MatmulNest(refusal=f"no integer scalar argument bound to {', '.join(missing)}")
    floats = [name for name, arg in spec.args.items()
              if arg.is_scalar and name in params and params[name].type == F32]
    runs = _runs(kernel, bound)
    if isinstance(runs, str):
        return MatmulNest(refusal=runs)
    scale = _scales(runs, a, b, b_transposed, c, floats, spec.args[c].role == "inout")
    if scale is None:
        return MatmulNest(refusal="its output is not alpha·A·B + beta·C at small sizes")
    alpha, beta = scale
    pm, pn, pk = (bound_to[dim] for dim in (m, n, k))
    gemm = Gemm(a=a, b=b, lda=pk, ldb=pk if b_transposed else pn, m=pm, n=pn, k=pk,
                b_transposed=b_transposed)
    return MatmulNest(gemm=gemm, epilogue=(_epilogue(kernel, c, pm, pn, alpha, beta),),
                      rows=((ROW, I32),), cols=((COL, I32),), acc=ACC, m_param=pm,
                      n_param=pn)


def _roles(read: list[str], matrices, c_shape: tuple[str, ...]):
    """(A, B, B stored N x K, (M, N, K) size names) for C of ``c_shape``, or None."""
    m, n = c_shape
    for a, b in itertools.permutations(read):
        a_shape, b_shape = tuple(matrices[a].shape), tuple(matrices[b].shape)
        if a_shape[0] != m:
            continue
        k = a_shape[1]
        if b_shape == (k, n):
            return a, b, False, (m, n, k)
        if b_shape == (n, k):
            return a, b, True, (m, n, k)
    return None


def _runs(kernel: Kernel, bound):
    """(inputs, outputs) of the kernel at the sizes a search validates it at (the spec's
    check table, or sizes shrunk from the compiled ones: a tutorial's kernel that checks no
    bounds is right only at whole tiles, and the search's own check of it there must pass
    too), then with the float scalars halved; a refusal when the sizes cannot be had."""
    from kir.interp import run_kernel
    from kir.spec.shrink import check_sizes

    spec = bound.spec
    small = dict(spec.check) if spec.check else check_sizes(spec, bound.sizes)
    try:
        case = spec.bind({**bound.sizes, **small})
    except KirError as err:
        return f"no small sizes to run it at ({err.message})"
    first = case.make_inputs(0)
    return [(inputs, run_kernel(kernel, inputs, case.sizes, max_steps=PROBE_STEPS, races=False))
            for inputs in (first, floats_halved(spec, first))]


def _scales(runs, a: str, b: str, b_transposed: bool, c: str, floats: list[str],
            reads_c: bool):
    """(alpha, beta): each None (1 for alpha, 0 for beta), 1.0, or a float argument's name,
    with which every run's C is alpha·A·B + beta·C; None when no choice fits."""
    alphas = [None, *floats]
    betas = [None, 1.0, *floats] if reads_c else [None]
    for alpha, beta in itertools.product(alphas, betas):
        if alpha is not None and alpha == beta:
            continue
        if all(_fits(inputs, outputs, a, b, b_transposed, c, alpha, beta)
               for inputs, outputs in runs):
            return alpha, beta
    return None


def _fits(inputs, outputs, a, b, b_transposed, c, alpha, beta) -> bool:
    lhs = np.asarray(inputs[a], np.float64)
    rhs = np.asarray(inputs[b], np.float64)
    product = lhs @ (rhs.T if b_transposed else rhs)
    want = product * (1.0 if alpha is None else float(inputs[alpha]))
    if beta is not None:
        scale = beta if isinstance(beta, float) else float(inputs[beta])
        want = want + scale * np.asarray(inputs[c], np.float64)
    got = np.asarray(outputs[c], np.float64).reshape(want.shape)
    return bool(np.all(np.isfinite(got)) and np.allclose(got, want, rtol=RTOL, atol=ATOL))


def _epilogue(kernel: Kernel, c: str, pm: str, pn: str, alpha, beta) -> If:
    """``if (row < M && col < N) C[row * N + col] = alpha * acc + beta * C[row * N + col]``
    over the template's row, column and sum."""
    params = {p.name: p for p in kernel.params}

    def scalar(name: str):
        var = Var(name, params[name].type)
        return var if params[name].type == I32 else Cast(var, I32)

    row, col = Var(ROW, I32), Var(COL, I32)
    index = Binary("+", Binary("*", row, scalar(pn), I32), col, I32)
    value = Var(ACC, F32)
    if alpha is not None:
        value = Binary("*", Var(alpha, F32), value, F32)
    if beta is not None:
        old = Load(c, index, F32)
        term = old if beta == 1.0 else Binary("*", Var(beta, F32), old, F32)
        value = Binary("+", value, term, F32)
    cond = Binary("&&", Binary("<", row, scalar(pm), BOOL), Binary("<", col, scalar(pn), BOOL),
                  BOOL)
    return If(cond, Block((Store(c, index, value),)))
