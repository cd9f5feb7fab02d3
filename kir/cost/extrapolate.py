"""Counters at sizes too big to interpret, extrapolated from counts at small sizes.

The interpreter counts exactly but runs every lane on the CPU: a 2048^3 matmul or a 512 MB
reduction is out of its reach. Their counts are products of simple functions of each size
(flops of a tiled matmul go as M N (a K + b), its groups as M N), so each count is modelled
as ``c(s) = c(s0) * prod_p g_p(s_p) / g_p(s0_p)``, one function per size ``p`` fitted to runs
that move only that size:

* one moved run: a power law ``g(x) = x ** e``, ``e`` rounded to a whole number when within
  0.1 of one (ceilings and edge effects at small sizes pull it off);
* two moved runs (``s0``, ``k s0``, ``k^2 s0``), the first that fits of: the affine function
  through the outer two points if it predicts the middle one within 0.2% (``a + b x``); the
  parabola through the three if no coefficient is negative (a count is a sum of such terms:
  ``a + b x + c x^2``); the power law through the outer two if it predicts the middle one
  within 2% (``b x^e``, e.g. ``x^3``). Failing all, the base is not yet in the regime of the
  target (a loop that does not run one whole trip at the base, say), and the power law
  through the two larger runs is the best guess.

The result is an estimate: the benchmark and the tests compare it with an exact count at a
size the interpreter still reaches. Each buffer's footprint is extrapolated on its own (their
sum is not of that form: a matmul reads M K + K N elements). Per-launch constants (threads per
group, threadgroup bytes, registers) come from the base run; with the kernel, the grid is
evaluated exactly at the target sizes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping, Sequence

from kir.errors import KirError
from kir.interp.counters import Counters
from kir.ir import Kernel
from kir.spec.sizeexpr import eval_size_expr

CONSTANT_FIELDS = frozenset({"threads_per_group", "threadgroup_bytes",
                             "local_bytes_per_thread", "registers_per_thread"})
ROUND_WITHIN = 0.1
AFFINE_TOLERANCE = 0.002
MIDDLE_TOLERANCE = 0.02

Run = tuple[Mapping[str, int], Counters]
Scale = Callable[[float], float]  # a count's value at a size, over its value at the base


def extrapolate(base: Run, moved: Sequence[Run], target: Mapping[str, int],
                kernel: Kernel | None = None) -> Counters:
    """Counters at ``target`` sizes from a ``base`` run and runs that each move one size
    (one or two per size; ``(sizes, counters)`` pairs). Every size that differs between
    ``base`` and ``target`` needs a moved run; with ``kernel`` the grid is exact."""
    sizes0, c0 = base
    by_size: dict[str, list[Run]] = {}
    for sizes, counters in moved:
        changed = [k for k in sizes if sizes[k] != sizes0.get(k)]
        if len(changed) != 1:
            raise KirError(f"a moved run must change exactly one size, not {changed}")
        by_size.setdefault(changed[0], []).append((sizes, counters))
    missing = [k for k in target if target[k] != sizes0.get(k) and k not in by_size]
    if missing:
        raise KirError(f"no run that moves {', '.join(missing)}: cannot extrapolate to "
                       f"{dict(target)}")

    def scaled(value: int, read: Callable[[Counters], int]) -> int:
        total = float(value)
        for name, runs in by_size.items():
            if target[name] == sizes0[name]:
                continue
            points = [(sizes0[name], value)] + sorted(
                (s[name], read(c)) for s, c in runs)
            total *= _fit(points)(target[name]) / value
        return max(0, int(round(total)))

    values: dict[str, object] = {}
    for f in dataclasses.fields(Counters):
        if f.name.startswith("_") or f.name in ("grid", "footprint"):
            continue
        value = getattr(c0, f.name)
        if f.name in CONSTANT_FIELDS or not value:
            values[f.name] = value
        else:
            values[f.name] = scaled(value, lambda c, f=f.name: getattr(c, f))
    footprint = {name: [scaled(v, lambda c, n=name, i=i: c.footprint.get(n, [0] * 4)[i])
                        if v else 0 for i, v in enumerate(columns)]
                 for name, columns in c0.footprint.items()}
    if footprint:
        values["footprint"] = footprint
        for i, total in enumerate(("global_unique_read_bytes", "global_unique_write_bytes",
                                   "global_unique_read_sector_bytes",
                                   "global_unique_write_sector_bytes")):
            values[total] = sum(columns[i] for columns in footprint.values())
    grid = c0.grid
    if kernel is not None:
        grid = tuple(int(eval_size_expr(g, dict(target))) for g in kernel.launch.grid)
        values["groups"] = math.prod(grid)
    return Counters(grid=grid, **values)  # type: ignore[arg-type]


def _fit(points: list[tuple[int, int]]) -> Scale:
    """A function of one size through ``points`` (the base first), as described above."""
    (x0, y0), *rest = points
    if len(rest) == 1:
        (x1, y1), = rest
        exponent = _exponent(y0, y1, math.log(x1 / x0))
        return lambda x: y0 * (x / x0) ** exponent
    (x1, y1), (x2, y2) = rest[:2]

    def predicts_middle(g: Scale, tolerance: float) -> bool:
        return abs(g(x1) - y1) <= tolerance * max(abs(y1), 1)

    def affine(x: float) -> float:
        return y0 + (y2 - y0) * (x - x0) / (x2 - x0)
    if predicts_middle(affine, AFFINE_TOLERANCE):
        return affine
    a, b, c = _parabola(points[:3])
    if b >= 0 and c >= 0 and a >= -MIDDLE_TOLERANCE * y0:  # (a: rounding, edge effects)
        return lambda x: a + b * x + c * x * x
    if y0 > 0 and y2 > 0:
        e = math.log(y2 / y0) / math.log(x2 / x0)

        def power(x: float) -> float:
            return y0 * (x / x0) ** e
        if predicts_middle(power, MIDDLE_TOLERANCE):
            return power
    if y1 <= 0:
        return lambda x: float(y2)
    late = _exponent(y1, y2, math.log(x2 / x1))
    return lambda x: y2 * (x / x2) ** late


def _parabola(points: Sequence[tuple[int, int]]) -> tuple[float, float, float]:
    """(a, b, c) of the parabola a + b x + c x^2 through three points."""
    (x0, y0), (x1, y1), (x2, y2) = points
    c = ((y2 - y0) / (x2 - x0) - (y1 - y0) / (x1 - x0)) / (x2 - x1)
    b = (y1 - y0) / (x1 - x0) - c * (x0 + x1)
    return y0 - b * x0 - c * x0 * x0, b, c


def _exponent(base: int, moved: int, step: float) -> float:
    """The power of the size a count goes as, from its values before and after one step."""
    if moved <= 0:
        return 0.0
    exponent = math.log(moved / base) / step
    nearest = round(exponent)
    return float(nearest) if abs(exponent - nearest) < ROUND_WITHIN else exponent


__all__ = ["extrapolate"]
