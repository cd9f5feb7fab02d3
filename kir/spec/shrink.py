"""Small sizes to validate at: the search checks every candidate on the interpreter, which
at 8192 x 8192 takes minutes per candidate. When the spec has no ``check`` table, these sizes
stand in (the GPU still checks each timed candidate at the compiled sizes).

They start from the spec's default sizes (what its author ran), or the compiled sizes where
those are smaller; sizes that shape the launch's
threads or the kernel's templates (a tile size ``T``, a block width) keep their compiled
values: they are structure, not problem size, and changing them could change which code the
frontend produces. If a buffer is still larger than ``max_elements``, the largest problem
size is halved until none is.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

from kir.errors import KirError
from kir.spec.schema import Spec

MAX_ELEMENTS = 1 << 18


def structural_sizes(spec: Spec) -> set[str]:
    """Sizes named in the launch's block or shared memory or in a template: kept as given."""
    texts = [*spec.block, spec.shared_bytes, *spec.templates.values()]
    names = set()
    for text in texts:
        names.update(re.findall(r"[A-Za-z_]\w*", str(text)))
    return names & set(spec.sizes)


def check_sizes(spec: Spec, compiled: Mapping[str, int],
                max_elements: int = MAX_ELEMENTS) -> dict[str, int]:
    """Sizes to validate a search's candidates at, for a kernel compiled at ``compiled``:
    the spec's defaults (never more than the compiled sizes) with the structural sizes as
    compiled, shrunk by :func:`small_sizes`."""
    fixed = structural_sizes(spec)
    start = {name: (compiled[name] if name in fixed else min(value, compiled[name]))
             for name, value in spec.sizes.items()}
    return small_sizes(spec, start, max_elements)


def small_sizes(spec: Spec, sizes: Mapping[str, int],
                max_elements: int = MAX_ELEMENTS) -> dict[str, int]:
    """``sizes`` with the problem sizes halved until every buffer of ``spec`` holds at most
    ``max_elements`` elements (or no halving helps); structural sizes stay."""
    current = dict(sizes)
    fixed = structural_sizes(spec)

    def measure(trial: Mapping[str, int]) -> tuple[int, int]:
        bound = spec.bind(dict(trial))
        counts = [_elements(bound, n) for n, a in spec.args.items() if a.is_buffer]
        return max(counts, default=0), sum(counts)

    for _ in range(64):
        worst, total = measure(current)
        if worst <= max_elements:
            break
        # Halve the largest size that makes the buffers smaller (keeps shapes balanced:
        # 8192 x 8192 goes to 512 x 512, not to 8192 x 32).
        best: str | None = None
        for name in sorted(current, key=lambda n: (-current[n], n)):
            if name in fixed or current[name] <= 1:
                continue
            trial = dict(current, **{name: max(1, current[name] // 2)})
            try:
                smaller = measure(trial)[1] < total
            except KirError:
                continue  # the spec's expressions do not allow this size
            if smaller:
                best = name
                break
        if best is None:
            break
        current[best] = max(1, current[best] // 2)
    return current


def _elements(bound, name: str) -> int:
    count = 1
    for dim in bound.shape(name):
        count *= dim
    return count


def shrink_until(spec: Spec, sizes: Mapping[str, int], fits: Callable[[dict[str, int]], bool],
                 floor: int = 64, keep: frozenset[str] | set[str] = frozenset()
                 ) -> dict[str, int]:
    """``sizes`` with problem sizes halved, one at a time, until ``fits`` accepts them (or no
    size can be halved): sizes above ``floor`` first, the largest first, so a 256-query
    attention over 4 heads goes to 64 queries before it loses heads; structural sizes and
    those in ``keep`` stay, and a halving the spec's constraints refuse is skipped. For what
    buffer sizes cannot tell: the work a kernel does at them (attention's grows with the
    square of the sequence)."""
    current = dict(sizes)
    fixed = structural_sizes(spec) | set(keep)
    for _ in range(64):
        if fits(dict(current)):
            break
        order = sorted((n for n in current if n not in fixed and current[n] > 1),
                       key=lambda n: (current[n] <= floor, -current[n], n))
        for name in order:
            trial = dict(current, **{name: current[name] // 2})
            try:
                spec.bind(trial)
            except KirError:
                continue
            current = trial
            break
        else:
            break
    return current
