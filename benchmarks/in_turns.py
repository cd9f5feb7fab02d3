"""Kernels built from rule traces, checked at the timed sizes and timed in turns on the GPU:
the shared part of the scripts that judge searches by their kernels, not by their in-search
timings (``search_checkpoints.py``, ``search_gpu.py``'s same-budget verdict).

In turns: each round times every kernel once (``mx.eval`` per call, median of ``repeat``
after ``warmup``), so a drift of the GPU's speed within minutes falls on every kernel alike;
a comparison then reads the per-round ratios, not times taken minutes apart.
"""

from __future__ import annotations

import statistics
from typing import Callable, Sequence


def best_at(trail: Sequence[tuple[Sequence[str], float | None]], count: int) -> list[str] | None:
    """The genome a search held as its best after ``count`` evaluations of ``trail`` (each
    evaluation's genome and its time, None where rejected); None when none was valid. The
    first of equal times wins, as in the search's own best-so-far."""
    best: tuple[float, list[str]] | None = None
    for genome, time_ms in list(trail)[:count]:
        if time_ms is not None and (best is None or time_ms < best[0]):
            best = (time_ms, list(genome))
    return best[1] if best else None


def build_checked(loaded, genome: Sequence[str], registry, ctx, target: str, inputs,
                  expected):
    """The trace's kernel, emitted for ``target``, run once and checked against ``expected``
    (the reference's outputs for ``inputs``), with its inputs already on the device: returns
    ``(kernel, arrays)``; raises ValueError when it is wrong at these sizes."""
    import mlx.core as mx

    from kir.backends import emit
    from kir.backends.mlx_runner import MLXKernel
    from kir.driver.runners import copy_inputs
    from kir.rules import apply_trace, parse_step
    from kir.spec.compare import compare_outputs

    bound = loaded.bound
    steps = [parse_step(s, registry) for s in genome]
    kernel = MLXKernel(emit(apply_trace(loaded.kernel, steps, registry, ctx,
                                        strict=True).kernel, bound, target))
    check = compare_outputs(kernel(copy_inputs(inputs)), expected,
                            lambda o: bound.tolerance(bound.spec.args[o].dtype))
    if not check.ok:
        raise ValueError(f"wrong at the timed sizes: {check.describe()[:200]}")
    arrays, _ = kernel.prepare(inputs)
    mx.eval(arrays)
    return kernel, arrays


def launcher(kernel, arrays) -> Callable[[], None]:
    """One timed call of a built kernel: launch and wait for its outputs."""
    import mlx.core as mx

    return lambda: mx.eval(kernel.launch(arrays))


def time_in_turns(calls: Sequence[Callable[[], None]], rounds: int, warmup: int = 5,
                  repeat: int = 20) -> list[list[float]]:
    """Per call, its median time (ms) in each of ``rounds`` rounds, the calls taking turns."""
    from kir.backends.mlx_runner import measure

    times: list[list[float]] = [[] for _ in calls]
    for _ in range(rounds):
        for call, out in zip(calls, times):
            out.append(measure(call, warmup, repeat).median_ms)
    return times


def ratio_in_turns(first: Sequence[float], second: Sequence[float]) -> float:
    """The median over rounds of ``first``'s time over ``second``'s (> 1: second faster)."""
    return statistics.median(a / b for a, b in zip(first, second))
