"""Does a CUDA kernel run as fast through ``mx.fast.cuda_kernel`` (MLX compiles it: the user's
module) as through ``mx.fast.precompiled_cuda_kernel`` (kir compiles it: a search's
candidates, :mod:`kir.backends.mlx_precompiled`)? And which of several kernels is faster,
timed in turns on one GPU?

A search ranks its candidates on the second path and the finalists are timed again on the
first (:meth:`kir.measure.mlx.MLXEvaluator.retime`); if the two paths differ, the search ranks
on a speed the user never gets. For the unrewritten kernel, the fastest distinct traces of a
tuning database (``--db``), traces (``--trace``) and kernels as IR text (``--ir``), both
binaries run on the same inputs, their outputs are compared, and then every kernel on both
paths is timed in turns, ``--rounds`` times (median of ``--repeat`` runs after
``--warmup``, as a search times), optionally each after ``--idle`` seconds with the GPU idle
(the finalists' re-timing follows a pause; a GPU may lower its clocks when idle).

    python3 benchmarks/path_timing.py examples/softmax.cu --size rows=8192 --size cols=8192 \\
        --db softmax.db --top 3

One JSON line per kernel: per-path medians of every round, ``ratio`` (MLX's median over kir's).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path


def best_traces(db: str, top: int) -> list[list[str]]:
    """The ``top`` fastest distinct traces a tuning database holds (by its recorded time)."""
    rows = sqlite3.connect(db).execute(
        "SELECT genome, time_ms FROM evaluations WHERE status = 'ok' AND time_ms IS NOT NULL "
        "AND details NOT LIKE '%same_source_as%' ORDER BY time_ms").fetchall()
    return [json.loads(genome) for genome, _ in rows[:top]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--spec")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--db", help="a search's tuning database: time its fastest traces")
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--trace", action="append", default=[],
                        help="a JSON list of steps, e.g. '[\"warp-reduce{at=0}\"]'")
    parser.add_argument("--ir", action="append", default=[],
                        help="a kernel as kir IR text (a .kir file, e.g. from kir apply -o)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--idle", type=float, default=0.0,
                        help="seconds of idle GPU before each timing")
    parser.add_argument("--out")
    args = parser.parse_args(argv)

    import mlx.core as mx
    import numpy as np

    from kir.backends import TARGETS, emit
    from kir.backends.mlx_precompiled import PrecompiledKernel
    from kir.backends.mlx_runner import MLXKernel, measure
    from kir.driver.load import load_kernel, parse_size_overrides
    from kir.driver.registry import load_registry
    from kir.ir.parser import parse_kernel
    from kir.rules import apply_trace, context_for
    from kir.rules.trace import parse_step

    loaded = load_kernel(Path(args.file), spec_path=args.spec,
                         sizes=parse_size_overrides(args.size, option="--size"))
    registry = load_registry()
    ctx = context_for(loaded, TARGETS["cuda"])
    traces: list = [[]] + [json.loads(t) for t in args.trace]
    if args.db:
        traces += best_traces(args.db, args.top)
    traces += args.ir
    inputs = loaded.bound.make_inputs(0)
    rows, ready = [], []
    for trace in traces:  # build and check every kernel first, then time them in turns
        row: dict = {"trace": trace}
        try:
            if isinstance(trace, str):  # an IR file
                kernel = parse_kernel(Path(trace).read_text(), trace)
            else:
                steps = [parse_step(s, registry) for s in trace]
                kernel = apply_trace(loaded.kernel, steps, registry, ctx, strict=True).kernel
            emitted = emit(kernel, loaded.bound, "cuda")
            paths = {"mlx": MLXKernel(emitted), "kir": PrecompiledKernel(emitted)}
            arrays, _ = paths["mlx"].prepare(inputs)
            mx.eval(arrays)
            outs = {name: built.launch(arrays) for name, built in paths.items()}
            mx.eval(list(outs.values()))
            row["max_diff"] = max(
                (float(np.max(np.abs(np.array(a) - np.array(b)))) if a.size else 0.0)
                for a, b in zip(outs["mlx"], outs["kir"]))
            del outs
            ready.append((row, paths, arrays))
        except Exception as exc:  # noqa: BLE001 - one kernel's failure is its row
            row["error"] = f"{type(exc).__name__}: {exc}"[:400]
        rows.append(row)
    # Round-robin over kernels and paths: a shared GPU's speed drifts by 10% within minutes
    # (BENCHMARKS.md round 19), which timing one kernel after another would read as a
    # difference between them.
    for _ in range(args.rounds):
        for row, paths, arrays in ready:
            for name, built in paths.items():
                if args.idle:
                    time.sleep(args.idle)
                timing = measure(lambda b=built, a=arrays: mx.eval(b.launch(a)),
                                 args.warmup, args.repeat, None)
                row.setdefault(f"{name}_ms", []).append(round(timing.median_ms, 4))
    for row, _, _ in ready:
        row["ratio"] = statistics.median(row["mlx_ms"]) / statistics.median(row["kir_ms"])
    for row in rows:
        print(json.dumps(row, default=float), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
