"""Time given rule traces of one kernel on the GPU, alone (no search, no compiles running
beside them), next to the MLX built-in timed in the same process: what a search's noisy
in-flight timings cannot say precisely. Each kernel is checked against the spec's reference
at the timed sizes before it is timed (median of 20 after 5 warm-ups, ``mx.eval`` per call,
as the built-ins are timed in benchmarks/user_search.py).

    python3 benchmarks/time_traces.py FILE --size n=16777216 --builtin reduce \\
        --trace 'grid-stride-reduce{dim=x,blocks=64}' \\
        --trace 'grid-stride-reduce{dim=x,blocks=64};warp-reduce{at=0}'

A trace is steps separated by ``;`` (an empty string: the unrewritten kernel). ``--kir
FILE.kir`` (repeatable) starts traces from a kernel in IR text instead (a dump, or one written
by hand), with FILE's spec; each trace is then applied to each such kernel. Prints one JSON
line per trace and writes them to ``--out`` when given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--spec")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--trace", action="append", default=[])
    parser.add_argument("--kir", action="append", default=[],
                        help="start from this IR text kernel (repeatable)")
    parser.add_argument("--builtin", help="the job's name in benchmarks/mlx_builtins.py")
    parser.add_argument("--target", default="cuda", choices=["cuda", "metal"])
    parser.add_argument("--out")
    args = parser.parse_args(argv)

    import mlx.core as mx
    from mlx_builtins import builtin

    from kir.backends import TARGETS, emit
    from kir.backends.mlx_runner import MLXKernel, measure, time_kernel
    from kir.driver.load import load_kernel, parse_size_overrides
    from kir.driver.registry import load_registry
    from kir.driver.runners import copy_inputs, reference_outputs
    from kir.ir.parser import parse_kernel
    from kir.rules import apply_trace, context_for, parse_step
    from kir.spec.compare import compare_outputs

    sizes = parse_size_overrides(args.size, option="--size")
    loaded = load_kernel(Path(args.file), spec_path=args.spec, sizes=sizes)
    registry = load_registry()
    ctx = context_for(loaded, TARGETS[args.target])
    bound = loaded.bound
    inputs = bound.make_inputs(0)
    expected, _ = reference_outputs(loaded, copy_inputs(inputs))
    rows = []
    if args.builtin:
        made = builtin(args.builtin, inputs)
        if made is not None:
            label, thunk = made
            timing = measure(lambda: mx.eval(thunk()), 5, 20)
            rows.append({"trace": label, "median_ms": timing.median_ms, "min_ms": timing.min_ms,
                         "builtin": True})
            print(json.dumps(rows[-1]), flush=True)
    starts = [(None, loaded.kernel)] if not args.kir else [
        (path, parse_kernel(Path(path).read_text(), path)) for path in args.kir]
    for (start, base), text in ((s, t) for s in starts for t in args.trace or [""]):
        steps = [s.strip() for s in text.split(";") if s.strip()]
        row: dict = {"trace": steps} if start is None else {"kir": start, "trace": steps}
        try:
            trace = [parse_step(s, registry) for s in steps]
            applied = apply_trace(base, trace, registry, ctx, strict=True)
            kernel = MLXKernel(emit(applied.kernel, bound, args.target))
            got = kernel(copy_inputs(inputs))
            check = compare_outputs(got, expected,
                                    lambda o: bound.tolerance(bound.spec.args[o].dtype))
            row["check"] = "pass" if check.ok else check.describe()[:300]
            if check.ok:
                timing = time_kernel(kernel, inputs, 5, 20)
                row.update(median_ms=timing.median_ms, min_ms=timing.min_ms,
                           grid=list(kernel.emitted.grid))
        except Exception as exc:  # noqa: BLE001 - one trace's failure is its row
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
