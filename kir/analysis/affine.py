"""Affine index forms and the Banerjee/GCD dependence test used by :mod:`kir.analysis.deps`.

A :data:`Poly` is a polynomial with integer coefficients over *atoms*: variable names and
hardware indices (written ``%thread.x``). It maps each monomial (a sorted tuple of atoms; ``()``
is the constant) to its coefficient. Index expressions become polynomials when they are built
from integer constants, variables, hardware indices, ``+ - *``, left shifts by a constant and
integer casts (casts are taken as value-preserving: index arithmetic is assumed not to
overflow). Anything else (loads, division, min, ...) makes the form unknown (``None``).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

from kir.ir import Binary, Cast, Const, Expr, Special, Var

Poly = dict[tuple[str, ...], int]

MAX_TERMS = 64  # a product blowing up past this is not an index form worth analysing


def special_atom(node: Special) -> str:
    return f"%{node.kind}.{node.axis}" if node.axis else f"%{node.kind}"


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for mono, coef in b.items():
        value = out.get(mono, 0) + sign * coef
        if value:
            out[mono] = value
        else:
            out.pop(mono, None)
    return out


def _mul(a: Poly, b: Poly) -> Poly | None:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            mono = tuple(sorted(ma + mb))
            value = out.get(mono, 0) + ca * cb
            if value:
                out[mono] = value
            else:
                out.pop(mono, None)
    return out if len(out) <= MAX_TERMS else None


def to_poly(expr: Expr, lookup: Callable[[str], Poly | None]) -> Poly | None:
    """The polynomial form of an integer expression, or None. ``lookup(name)`` gives a
    variable's form (its definition substituted, or the atom itself, or None = unknown)."""
    # Index expressions are shallow; an explicit stack keeps long sums safe anyway.
    results: dict[int, Poly | None] = {}
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, done = stack.pop()
        if isinstance(node, Binary) and node.op in ("+", "-", "*", "<<") and not done:
            stack.append((node, True))
            stack.append((node.left, False))
            stack.append((node.right, False))
            continue
        if isinstance(node, Cast) and not done:
            stack.append((node, True))
            stack.append((node.value, False))
            continue
        results[id(node)] = _poly_node(node, results, lookup)
    return results[id(expr)]


def _poly_node(node: Expr, results: dict, lookup) -> Poly | None:
    if isinstance(node, Const):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            return None
        return {(): node.value} if node.value else {}
    if isinstance(node, Var):
        return lookup(node.name)
    if isinstance(node, Special):
        return {(special_atom(node),): 1}
    if isinstance(node, Cast):
        inner = results[id(node.value)]
        return inner if getattr(node.type, "is_int", False) else None
    if isinstance(node, Binary) and node.op in ("+", "-", "*", "<<"):
        left, right = results[id(node.left)], results[id(node.right)]
        if left is None or right is None:
            return None
        if node.op == "+":
            return _add(left, right)
        if node.op == "-":
            return _add(left, right, -1)
        if node.op == "*":
            return _mul(left, right)
        if node.op == "<<" and set(right) <= {()} and 0 <= right.get((), 0) < 31:
            return {m: c << right.get((), 0) for m, c in left.items()}
    return None


def poly_sum(a: Poly, b: Poly, sign: int = 1) -> Poly:
    """``a + sign * b``."""
    return _add(a, b, sign)


def poly_product(a: Poly, b: Poly) -> Poly | None:
    """``a * b``, or None past :data:`MAX_TERMS` terms."""
    return _mul(a, b)


def substitute_values(poly: Poly, values: Mapping[str, int]) -> Poly:
    """Replace atoms with known integer values."""
    out: Poly = {}
    for mono, coef in poly.items():
        rest = []
        for atom in mono:
            if atom in values:
                coef *= values[atom]
            else:
                rest.append(atom)
        out = _add(out, {tuple(rest): coef} if coef else {})
    return out


def rename_atoms(poly: Poly, mapping: Mapping[str, str]) -> Poly:
    out: Poly = {}
    for mono, coef in poly.items():
        out = _add(out, {tuple(sorted(mapping.get(a, a) for a in mono)): coef})
    return out


def difference(a: Poly, b: Poly) -> Poly:
    return _add(a, b, -1)


def constant_value(poly: Poly | None) -> int | None:
    if poly is None or set(poly) - {()}:
        return None
    return poly.get((), 0)


# ------------------------------------------------------------------------ dependence test

Range = tuple[int, int] | None  # inclusive bounds; None = unknown


def may_equal_zero(h: Poly, pairs: list[tuple[str, str, str, Range]],
                   singles: dict[str, Range]) -> bool:
    """Whether ``h == 0`` may have an integer solution. ``pairs`` are (x, y, direction, range)
    for the two instances' copies of one loop variable, direction one of ``<`` (x < y), ``=``,
    ``>``, ``*``; ``singles`` are other variables with their ranges. Every other atom left in
    ``h`` is an unknown symbol: a symbol multiplying a variable, or standing alone, makes the
    answer True (not disproved). Banerjee's inequalities plus the GCD test."""
    vars_ = {x for x, _, _, _ in pairs} | {y for _, y, _, _ in pairs} | set(singles)
    coef: dict[str, int] = {}
    const = 0
    for mono, c in h.items():
        if not mono:
            const = c
        elif len(mono) == 1 and mono[0] in vars_:
            coef[mono[0]] = c
        else:
            return True  # symbolic coefficient or symbolic constant: cannot disprove
    lo_sum, hi_sum = const, const
    gcd_terms: list[int] = []
    coef_pairs: list[tuple[int, int, str, Range, float, float]] = []
    for x, y, direction, rng in pairs:
        a, b = coef.pop(x, 0), -coef.pop(y, 0)  # h contains a*x - b*y
        coef_pairs.append((a, b, direction, rng, *_pair_bounds(a, b, direction, rng)))
        lo, hi = _pair_bounds(a, b, direction, rng)
        lo_sum, hi_sum = lo_sum + lo, hi_sum + hi
        if direction == "=":
            gcd_terms.append(a - b)
        elif direction in ("<", ">"):
            gcd_terms += [a - b, b]  # y = x + delta: (a - b) x - b delta
        else:
            gcd_terms += [a, b]
    singles_bounds = []
    for name, rng in singles.items():
        a = coef.get(name, 0)
        lo, hi = _single_bounds(a, rng)
        singles_bounds.append((lo, hi))
        lo_sum, hi_sum = lo_sum + lo, hi_sum + hi
        gcd_terms.append(a)
    if not lo_sum <= 0 <= hi_sum:
        return False
    if not _stride_feasible(const, coef_pairs, singles_bounds):
        return False
    if not _residue_feasible(const, coef_pairs, [(coef.get(n, 0), r) for n, r in singles.items()]):
        return False
    g = 0
    for t in gcd_terms:
        g = math.gcd(g, abs(t))
    if g == 0:
        return const == 0
    return const % g == 0


def _stride_feasible(const: int, coef_pairs, singles_bounds) -> bool:
    """Delinearization by intervals: for each pair with one coefficient ``a`` on both sides
    the term is ``a * (x - y)``; the rest of ``h`` lies in [rlo, rhi], so ``x - y`` must lie in
    [ceil(-rhi / a), floor(-rlo / a)] as well as in what the direction allows. An empty
    intersection disproves the dependence (``i * 32 + tx`` against ``i' * 32 + tx'``)."""
    terms = [(lo, hi) for *_, lo, hi in coef_pairs] + list(singles_bounds)
    total_lo = const + sum(lo for lo, _ in terms)
    total_hi = const + sum(hi for _, hi in terms)
    for a, b, direction, rng, lo, hi in coef_pairs:
        if a != b or a == 0 or rng is None:
            continue
        rest_lo, rest_hi = total_lo - lo, total_hi - hi
        if math.isinf(rest_lo) or math.isinf(rest_hi):
            continue
        span = rng[1] - rng[0]
        d_lo, d_hi = {"<": (-span, -1), ">": (1, span), "=": (0, 0),
                      "*": (-span, span)}[direction]
        if a > 0:
            f_lo, f_hi = -(int(rest_hi) // a), (-int(rest_lo)) // a
        else:
            f_lo, f_hi = -((-int(rest_lo)) // -a), int(rest_hi) // -a
        if max(d_lo, f_lo) > min(d_hi, f_hi):
            return False
    return True


def _residue_feasible(const: int, coef_pairs, singles) -> bool:
    """GCD test with one term's range: all other coefficients are multiples of g, so the
    term ``a * D`` (D = x - y of a pair with one coefficient, or a single variable) plus the
    constant must be a multiple of g for some D in its range (``32 (..) + tx - tx'``)."""
    terms: list[tuple[int, int, int]] = []  # (coefficient, D low, D high)
    others: list[int] = []
    for a, b, direction, rng, *_ in coef_pairs:
        if a == b and rng is not None and a:
            span = rng[1] - rng[0]
            lo, hi = {"<": (-span, -1), ">": (1, span), "=": (0, 0),
                      "*": (-span, span)}[direction]
            terms.append((a, lo, hi))
        else:
            others += [a, b]
    for a, rng in singles:
        if a and rng is not None:
            terms.append((a, rng[0], rng[1]))
        else:
            others.append(a)
    for k, (a, lo, hi) in enumerate(terms):
        if hi - lo > 4096:
            continue
        g = 0
        for c in others + [t[0] for j, t in enumerate(terms) if j != k]:
            g = math.gcd(g, abs(c))
        if g <= 1:
            continue
        if not any((a * d + const) % g == 0 for d in range(lo, hi + 1)):
            return False
    return True


def _single_bounds(a: int, rng: Range) -> tuple[float, float]:
    if a == 0:
        return 0, 0
    if rng is None:
        return -math.inf, math.inf
    lo, hi = rng
    if lo > hi:
        return math.inf, -math.inf  # empty range: no instance at all
    return min(a * lo, a * hi), max(a * lo, a * hi)


def _pair_bounds(a: int, b: int, direction: str, rng: Range) -> tuple[float, float]:
    """Bounds of a*x - b*y over the region the direction allows."""
    if direction == "=":
        return _single_bounds(a - b, rng)
    if direction == "*":
        lo1, hi1 = _single_bounds(a, rng)
        lo2, hi2 = _single_bounds(-b, rng)
        return lo1 + lo2, hi1 + hi2
    if rng is None:
        if a == 0 and b == 0:
            return 0, 0
        return -math.inf, math.inf
    lo, hi = rng
    if hi - lo < 1:
        return math.inf, -math.inf  # fewer than two iterations: no x < y
    # A linear function over the triangle takes its extremes at the vertices.
    if direction == "<":
        corners = [(lo, lo + 1), (lo, hi), (hi - 1, hi)]
    else:
        corners = [(lo + 1, lo), (hi, lo), (hi, hi - 1)]
    values = [a * x - b * y for x, y in corners]
    return min(values), max(values)
