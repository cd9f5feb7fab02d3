"""Which kernels ``mma-attention`` may rebuild: attention, recognised by what it computes.

FlashAttention kernels are written in many shapes (FlashAttention-1's tile loops with the
running statistics in global memory, FlashAttention-2's row loops, a key a lane, scores in
registers or in shared memory, exp or exp2 with the scale folded in), and proving any one of
them equal to softmax(scale·Q·Kᵀ)·V from its loops is a proof per style. The rule instead
takes the *roles* from the kernel and its spec and checks the *function* by running the
kernel on kir's interpreter:

1. shape (cheap, no run): the kernel calls exp or exp2, takes a maximum, and has a loop
   that accumulates products;
2. roles from the spec: three read-only buffers of one type (f32, f16 or bf16) and shape (Q,
   K and V in some order; or K and V with fewer heads along one axis, grouped-query
   attention, with a scalar argument bound to their number), one written buffer shaped like
   Q (O), and written f32 buffers of one row each (the rows' softmax maximum and sum, as
   FlashAttention-1 keeps them), nothing else written; a scalar argument bound to one of
   Q's dimensions (the run-time sequence length: which one, the run decides);
3. the function: the kernel runs at small sizes (the spec's check table or sizes shrunk from
   the compiled ones, the head dimension as compiled) on random inputs, twice with the float
   scalars halved the second time, and at the spec's ragged sizes; one assignment of Q, K and
   V and one scale (a float scalar argument, 1/sqrt(d) or 1) must reproduce O, and each other
   output must be the rows' maximum of the scaled scores or their sum of exponentials.

This is evidence by evaluation, as kir's validation is, not a proof: a kernel that computes
attention at the sizes tried but something else elsewhere (a branch on a size never tried)
would be rebuilt wrongly. The rebuilt kernel is validated like every candidate.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from kir.errors import KirError
from kir.ir import Assign, Binary, Call, For, Kernel, Store
from kir.ir.types import PointerType
from kir.rewrites.attention.template import Attention, Rows
from kir.rewrites.recognized import floats_halved, recognized
from kir.spec.shrink import structural_sizes

# Loop iterations the interpreter may spend on one run of the kernel being recognised.
PROBE_STEPS = 1 << 18
# Elements a buffer may hold at the sizes derived to run it at (a spec without a check
# table): 8192 is two heads of 64 queries at d = 64.
PROBE_ELEMENTS = 1 << 13
FLOATS = ("f32", "f16", "bf16")  # Q, K, V and O's element types (computed in f32)
# The kernel against the formula in f64: f32 arithmetic (fast exponentials included), and
# outputs rounded to 16 bits (bf16 keeps 8 bits of mantissa).
_TOLERANCES = {"f32": (2e-3, 2e-4), "f16": (1e-2, 2e-3), "bf16": (3e-2, 1e-2)}


@dataclass(frozen=True)
class Recognized:
    """The roles found (``attention``), with the grid's y and z (``heads``: the sizes of Q's
    axes other than the sequence and the head, as spec expressions) and the sequence length's
    size name; or why not (``refusal``)."""

    attention: Attention | None = None
    heads: tuple[str, str] = ("1", "1")
    seq: str = ""
    refusal: str = ""
    # Whether the head dimension (baked into the rebuilt kernel) is fixed wherever the kernel
    # is used: a number in Q's shape, or a size the launch or shared memory is sized by.
    head_fixed: bool = False


def looks_like_attention(kernel: Kernel) -> bool:
    """Step 1: exp or exp2, a maximum, and a loop that accumulates products (the two
    products may share one, or have their sums taken by shuffles)."""
    calls = {n.fn for n in kernel.body.walk() if isinstance(n, Call)}
    if not calls & {"exp", "exp2"}:
        return False
    compares = any(isinstance(n, Binary) and n.op in (">", "<") for n in kernel.body.walk())
    if "max" not in calls and not compares:
        return False
    return any(isinstance(n, For) and _accumulates(n) for n in kernel.body.walk())


def _accumulates(loop: For) -> bool:
    """Whether ``loop``'s own body (not a nested loop's) adds a product to what it writes:
    ``s += a * b`` into a local, ``acc[i] = acc[i] * c + p * v[i]`` into an array, or an
    ``fma``."""
    for stmt in loop.body.stmts:
        if isinstance(stmt, (Assign, Store)):
            value = stmt.value
            if isinstance(value, Call) and value.fn == "fma":
                return True
            if isinstance(value, Binary) and value.op == "+" and any(
                    isinstance(side, Binary) and side.op == "*"
                    for side in (value.left, value.right)):
                return True
    return False


_CACHE: dict[tuple, Recognized] = {}


def recognize(kernel: Kernel, ctx) -> Recognized:
    """Steps 2 and 3 for ``kernel`` under rule context ``ctx`` (which carries the bound
    spec); remembered per kernel text and sizes, since the search asks again and again."""
    return recognized(kernel, ctx, _CACHE, "attention", _recognize,
                      lambda reason: Recognized(refusal=reason))


def _recognize(kernel: Kernel, bound) -> Recognized:
    spec = bound.spec
    params = {p.name: p for p in kernel.params}
    buffers = {name: a for name, a in spec.args.items()
               if a.is_buffer and name in params and isinstance(params[name].type, PointerType)}
    written = list(bound.outputs)
    inputs = [n for n, a in buffers.items() if n not in written and a.dtype in FLOATS]
    by_shape: dict[tuple[str, ...], list[str]] = {}
    for name in inputs:
        by_shape.setdefault(tuple(buffers[name].shape), []).append(name)
    found = _qkv_shapes(by_shape, buffers)
    if found is None:
        return Recognized(refusal="no three read-only f32, f16 or bf16 buffers of one type "
                                  "and shape, of 2 to 4 dimensions, the last the head's (Q, K "
                                  "and V; or K and V with fewer heads than Q)")
    shape, kv_shape, qkv, kv_axis = found
    dtype = buffers[qkv[0]].dtype
    kv_heads = ""
    if kv_axis is not None:
        kv_heads = next((n for n, a in spec.args.items() if a.is_scalar and n in params
                         and (a.value or "").strip() == kv_shape[kv_axis]), "")
        if not kv_heads:
            return Recognized(refusal=f"no scalar argument is the number of K and V heads "
                                      f"{kv_shape[kv_axis]!r}")
    outs = [n for n in written if tuple(buffers[n].shape) == shape and buffers[n].dtype == dtype]
    stats = [n for n in written if tuple(buffers[n].shape) == shape[:-1]
             and buffers[n].dtype == "f32"]
    if len(outs) != 1 or len(outs) + len(stats) != len(written):
        return Recognized(refusal="the kernel writes other than one output shaped like Q and "
                                  "per-row statistics")
    # The sequence axis: one a scalar argument is bound to (the run-time sequence length).
    seq_axes = [(axis, name) for axis, symbol in enumerate(shape[:-1])
                if symbol in spec.sizes and axis != kv_axis
                for name, a in spec.args.items()
                if a.is_scalar and name in params and (a.value or "").strip() == symbol]
    if not seq_axes:
        return Recognized(refusal="no scalar argument is bound to a dimension of Q (the "
                                  "sequence length)")
    runs = _runs(kernel, bound, shape[-1])
    if isinstance(runs, str):
        return Recognized(refusal=runs)
    refusal = ""
    for axis, n_param in seq_axes:
        roles = _roles(runs, axis, qkv, kv_axis, outs[0], stats, spec, params,
                       _TOLERANCES[dtype])
        if isinstance(roles, str):
            refusal = refusal or roles
            continue
        (q, k, v), scale, causal, row_max, row_sum = roles
        head_dim = bound.shape(q)[-1]
        rows, grid = _rows(shape, axis, n_param, str(head_dim))
        stat_rows = _rows(shape[:-1], axis, n_param, None)[0] if stats else None
        kv_rows = None if kv_axis is None else \
            _rows(kv_shape, axis, n_param, str(head_dim), (kv_axis, kv_heads))[0]
        attention = Attention(q, k, v, outs[0], n_param, head_dim, scale, rows, row_max,
                              row_sum, stat_rows, causal, dtype, kv_rows)
        head = shape[-1]
        fixed = head not in spec.sizes or head in structural_sizes(spec)
        return Recognized(attention, grid, shape[axis], head_fixed=fixed)
    return Recognized(refusal=refusal)


def _qkv_shapes(by_shape: dict[tuple[str, ...], list[str]], buffers):
    """(Q's shape, K and V's shape, the three buffers (Q first where K and V differ), the
    axis along which K and V have fewer heads, or None): three buffers of one shape, or one
    and a pair whose shapes differ in one leading axis (grouped-query attention)."""
    def one_type(names: list[str]) -> bool:
        return len({buffers[n].dtype for n in names}) == 1

    for shape, names in by_shape.items():
        if len(names) == 3 and 2 <= len(shape) <= 4 and one_type(names):
            return shape, shape, names, None
    for kv, pair in by_shape.items():
        for shape, single in by_shape.items():
            if len(pair) != 2 or len(single) != 1 or len(kv) != len(shape) or \
                    not 3 <= len(shape) <= 4 or not one_type(pair + single):
                continue
            differ = [i for i in range(len(shape)) if shape[i] != kv[i]]
            if len(differ) == 1 and differ[0] < len(shape) - 1:
                return shape, kv, single + pair, differ[0]
    return None


def _rows(dims: tuple[str, ...], axis: int, n: str, head: str | None,
          grouped: tuple[int, str] | None = None) -> tuple[Rows, tuple]:
    """Where a (batch, head)'s rows lie in a row-major buffer of ``dims`` whose ``axis`` is
    the sequence (``n`` long) and, unless ``head`` is None, whose last axis is the head
    dimension (``head`` long); and the grid's y and z (spec expressions) that give each
    (batch, head) a block row: the other axes, innermost on y (its size ``grid_dim.y``).
    ``grouped`` (axis, argument): K and V's fewer heads along that axis, the argument their
    number, each serving a group of consecutive query heads (the block's head / the group)."""
    last = len(dims) - 1 if head is not None else None
    others = [i for i in range(len(dims)) if i not in (axis, last)]
    size = {axis: f"({n})"} | ({last: head} if last is not None else {})
    index = {}
    for i, grid_axis in zip(reversed(others), ("y", "z")):
        size[i], index[i] = f"i32(grid_dim.{grid_axis})", f"i32(block.{grid_axis})"
        if grouped is not None and i == grouped[0]:
            size[i] = f"({grouped[1]})"
            index[i] = f"i32(block.{grid_axis}) / (i32(grid_dim.{grid_axis}) / ({grouped[1]}))"

    def stride(i: int) -> str:
        return " * ".join(size[j] for j in range(i + 1, len(dims))) or "1"

    base = " + ".join(f"{index[i]} * {stride(i)}" for i in others) or "0"
    grid = tuple(dims[i] if dims[i].isidentifier() else f"({dims[i]})"
                 for i in reversed(others)) + ("1",) * (2 - len(others))
    return Rows(base, stride(axis)), grid


@dataclass
class _Run:
    inputs: dict
    outputs: dict


def _runs(kernel: Kernel, bound, dim_name: str) -> list[_Run] | str:
    """The kernel's runs at small sizes (seed 0, then with the float scalars halved) and at
    the ragged sizes on top of them; a refusal when the sizes cannot be had."""
    from kir.interp import run_kernel
    from kir.spec.shrink import check_sizes

    spec = bound.spec
    small = dict(spec.check) if spec.check else check_sizes(spec, bound.sizes, PROBE_ELEMENTS)
    # The head dimension stays as compiled (a size, or a number in the shape).
    kept = {dim_name: bound.sizes[dim_name]} if dim_name in bound.sizes else {}
    small = {**bound.sizes, **small, **kept}
    cases = [small] + ([{**small, **spec.ragged, **kept}] if spec.ragged else [])
    runs = []
    for i, sizes in enumerate(cases):
        try:
            case = spec.bind(sizes)
        except KirError as err:
            return f"no small sizes to run it at ({err.message})"
        variants = [case.make_inputs(0)]
        if i == 0:
            variants.append(floats_halved(spec, variants[0]))
        # run_kernel returns new arrays, leaving the inputs alone. No race marks: these runs
        # only ask what the kernel computes; every candidate is validated with them.
        for inputs in variants:
            runs.append(_Run(inputs, run_kernel(kernel, inputs, case.sizes,
                                                max_steps=PROBE_STEPS, races=False)))
    return runs


def _heads(x: np.ndarray, axis: int, rows_last: bool = False) -> np.ndarray:
    """``x`` as (heads, n, d) — or (heads, n) for per-row statistics — with ``axis`` the
    sequence, in f64."""
    moved = np.moveaxis(np.asarray(x, np.float64), axis, -1 if rows_last else -2)
    return moved.reshape(-1, moved.shape[-1]) if rows_last else \
        moved.reshape(-1, *moved.shape[-2:])


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool):
    """O, the rows' maximum of the scaled scores and their sum of exponentials (f64), each
    (heads, n, ...)."""
    s = scale * np.einsum("hqd,hkd->hqk", q, k)
    if causal:
        n = s.shape[-1]
        s = np.where(np.tri(n, dtype=bool), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(axis=-1, keepdims=True)
    return np.einsum("hqk,hkd->hqd", p / total, v), m[..., 0], total[..., 0]


def _close(got: np.ndarray, want: np.ndarray, tolerance: tuple[float, float]) -> bool:
    rtol, atol = tolerance
    return bool(np.all(np.isfinite(got)) and np.allclose(got, want, rtol=rtol, atol=atol))


def _roles(runs: list[_Run], axis: int, qkv: list[str], kv_axis: int | None, out: str,
           stats: list[str], spec, params, tolerance: tuple[float, float]):
    """((Q, K, V), scale expression, causal, row-max buffer, row-sum buffer) with ``axis``
    the sequence, or a refusal. With ``kv_axis``, ``qkv`` is Q then K and V in some order,
    which have fewer heads along that axis, each serving consecutive query heads."""
    floats = [n for n, a in spec.args.items() if a.is_scalar and n in params
              and isinstance(runs[0].inputs.get(n), float)]

    def scale_of(run: _Run, choice: str) -> float:
        if choice in floats:
            return float(run.inputs[choice])
        d = run.inputs[qkv[0]].shape[-1]
        return 1.0 / math.sqrt(d) if choice == "rsqrt" else 1.0

    def expanded(run: _Run, name: str) -> np.ndarray:
        x = run.inputs[name]
        if kv_axis is None or name == qkv[0]:
            return x
        group = run.inputs[qkv[0]].shape[kv_axis] // max(1, x.shape[kv_axis])
        return np.repeat(x, group, axis=kv_axis)

    heads = [{n: _heads(expanded(r, n), axis) for n in qkv} for r in runs]
    if any(h[n].shape != h[qkv[0]].shape for h in heads for n in qkv):
        return "K and V's heads do not divide Q's"
    got = [_heads(r.outputs[out], axis) for r in runs]
    orders = list(itertools.permutations(qkv)) if kv_axis is None else \
        [(qkv[0], qkv[1], qkv[2]), (qkv[0], qkv[2], qkv[1])]
    for (q, k, v), choice, causal in itertools.product(
            orders, [*floats, "rsqrt", "one"], (False, True)):
        formulas = [_attention(h[q], h[k], h[v], scale_of(r, choice), causal)
                    for r, h in zip(runs, heads)]
        if not all(_close(g, f[0], tolerance) for g, f in zip(got, formulas)):
            continue
        found = {"max": "", "sum": ""}
        for name in stats:
            values = [_heads(r.outputs[name], axis, rows_last=True) for r in runs]
            kind = next((kind for kind, i in (("max", 1), ("sum", 2))
                         if all(_close(g, f[i], _TOLERANCES["f32"])
                                for g, f in zip(values, formulas))), None)
            if kind is None or found[kind]:
                return f"{name!r} is neither the rows' softmax maximum nor their sum"
            found[kind] = name
        scale = choice if choice in floats else repr(scale_of(runs[0], choice))
        return (q, k, v), scale, causal, found["max"], found["sum"]
    return ("on random inputs its output is not softmax(scale * Q K^T) V (nor causally "
            f"masked) for any order of {', '.join(qkv)} and scale (a float argument, "
            "1/sqrt(d) or 1)")
