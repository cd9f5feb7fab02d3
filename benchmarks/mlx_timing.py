"""The benchmarks' timing of one MLX call: median of ``repeat`` runs after ``warmup``, each
ended by ``mx.eval`` (so the GPU work is inside the measured time)."""

from __future__ import annotations

import statistics
import time


def median_ms(fn, warmup: int = 5, repeat: int = 20) -> tuple[float, object]:
    """(median milliseconds of ``fn()`` evaluated, the last result)."""
    import mlx.core as mx

    times = []
    out = None
    for i in range(warmup + repeat):
        start = time.perf_counter()
        out = fn()
        mx.eval(out)
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), out
