"""How soon did a search find its result? The best kernel a search had found after 10, 25,
50, 100... evaluations, each timed again alone, in turns, beside the search's result.

A search ranks candidates by timings taken while up to twenty compiles and validations load
the host: at 0.1 ms a kernel's time then moves by 10-20% with the host's state (BENCHMARKS.md
round 23), so the search's own "best at evaluation N" and "within 5% of it at" (its
``verdicts:`` line) partly track lucky timings, not better kernels. This script reads the
search's tuning database (the user's command with ``--db``), takes the best-so-far trace at
each checkpoint, checks each against the spec's reference at the timed sizes, and times them
on the user's path (``mx.fast.cuda_kernel`` / ``metal_kernel``, ``mx.eval`` per call, median
of ``--repeat`` after ``--warmup``) in ``--rounds`` turns, so a drift of the GPU's speed
within minutes falls on every kernel alike. The final best is the search's result
(``--result``, its ``best.trace.json``) or, without one, the last best-so-far.

    kir compile examples/softmax.cu --search --target cuda --size rows=8192 \\
        --size cols=8192 --time 30s --db run.db --out-dir out
    python3 benchmarks/search_checkpoints.py examples/softmax.cu --size rows=8192 \\
        --size cols=8192 --db run.db --result out/*/best.trace.json

With ``--builtin JOB`` (a job of benchmarks/mlx_builtins.py) MLX's built-in is timed in the
same turns, so the ratio of built-in to final best compares times taken seconds apart: per
call, a 0.2-ms kernel's median of 20 moved by up to 25% between rounds on an idle H200 (round
23), more than a ratio's margin to its aim.

One JSON line per checkpoint (``at``, ``found_at``, ``search_ms``, ``alone_ms`` per round),
then a summary line: ``final_ms`` and ``within_5pct_at``, the first checkpoint whose kernel
timed alone is within 5% of the final best (the result's row says in ``found_at`` when the
search first judged the result itself), and with ``--builtin`` the built-in's times and
``ratio`` (median of the per-round ratios, built-in over final).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

MARKS = (5, 10, 25, 50, 100, 200, 300)


def search_rows(db_path: str) -> list:
    """The search's evaluations in a tuning database: the key with most rows, in the order
    the verdicts were stored."""
    from kir.search.db import TuningDB

    with TuningDB(db_path) as db:
        runs = db.runs()
        return db.rows(max(runs, key=lambda info: info.count).key) if runs else []


def checkpoint_traces(db_path: str, marks: tuple[int, ...] = MARKS) -> list[dict]:
    """The best-so-far of the search a tuning database holds, after each of ``marks``
    evaluations (those the search reached) and after its last: ``at``, ``found_at`` (the
    evaluation that found it), ``search_ms`` (its time in the search) and ``genome``.
    Evaluations are :func:`search_rows`; a rejected candidate counts as an evaluation and
    never as a best."""
    rows = search_rows(db_path)
    out: list[dict] = []
    best = None
    wanted = {m for m in marks if m < len(rows)} | {len(rows)}
    for index, row in enumerate(rows, 1):
        evaluation = row.evaluation
        if evaluation.ok and evaluation.time_ms is not None and \
                (best is None or evaluation.time_ms < best["search_ms"]):
            best = {"found_at": index, "search_ms": evaluation.time_ms,
                    "genome": list(row.genome)}
        if index in wanted and best is not None:
            out.append({"at": index, **best})
    return out


def first_judged(db_path: str, genome: list[str]) -> int | None:
    """The evaluation at which the search first judged ``genome`` (the result's steps), in
    the order of :func:`checkpoint_traces`; None when it never did (a kernel adopted from an
    earlier search, or a trace the ablation shortened and nobody had judged)."""
    return next((index for index, row in enumerate(search_rows(db_path), 1)
                 if list(row.genome) == genome), None)


def within(rows: list[dict], final_ms: float, margin: float = 0.05) -> int | None:
    """The first checkpoint whose kernel, timed alone, is within ``margin`` of ``final_ms``."""
    for row in rows:
        if row.get("alone_median_ms") is not None and \
                row["alone_median_ms"] <= final_ms * (1 + margin):
            return row["at"]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--spec")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--db", required=True, help="the search's tuning database")
    parser.add_argument("--result", help="the search's best.trace.json")
    parser.add_argument("--marks", default=",".join(map(str, MARKS)))
    parser.add_argument("--target", default="cuda", choices=["cuda", "metal"])
    parser.add_argument("--builtin", help="time this job's MLX built-in in the same turns")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args(argv)

    from in_turns import build_checked, launcher, ratio_in_turns, time_in_turns

    from kir.backends import TARGETS
    from kir.driver.load import load_kernel, parse_size_overrides
    from kir.driver.registry import load_registry
    from kir.driver.runners import copy_inputs, reference_outputs
    from kir.rules import context_for

    rows = checkpoint_traces(args.db, tuple(int(m) for m in args.marks.split(",") if m))
    if args.result:
        result = json.loads(Path(args.result).read_text())
        steps = list(result.get("steps", []))
        rows.append({"at": "result", "genome": steps,
                     "found_at": first_judged(args.db, steps)})
    loaded = load_kernel(Path(args.file), spec_path=args.spec,
                         sizes=parse_size_overrides(args.size, option="--size"))
    registry = load_registry()
    ctx = context_for(loaded, TARGETS[args.target])
    inputs = loaded.bound.make_inputs(0)
    expected, _ = reference_outputs(loaded, copy_inputs(inputs))
    built: dict[str, tuple] = {}  # one kernel per distinct trace, timed once a round
    for row in rows:
        key = json.dumps(row["genome"])
        if key in built:
            continue
        try:
            kernel, arrays = build_checked(loaded, row["genome"], registry, ctx, args.target,
                                           inputs, expected)
            built[key] = (launcher(kernel, arrays), None)
        except Exception as exc:  # noqa: BLE001 - one trace's failure is its row
            built[key] = (None, f"{type(exc).__name__}: {exc}"[:300])
    timed_keys = [key for key, (call, _) in built.items() if call is not None]
    calls = [built[key][0] for key in timed_keys]
    made = None
    if args.builtin:
        import mlx.core as mx
        from mlx_builtins import builtin

        made = builtin(args.builtin, inputs)
        if made is not None:
            calls.append(lambda f=made[1]: mx.eval(f()))
    per_call = time_in_turns(calls, args.rounds, args.warmup, args.repeat)
    times_of = dict(zip(timed_keys, per_call))
    for row in rows:
        key = json.dumps(row["genome"])
        if key not in times_of:
            row["error"] = built[key][1]
        else:
            times = times_of[key]
            row["alone_ms"] = [round(t, 4) for t in times]
            row["alone_median_ms"] = round(statistics.median(times), 4)
        print(json.dumps(row), flush=True)
    timed = [r for r in rows if r.get("alone_median_ms") is not None]
    final = next((r for r in timed if r["at"] == "result"), timed[-1] if timed else None)
    summary = {"final_ms": final and final["alone_median_ms"],
               "within_5pct_at": final and within([r for r in timed if r["at"] != "result"],
                                                  final["alone_median_ms"]),
               "evaluations": max((r["at"] for r in rows if r["at"] != "result"), default=0)}
    if made is not None and final is not None:
        builtin_times = per_call[-1]
        summary.update(builtin=made[0], builtin_ms=[round(t, 4) for t in builtin_times],
                       ratio=round(ratio_in_turns(builtin_times,
                                                  times_of[json.dumps(final["genome"])]), 4))
    print(json.dumps(summary), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, **summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
