"""The search on a real GPU: for each example, the best kernel kir's search finds through
MLX's CUDA back end next to the unrewritten kernel and the MLX built-in, measured in the same
run; ``evolve`` against ``random`` at the same budget; and the two composition traces
(FlashAttention-2, parallel selective scan) timed against the unrewritten kernels.

    python benchmarks/search_gpu.py --out DIR [--budget 60] [--time 40] [--only NAME ...]
    python benchmarks/search_gpu.py --target model ...   # the same flow on the cost model

Candidates are validated on the interpreter (worker processes) at each example's small
"check" sizes and, before being timed, on the GPU at the benchmark sizes against the numpy
reference. ``evolve`` starts from the hints (known CUDA practice) plus random genomes;
``random`` draws random genomes only. The same-budget verdict (``--strategies evolve
random``) takes each strategy's best after the smaller of their evaluation counts, checks both
at the timed sizes and times them in turns (``--rounds``): at 0.1-0.2 ms the searches' own
timings move by more than the two bests differ. Writes ``search_gpu.json`` and
``search_gpu.md``.
Run it from outside the repository root when kir is installed non-editable.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kir.backends import target_for
from in_turns import best_at, build_checked, launcher, ratio_in_turns, time_in_turns
from mlx_builtins import BENCH_SIZES  # benchmarks/ is the script's folder

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.rules import apply_trace, load_trace
from kir.search import SearchConfig, search
from kir.search.db import TuningDB
from kir.search.hints import hints

ROOT = Path(__file__).resolve().parent.parent
# Smaller GEMM and reduction than the baseline run: every candidate is checked against the
# float64 numpy reference at these sizes before it is timed.
SEARCH_SIZES = {**BENCH_SIZES, "sgemm": {"M": 2048, "N": 2048, "K": 2048},
                "reduce": {"n": 1 << 24}}
CHECK_SIZES = {
    "flash_attn": {"B": 1, "H": 1, "N": 64, "D": 64},
    "softmax": {"rows": 4, "cols": 1000},
    "layernorm": {"rows": 8, "cols": 512},
    "sgemm": {"M": 64, "N": 48, "K": 32},
    "reduce": {"n": 20000},
    "selective_scan": {"B": 1, "L": 64, "D": 8, "S": 16},
}
TRACES = {"flash_attn": "flash_attn.fa2.json", "selective_scan": "selective_scan.parallel.json"}


def evaluator_for(loaded, target: str, check: dict, args):
    from kir.measure.mlx import MLXEvaluator
    from kir.measure.model import ModelEvaluator

    if target == "model":
        return ModelEvaluator(loaded, check_sizes=check, workers=args.workers)
    return MLXEvaluator(loaded, target=target, check_sizes=check, workers=args.workers,
                        repeat=args.repeat, gpu_workers=args.gpu_workers)


def within(history, final: float | None, fraction: float = 0.05) -> int | None:
    """Evaluations until the best-so-far first came within ``fraction`` of ``final``."""
    if final is None:
        return None
    for record in history:
        if record.best_ms is not None and record.best_ms <= final * (1 + fraction):
            return record.index + 1
    return None


def run_strategy(loaded, registry, ctx, strategy: str, args, check: dict, db=None) -> dict:
    """One search; with ``db`` (shared by the strategies of one example) a candidate another
    strategy already measured is answered from it instead of being timed again."""
    seeds = [h.steps for h in hints(loaded.kernel, registry, ctx)] if strategy == "evolve" else []
    config = SearchConfig(strategy=strategy, budget=args.budget, time_limit_s=args.time,
                          seed=args.seed)
    with evaluator_for(loaded, args.target, check, args) as evaluator:
        result = search(loaded.kernel, registry, evaluator, ctx, config, db, seeds)
        stats = {k: round(v, 3) for k, v in getattr(evaluator, "stats", {}).items()}
    return {"best_ms": result.best_ms, "baseline_ms": result.baseline_ms,
            "speedup": result.speedup, "evaluations": len(result.history),
            "to_within_5pct": within(result.history, result.best_ms),
            "counts": dict(result.counts), "wall_s": result.wall_s, "stopped": result.stopped,
            "best_steps": [str(s) for s in result.best_steps], "modelled": result.modelled,
            "cached": result.cached, "stats": stats,
            "curve": [r.best_ms for r in result.history],
            "trail": [[list(r.genome), r.time_ms if r.status == "ok" else None]
                      for r in result.history]}


def same_budget_in_turns(loaded, registry, ctx, entry: dict, args) -> dict:
    """``evolve``'s and ``random``'s best after the same number of evaluations, checked at
    the timed sizes and timed in turns (``--rounds``): the verdict the searches' own timings
    cannot give when the two are a few per cent apart (they were taken under the compiles'
    load, minutes apart). ``random_over_evolve`` > 1: evolve's kernel is faster."""
    from kir.driver.runners import copy_inputs, reference_outputs

    count = min(entry["evolve"]["evaluations"], entry["random"]["evaluations"])
    genomes = {s: best_at(entry[s]["trail"], count) for s in ("evolve", "random")}
    row: dict = {"evaluations": count, **{f"{s}_steps": g for s, g in genomes.items()}}
    if None in genomes.values():
        row["verdict"] = "no valid kernel on one side"
        return row
    if genomes["evolve"] == genomes["random"]:
        row.update(verdict="same kernel", random_over_evolve=1.0)
        return row
    inputs = loaded.bound.make_inputs(0)
    expected, _ = reference_outputs(loaded, copy_inputs(inputs))
    try:
        calls = [launcher(*build_checked(loaded, genomes[s], registry, ctx, args.target,
                                         inputs, expected)) for s in ("evolve", "random")]
    except Exception as exc:  # noqa: BLE001 - the failure is the row
        row["verdict"] = f"error: {type(exc).__name__}: {exc}"[:300]
        return row
    evolve_ms, random_ms = time_in_turns(calls, args.rounds)
    ratio = ratio_in_turns(random_ms, evolve_ms)
    row.update(evolve_ms=[round(t, 4) for t in evolve_ms],
               random_ms=[round(t, 4) for t in random_ms], random_over_evolve=round(ratio, 4),
               verdict="evolve ahead" if ratio > 1 else "random ahead")
    return row


def time_trace(loaded, registry, ctx, name: str, target: str, repeat: int) -> dict | None:
    """The composition trace's kernel, checked on the GPU and timed, with the baseline."""
    if name not in TRACES or target == "model":
        return None
    from kir.backends import emit
    from kir.backends.mlx_runner import MLXKernel, time_kernel

    from kir.driver.runners import copy_inputs
    from kir.spec.compare import compare_outputs

    steps = load_trace(ROOT / "examples" / "traces" / TRACES[name], registry)
    rewritten = apply_trace(loaded.kernel, steps, registry, ctx, strict=True).kernel
    bound = loaded.bound
    inputs = bound.make_inputs(0)
    expected = bound.reference(copy_inputs(inputs))
    row = {"trace": [str(s) for s in steps]}
    for label, kernel in (("unrewritten", loaded.kernel), ("rewritten", rewritten)):
        runnable = MLXKernel(emit(kernel, bound, target))
        ok = compare_outputs(runnable(copy_inputs(inputs)), expected,
                             lambda o: bound.tolerance(bound.spec.args[o].dtype)).ok
        row[label] = {"ok": ok, "ms": time_kernel(runnable, inputs, 3, repeat).median_ms}
    row["speedup"] = row["unrewritten"]["ms"] / row["rewritten"]["ms"]
    return row


def builtin_ms(name: str, loaded, repeat: int) -> tuple[str, float] | None:
    import mlx.core as mx
    from mlx_builtins import builtin  # benchmarks/ is the script's folder

    found = builtin(name, loaded.bound.make_inputs(0))
    if not found:
        return None
    label, thunk = found
    for _ in range(3):
        mx.eval(thunk())
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        mx.eval(thunk())
        times.append((time.perf_counter() - start) * 1e3)
    return label, sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--target", default="cuda", choices=["cuda", "metal", "model"])
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--time", type=float, default=40.0, help="seconds per search")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds of the same-budget kernels timed in turns")
    parser.add_argument("--only", nargs="*", default=list(SEARCH_SIZES))
    parser.add_argument("--sizes", choices=["bench", "check"], default="bench",
                        help="compile at the benchmark sizes (GPU) or the check sizes (quick)")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                        help="override a benchmark size of the chosen example(s)")
    parser.add_argument("--strategies", nargs="*", default=["evolve", "random"])
    parser.add_argument("--workers", type=int, default=6,
                        help="interpreter validation worker processes")
    parser.add_argument("--gpu-workers", type=int, default=8,
                        help="GPU worker processes (compile in parallel, time one at a time)")
    parser.add_argument("--no-compositions", action="store_true",
                        help="skip timing the two composition traces")
    parser.add_argument("--share-db", action="store_true",
                        help="the strategies of an example share one tuning database (in "
                        "--out): a candidate measured by one is not timed again by the next")
    parser.add_argument("--merge", nargs="*", metavar="JSON",
                        help="only merge earlier runs' search_gpu.json files into one report")
    args = parser.parse_args()
    if args.merge:
        merged: dict = {}
        for path in args.merge:
            part = json.loads(Path(path).read_text())
            # the same example at other sizes (an --size run) keeps a row of its own
            seen = merged.get("examples", {})
            renamed = {}
            for n, e in part["examples"].items():
                if n in seen:  # name it by the sizes that differ
                    n += " (" + ", ".join(f"{k}={v}" for k, v in e["sizes"].items()
                                          if seen[n]["sizes"].get(k) != v) + ")"
                renamed[n] = e
            examples = {**merged.get("examples", {}), **renamed}
            merged = {**part, "examples": examples}
        write(merged, Path(args.out))
        return
    from kir.rules import context_for

    registry = load_registry()
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "target": args.target, "budget": args.budget, "time_s": args.time,
                    "examples": {}}
    if args.target != "model":
        import mlx.core as mx

        report["mlx"] = mx.__version__
    for name in args.only:
        from kir.driver.load import parse_size_overrides

        sizes = SEARCH_SIZES[name] if args.sizes == "bench" else CHECK_SIZES[name]
        sizes = {**sizes, **parse_size_overrides(args.size)}
        entry: dict = {"sizes": sizes}
        try:
            loaded = load_kernel(ROOT / "examples" / f"{name}.cu", sizes=sizes)
            ctx = context_for(loaded, target_for(args.target))
            if args.target != "model":
                found = builtin_ms(name, loaded, args.repeat)
                if found:
                    entry["builtin"], entry["builtin_ms"] = found
                if not args.no_compositions:
                    entry["composition"] = time_trace(loaded, registry, ctx, name,
                                                      args.target, args.repeat)
            db = TuningDB(Path(args.out) / f"{name}.tuning.sqlite") if args.share_db else None
            try:
                for strategy in args.strategies:
                    entry[strategy] = run_strategy(loaded, registry, ctx, strategy, args,
                                                   CHECK_SIZES[name], db)
                    report["examples"][name] = entry
                    write(report, Path(args.out), quiet=True)  # a later kill keeps this
            finally:
                if db is not None:
                    db.close()
            if {"evolve", "random"} <= entry.keys() and args.target != "model":
                entry["same_budget"] = same_budget_in_turns(loaded, registry, ctx, entry, args)
        except Exception as exc:  # keep going: the error is part of the report
            entry["error"] = f"{type(exc).__name__}: {exc}"
        report["examples"][name] = entry
        print(name, json.dumps({k: v for k, v in entry.items()
                                if k not in ("evolve", "random")}), flush=True)
        for strategy in ("evolve", "random"):
            if strategy in entry:
                s = entry[strategy]
                print(f"  {strategy}: best {s['best_ms']} ms, baseline {s['baseline_ms']} ms, "
                      f"{s['evaluations']} evals ({s['cached']} from the database), within "
                      f"5% at {s['to_within_5pct']}, {s['wall_s']:.0f} s, {s['counts']}, "
                      f"{s['stats']}, {s['best_steps']}", flush=True)
    write(report, Path(args.out))


def write(report: dict, out: Path, quiet: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "search_gpu.json").write_text(json.dumps(report, indent=2))
    (out / "search_gpu.md").write_text(markdown(report))
    if not quiet:
        print(markdown(report))


def same_budget(first: dict, second: dict) -> tuple[int, float | None, float | None]:
    """Both strategies' best after the same number of evaluations (the smaller count)."""
    n = min(len(first["curve"]), len(second["curve"]))
    return n, (first["curve"][n - 1] if n else None), (second["curve"][n - 1] if n else None)


def markdown(report: dict) -> str:
    unit = " (modelled)" if report["target"] == "model" else ""
    lines = [f"| example | sizes | unrewritten{unit} | best{unit} (strategy) | MLX built-in | "
             "built-in time / best time | evolve: best, evaluations (stop), to 5%, wall s | "
             "random: best, evaluations (from the database), to 5%, wall s | same budget: "
             "the two bests after N evaluations | winning steps |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    fmt = (lambda v: f"{v:.4g} ms" if v is not None else "none valid")
    for name, e in report["examples"].items():
        if "error" in e:
            lines.append(f"| {name} | error: {e['error']} | | | | | | | | |")
            continue
        runs = {k: e[k] for k in ("evolve", "random") if k in e}
        if not runs:
            continue
        valid = [(r["best_ms"], k) for k, r in runs.items() if r["best_ms"] is not None]
        best_ms, winner = min(valid) if valid else (None, "evolve")
        base = next(iter(runs.values()))["baseline_ms"]
        built = f"{e['builtin']} {e['builtin_ms']:.3f} ms" if "builtin" in e else "—"
        ratio = f"{e['builtin_ms'] / best_ms:.3f}×" if "builtin" in e and best_ms else "—"
        cells = []
        for key in ("evolve", "random"):
            r = runs.get(key)
            if r is None:
                cells.append("not run")
                continue
            extra = f" ({r['cached']} from the database)" if key == "random" else \
                f" ({r['stopped']})"
            cells.append(f"{fmt(r['best_ms'])}, {r['evaluations']}{extra}, "
                         f"{r['to_within_5pct']}, {r['wall_s']:.0f}")
        turns = e.get("same_budget")
        if turns and "evolve_ms" in turns:
            same = (f"{turns['verdict']}: random / evolve {turns['random_over_evolve']:.3f} "
                    f"in turns (N = {turns['evaluations']})")
        elif turns:
            same = f"{turns['verdict']} (N = {turns['evaluations']})"
        elif len(runs) == 2:
            n, a, b = same_budget(runs["evolve"], runs["random"])
            same = f"{fmt(a)} / {fmt(b)} (N = {n}, in-search timings)"
        else:
            same = "—"
        sizes = ", ".join(f"{k}={v}" for k, v in e["sizes"].items())
        lines.append(f"| {name} | {sizes} | {fmt(base)} | {fmt(best_ms)} ({winner}) | {built} | "
                     f"{ratio} | {cells[0]} | {cells[1]} | {same} | "
                     f"{', '.join(runs[winner]['best_steps']) or '(none)'} |")
    comps = [(n, e["composition"]) for n, e in report["examples"].items()
             if e.get("composition")]
    if comps:
        lines += ["", "| composition | unrewritten | rewritten | speed-up | checks |",
                  "|---|---|---|---|---|"]
        for name, c in comps:
            ok = c["unrewritten"]["ok"] and c["rewritten"]["ok"]
            lines.append(f"| {name}: {' → '.join(c['trace'])} | {c['unrewritten']['ms']:.3f} ms "
                         f"| {c['rewritten']['ms']:.3f} ms | {c['speedup']:.2f}× | "
                         f"{'pass' if ok else 'FAIL'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
