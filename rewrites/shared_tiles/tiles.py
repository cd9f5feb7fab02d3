"""2-D shared tiles: recognizing ``t[r * C + c]`` accesses of a flattened array and rebuilding
their indices with another layout. :class:`TileRule` is what pad-shared and transpose-shared
share: their sites, their one analysis (:func:`tile_form`) and the rewrite they parametrize.

An index is taken apart as a polynomial (:mod:`kir.analysis.affine`) over the variables it names
(no substitution, so the rebuilt index reads the same variables at the same place). Monomials
whose coefficient is a multiple of ``C`` form the row part ``r``, the rest the column part
``c``, which must provably lie in ``[0, C)``: ranges come from thread indices, counted loops
with constant bounds and single-definition locals built from those.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Mapping

from kir.analysis import canonical, loops, single_defs
from kir.analysis.affine import Poly, to_poly
from kir.analysis.memory import find_alloc, index_poly, matrix_buffers
from kir.ir import (
    Alloc,
    Atomic,
    Binary,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Load,
    Node,
    Special,
    Store,
    Var,
    transform,
)
from kir.ir.nodes import WARP
from kir.ir.types import I32, ScalarType
from kir.rules import BaseRule, NotApplicable

Interval = tuple[int, int]


@dataclass(frozen=True)
class TileForm:
    """A shared array ``name`` of ``rows`` x ``cols`` elements, every access ``r * cols + c``."""

    alloc: Alloc
    rows: int
    cols: int
    # Each access's index (as written) taken apart: index -> (row, column) polynomials.
    parts: Mapping[Expr, tuple[Poly, Poly]] = field(default_factory=dict, compare=False)


def atom_ranges(kernel: Kernel) -> Callable[[str], Interval | None]:
    """The value range of an atom (variable, ``%thread.x`` or ``%lane``), when it can be
    bounded: thread and lane indices, counted loops with a constant stop (and a start that
    is constant or bounded itself, ``for (i = threadIdx.x; i < 2048; i += blockDim.x)``),
    single-definition locals that are polynomials of those, or ``a % c`` and ``a / c`` of a
    non-negative ``a``."""
    block = dict(zip("xyz", kernel.launch.block))
    loop_bounds: dict[str, tuple[Expr, int]] = {}
    for loop in loops(kernel):
        c = canonical(loop)
        if c and isinstance(c.stop, Const):
            loop_bounds[loop.var] = (c.start, int(c.stop.value if c.inclusive
                                                  else c.stop.value - 1))
    defs = single_defs(kernel)
    memo: dict[str, Interval | None] = {}

    def expr_range(e: Expr) -> Interval | None:
        poly = to_poly(e, lambda n: {(n,): 1})
        if poly is not None:
            return poly_range(poly, rng)
        while isinstance(e, Cast):
            e = e.value
        if isinstance(e, Binary) and e.op in ("%", "/") and isinstance(e.right, Const) \
                and isinstance(e.right.value, int) and e.right.value > 0:
            inner = expr_range(e.left)
            if inner is None or inner[0] < 0:
                return None
            c = e.right.value
            return (0, min(c - 1, inner[1])) if e.op == "%" else (inner[0] // c, inner[1] // c)
        return None

    def rng(atom: str) -> Interval | None:
        if atom.startswith("%thread."):
            return (0, block[atom[-1]] - 1)
        if atom == "%lane":
            return (0, WARP - 1)
        if atom in memo:
            return memo[atom]
        memo[atom] = None  # cycles stay unknown
        if atom in loop_bounds:
            start, last = loop_bounds[atom]
            first = expr_range(start)
            if first is not None and last >= first[0]:
                memo[atom] = (first[0], last)  # the step is positive: from the start up
        elif atom in defs:
            memo[atom] = expr_range(defs[atom])
        return memo[atom]
    return rng


def poly_range(poly: Poly, rng: Callable[[str], Interval | None]) -> Interval | None:
    """Interval arithmetic over the monomials of ``poly``."""
    lo = hi = 0
    for mono, coef in poly.items():
        term = (coef, coef)
        for atom in mono:
            r = rng(atom)
            if r is None:
                return None
            products = [term[0] * r[0], term[0] * r[1], term[1] * r[0], term[1] * r[1]]
            term = (min(products), max(products))
        lo, hi = lo + term[0], hi + term[1]
    return lo, hi


def split_index(index: Expr, cols: int, rng) -> tuple[Poly, Poly] | None:
    """``index`` as (row poly, column poly) with ``index = row * cols + col`` and the column
    in ``[0, cols)``, or None."""
    poly = index_poly(index)
    if poly is None:
        return None
    row = {m: c // cols for m, c in poly.items() if c % cols == 0 and m}
    col = {m: c for m, c in poly.items() if m not in row}
    constant = col.pop((), 0)
    # The constant's multiple of cols belongs to the row (t[(r + 1) * C + c]).
    if constant // cols:
        row[()] = constant // cols
    if constant % cols:
        col[()] = constant % cols
    span = poly_range(col, rng)
    if span is None or span[0] < 0 or span[1] >= cols:
        return None
    return row, col


def buffer_accesses(kernel: Kernel, name: str) -> list[Node]:
    return [n for n in kernel.body.walk()
            if isinstance(n, (Load, Store, Atomic)) and n.buffer == name]


def tile_form(kernel: Kernel, name: str) -> TileForm | str:
    """Recognize ``name`` as a 2-D tile; a string says why not."""
    if name in matrix_buffers(kernel.body):
        return f"{name} is read or written as matrix tiles"
    alloc = next((n for n in kernel.body.walk() if isinstance(n, Alloc) and n.name == name),
                 None)
    if alloc is None or alloc.space != "shared":
        return f"{name} is not a shared array"
    if alloc.dynamic:
        return f"{name} is dynamic shared memory (its size comes from the launch)"
    if not isinstance(alloc.elem, ScalarType):
        return f"{name} has vector elements"
    accesses = buffer_accesses(kernel, name)
    if not accesses:
        return f"{name} is never accessed"
    for n in accesses:
        value_type = n.type if isinstance(n, Load) else n.value.type
        if not isinstance(value_type, ScalarType):
            return f"vector access of {name}"
    rng = atom_ranges(kernel)
    candidates = set()
    for n in accesses:
        poly = index_poly(n.index)
        if poly is None:
            return f"index {n.index} of {name} is not affine"
        candidates |= {abs(c) for m, c in poly.items() if m and abs(c) > 1}
    for cols in sorted(candidates, reverse=True):
        if alloc.size % cols or alloc.size == cols:
            continue
        parts = {}
        for n in accesses:
            split = split_index(n.index, cols, rng)
            if split is None:
                break
            parts[n.index] = split
        else:
            return TileForm(alloc, alloc.size // cols, cols, parts)
    return f"no access form t[r * C + c] with c < C fits every access of {name}"


def poly_expr(poly: Poly, types: Mapping[str, ScalarType] | None = None) -> Expr:
    """An i32 expression for ``poly``: hardware indices cast, and variables of another type
    than i32 in ``types`` (a ``uint`` index, say) cast too."""
    terms: list[Expr] = []
    for mono, coef in poly.items():
        factors: list[Expr] = [_atom(a, types or {}) for a in mono]
        if coef != 1 or not factors:
            factors.append(Const(coef, I32))
        term = factors[0]
        for f in factors[1:]:
            term = Binary("*", term, f, I32)
        terms.append(term)
    if not terms:
        return Const(0, I32)
    out = terms[0]
    for t in terms[1:]:
        out = Binary("+", out, t, I32)
    return out


def _atom(atom: str, types: Mapping[str, ScalarType]) -> Expr:
    if atom.startswith("%"):
        kind, _, axis = atom[1:].partition(".")
        return Cast(Special(kind, axis), I32)
    declared = types.get(atom, I32)
    return Var(atom, I32) if declared == I32 else Cast(Var(atom, declared), I32)


def scalar_types(kernel: Kernel) -> dict[str, ScalarType]:
    """The declared type of each scalar parameter, local and loop variable of ``kernel``."""
    types = {p.name: p.type for p in kernel.params if isinstance(p.type, ScalarType)}
    for n in kernel.body.walk():
        if isinstance(n, Declare) and isinstance(n.type, ScalarType):
            types[n.name] = n.type
        elif isinstance(n, For):
            types[n.var] = n.type
    return types


def relayout(kernel: Kernel, form: TileForm, new_index: Callable[[Poly, Poly], Poly],
             new_size: int) -> Kernel:
    """Rewrite every access of the tile with ``new_index(row, col)`` and resize its Alloc."""
    name = form.alloc.name
    types = scalar_types(kernel)

    def visit(n: Node) -> Node | None:
        if isinstance(n, (Load, Store, Atomic)) and n.buffer == name:
            # tile_form split every access; no access's index holds another (not affine).
            return _with_index(n, poly_expr(new_index(*form.parts[n.index]), types))
        if isinstance(n, Alloc) and n.name == name:
            return _replace(n, size=new_size)
        return None
    return dataclasses.replace(kernel, body=transform(kernel.body, visit))


def scale(poly: Poly, factor: int) -> Poly:
    return {m: c * factor for m, c in poly.items()}


def add(a: Poly, b: Poly) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + c
    return {m: c for m, c in out.items() if c}


def _with_index(n: Node, index: Expr) -> Node:
    return _replace(n, index=index)


def _replace(n: Node, **changes) -> Node:
    return dataclasses.replace(n, **changes)  # type: ignore[type-var]


class TileRule(BaseRule):
    """A re-layout of 2-D shared tiles (pad-shared, transpose-shared). Sites are buffers; the
    analysis recognizes the tile form once (:func:`tile_form`), and ``apply`` receives the
    :class:`TileForm` as its plan to hand to :func:`relayout` with the new layout."""

    site_key = "buffer"

    def candidates(self, kernel: Kernel) -> list[str]:
        # Buffer parameters too, so that naming one says why it is not a tile; only shared
        # arrays (in the order of the body) can pass.
        return [p.name for p in kernel.params if p.is_buffer] + \
            [n.name for n in kernel.body.walk() if isinstance(n, Alloc)]

    def plan(self, kernel: Kernel, site: str) -> TileForm | NotApplicable:
        if find_alloc(kernel, site) is None:
            return NotApplicable(f"no shared array {site}")
        form = tile_form(kernel, site)
        return NotApplicable(form) if isinstance(form, str) else form


__all__ = ["TileForm", "TileRule", "tile_form", "relayout", "scale", "add", "poly_expr",
           "split_index", "atom_ranges", "poly_range"]
