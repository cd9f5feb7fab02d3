"""Pricing candidates at the compiled sizes when they are validated at smaller check sizes.

The cost model counts what a kernel does on the interpreter, which cannot run a 2048^3 matmul;
candidates are validated at small check sizes. Priced there, a structure that pays only at
large sizes (a warp-tiled matmul, a bounded grid) looks no better or worse than the input. So
each candidate is counted at a few size sets (a base and one set per moved size, doubled) and
the counts are extrapolated to the compiled sizes (:func:`kir.cost.extrapolate.extrapolate`).
:func:`with_model_sizes` sets an evaluator's context up for it; :func:`model_counts` is what
the checks call per candidate.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from kir.driver.load import Loaded
from kir.errors import KirError
from kir.ir import Kernel
from kir.measure.cases import DEFAULT_SEEDS, Case, CheckContext, run_case, sizes_label
from kir.search.evaluator import Evaluation, Status


def model_counts(kernel: Kernel, ctx: CheckContext, base: Case,
                 counters: Any = None) -> tuple[Evaluation | None, Any]:
    """The counts the model prices ``kernel`` by: extrapolated to ``ctx.model_sizes``
    (:func:`kir.cost.extrapolate.extrapolate`) from runs at the size sets
    :func:`counted_sizes` picks for it; without model sizes, case 0's (``base``): the
    ``counters`` its caller counted while validating, else counted here. A rejection when a
    run fails or the counts do not extrapolate."""
    if ctx.model_sizes is None:
        if counters is not None:
            return None, counters
        verdict, _, counters = run_case(kernel, base, ctx.max_steps, True)
        return verdict, counters
    from kir.cost.extrapolate import extrapolate

    spec = ctx.bound.spec
    sets, why = counted_sizes(spec, base.sizes, ctx.model_sizes, kernel)
    if why:  # the sets grown for this kernel's blocks break a require: the plain ones
        sets, why = counted_sizes(spec, base.sizes, ctx.model_sizes)
    if why:
        return Evaluation.rejected(Status.NOT_APPLICABLE, f"not modelled at "
                                   f"{sizes_label(dict(ctx.model_sizes))}: {why}"), None
    runs = []
    for sizes in sets:
        case = _counted_case(spec, sizes, ctx.model_seed)
        verdict, _, counted = run_case(kernel, case, ctx.max_steps, True)
        if verdict is not None:
            return verdict, None
        runs.append((case.sizes, counted))
    try:
        return None, extrapolate(runs[0], runs[1:], ctx.model_sizes, kernel)
    except KirError as exc:
        return Evaluation.rejected(Status.CRASH, f"its counts do not extrapolate to "
                                   f"{sizes_label(dict(ctx.model_sizes))}: {exc.message}"), None


# How far a counted size may grow past its kernel-independent base to hold whole blocks
# (each doubling doubles the interpreter's work for that run).
ENLARGE_LIMIT = 8
_COUNTED: dict[tuple, Case] = {}  # per process: the inputs of a counted size set, made once


def _counted_case(spec: Any, sizes: Mapping[str, int], seed: int) -> Case:
    key = (id(spec), tuple(sorted(sizes.items())), seed)
    case = _COUNTED.get(key)
    if case is None:
        if len(_COUNTED) > 64:
            _COUNTED.clear()
        bound = spec.bind(dict(sizes))
        case = _COUNTED[key] = Case(f"counted at {sizes_label(bound.sizes)}",
                                    dict(bound.sizes), bound.make_inputs(seed), {}, {}, True)
    return case


def _blocks(kernel: Kernel, sizes: Mapping[str, int]) -> int:
    from kir.spec.sizeexpr import eval_size_expr

    total = 1
    for g in kernel.launch.grid:
        total *= max(int(eval_size_expr(g, dict(sizes))), 1)
    return total


def counted_sizes(spec: Any, check: Mapping[str, int], compiled: Mapping[str, int],
                  kernel: Kernel | None = None) -> tuple[list[dict[str, int]], str]:
    """The size sets the cost model counts at to price a kernel at the ``compiled`` sizes when
    candidates are validated at ``check`` sizes: first a base, each size that differs halved
    from its compiled value while it stays even and no smaller than its check value (a 2048
    stays a multiple of the tiles a kernel uses); with ``kernel``, a size its grid depends on
    is doubled further until doubling it adds blocks, so the base holds whole blocks (a
    256-row block tile counted at 64 rows would look size-independent). Then one set per
    such size, that size doubled. ``([], why)`` when the counts cannot be carried there: a
    size differs that a template instantiates (another kernel), or a set breaks the spec's
    ``require``."""
    from kir.spec.schema import names_file_item
    from kir.spec.sizeexpr import size_names

    templated = set().union(*(size_names(str(e)) for e in spec.templates.values()
                              if not names_file_item(str(e))))
    base, moving = dict(compiled), []
    for name, value in compiled.items():
        small = check.get(name, value)
        if value == small:
            continue
        if name in templated:
            return [], f"{name} is a template size: the compiled kernel is another one"
        while value // 2 >= small and value % 2 == 0:
            value //= 2
        base[name] = max(value, small)
        moving.append(name)
    if kernel is not None:
        for name in moving:
            if _blocks(kernel, {**base, name: compiled[name]}) == _blocks(kernel, base):
                continue  # the grid does not depend on it
            limit = min(compiled[name], base[name] * ENLARGE_LIMIT)
            while 2 * base[name] <= limit and \
                    _blocks(kernel, {**base, name: 2 * base[name]}) == _blocks(kernel, base):
                base[name] *= 2
    sets = [base] + [{**base, name: base[name] * 2} for name in moving]
    for sizes in sets:
        broken = spec.broken_requirements(sizes)
        if broken:
            return [], f"{sizes_label(sizes)} breaks the spec's require {broken[0]!r}"
    return sets, ""


def with_model_sizes(ctx: CheckContext, loaded: Loaded, seed: int = DEFAULT_SEEDS[0]
                     ) -> tuple[CheckContext, str]:
    """``ctx`` set to price candidates at ``loaded``'s compiled sizes when its cases are at
    other (check) sizes, and a note saying so, or why it cannot (then it prices at case 0's
    sizes, as before)."""
    if not ctx.cases or loaded.bound is None:
        return ctx, ""
    check, compiled = dict(ctx.cases[0].sizes), dict(loaded.bound.sizes)
    if check == compiled:
        return ctx, ""
    sets, why = counted_sizes(loaded.bound.spec, check, compiled)
    if why:
        return ctx, (f"modelled at {sizes_label(check)}, not at the compiled sizes: {why}")
    note = (f"modelled at the compiled sizes {sizes_label(compiled)}: each candidate counted "
            f"at sizes such as {sizes_label(sets[0])} and {len(sets) - 1} size(s) doubled, "
            "extrapolated (kir.cost.extrapolate)")
    return dataclasses.replace(ctx, model_sizes=compiled, model_seed=seed), note
