"""``kir compile FILE --search``: find the fastest valid rewrite, write it out with its trace,
IR and report.

This is the one place that wires the search to a target: it picks the evaluator (MLX Metal,
MLX CUDA, or the Apple-GPU cost model when no GPU is here), hands it to
:func:`kir.search.search` with hints from known CUDA practice and the tuning database, and
writes the winner as an MLX module.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from kir.errors import KirError
from kir.load import Loaded
from kir.printer import print_kernel
from kir.rules import apply_trace, context_for, save_trace

DEFAULT_BUDGET = 40
MODEL_PROFILE = "apple-m2"
MODEL_NOTE = "no GPU: timings are modelled (Apple M2 cost model)"


def parse_duration(text: str) -> float:
    """``"90"``, ``"30s"``, ``"5m"``, ``"1h"`` (also ``"1m30s"``) → seconds."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*"
                         r"(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or not match or not any(match.groups()):
        raise KirError(f"bad --time {text!r}", hint="write seconds or a duration: 90, 30s, 5m, 1h")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise KirError(f"bad --time {text!r}: it must be more than zero")
    return total


def resolve_target(requested: str | None) -> tuple[str, str | None]:
    """The timing target: the one asked for (checked to exist here), else what this machine
    has (MLX Metal, then MLX CUDA), else the cost model. Returns it and a note to print."""
    from kir.backends.mlx_runner import available_targets, require_target

    if requested in ("metal", "cuda"):
        require_target(requested)
        return requested, None
    if requested == "model":
        return "model", "timings are modelled (Apple M2 cost model), as asked"
    have = available_targets()
    for target in ("metal", "cuda"):
        if target in have:
            return target, None
    return "model", MODEL_NOTE


def check_sizes_for(args: argparse.Namespace, loaded: Loaded) -> dict[str, int] | None:
    """Sizes the interpreter validates candidates at: ``--check-size``, else the spec's
    ``check`` table, else None (validate at the compiled sizes)."""
    from kir.load import parse_size_overrides

    given = parse_size_overrides(getattr(args, "check_size", None))
    if given:
        loaded.spec.bind(given)  # unknown names fail here, with the spec's message
        return given
    return dict(loaded.spec.check) or None


def make_evaluator(loaded: Loaded, target: str, check_sizes: dict[str, int] | None = None):
    """The evaluator for ``target`` ("model", "metal" or "cuda"); ``check_sizes`` moves the
    interpreter's validation (and the cost model's counting) to smaller sizes."""
    try:
        from kir.search.evaluators import MLXEvaluator, ModelEvaluator
    except ImportError as exc:
        raise KirError(f"the search evaluators are not available in this kir ({exc})",
                       hint="reinstall kir (pip install -e .)") from None
    if target == "model":
        return ModelEvaluator(loaded, profile=MODEL_PROFILE, check_sizes=check_sizes)
    # Half the cores compile candidates in GPU workers (a compile takes about a second of one
    # core); timings still run one at a time.
    cores = os.cpu_count() or 2
    return MLXEvaluator(loaded, target=target, check_sizes=check_sizes,
                        workers=max(2, cores // 4), gpu_workers=max(1, min(8, cores // 2)))


def validation_fingerprint(loaded: Loaded, registry) -> str:
    """What a stored verdict depends on besides the candidate, its sizes and the target: the
    spec and its reference's source (:func:`kir.specinputs.validation_fingerprint`) and every
    rule's source (:meth:`kir.registry.Registry.fingerprint`)."""
    from kir.specinputs import validation_fingerprint as spec_fingerprint

    return f"{spec_fingerprint(loaded.spec)}-{registry.fingerprint()}"


def output_paths(args: argparse.Namespace, loaded: Loaded) -> dict[str, Path]:
    """Where each file goes: ``kir-out/<stem>/`` unless ``--out-dir``; ``-o`` names the module,
    ``--report`` the report folder."""
    stem = loaded.path.name.split(".")[0]
    out_dir = Path(args.out_dir) if args.out_dir else Path("kir-out") / stem
    module = Path(args.output) if args.output else out_dir / f"{stem}_kir.py"
    if module.suffix != ".py":
        raise KirError(f"-o {args.output}: with --search the output is the MLX module (.py)",
                       hint="write -o NAME.py; the trace, IR and report go to --out-dir")
    return {"dir": out_dir, "module": module, "trace": out_dir / "best.trace.json",
            "ir": out_dir / "best.kir",
            "report": Path(args.report) if args.report else out_dir}


def run_search(args: argparse.Namespace, loaded: Loaded) -> int:
    """Search, write the winner's module, trace, IR and report, and say where they went."""
    from kir.commands.progress import UNBOUNDED, ProgressBar
    from kir.registry import load_registry
    from kir.report import ablate, write_report
    from kir.search import SearchConfig, TuningDB, default_db_path, search
    from kir.search.engine import default_key
    from kir.search.hints import hints

    if loaded.bound is None:
        raise KirError(f"{loaded.path} has no spec: the search needs one to make inputs",
                       hint="write a .kir.toml beside the kernel (see examples/) or pass --spec")
    target, note = resolve_target(args.target)
    if note:
        print(note, file=sys.stderr)
    paths = output_paths(args, loaded)
    registry = load_registry(args.rules)
    ctx = context_for(loaded, target)
    check_sizes = check_sizes_for(args, loaded)
    if check_sizes:
        label = ", ".join(f"{k}={v}" for k, v in check_sizes.items())
        where = "validated and modelled" if target == "model" else "validated on the interpreter"
        print(f"candidates are {where} at {label}", file=sys.stderr)
    evaluator = make_evaluator(loaded, target, check_sizes)
    limit = parse_duration(args.time) if args.time else None
    # A time limit alone should run until the time is up, not stop at the default budget.
    budget = args.budget or (UNBOUNDED if limit else DEFAULT_BUDGET)
    config = SearchConfig(strategy=args.strategy, budget=budget, time_limit_s=limit,
                          seed=args.seed)
    base = loaded.kernel
    seeds = hints(base, registry, ctx)
    db_path = Path(args.db) if args.db else default_db_path()
    bar = ProgressBar(modelled=bool(evaluator.modelled))
    # Results depend on where candidates were validated, so the check sizes are part of the
    # tuning database key alongside the compiled sizes, and so is everything else a verdict
    # was judged by (spec, reference, rules).
    key_sizes = {**ctx.sizes, **{f"check:{k}": v for k, v in (check_sizes or {}).items()}}
    key = default_key(base, evaluator, key_sizes, validation_fingerprint(loaded, registry))
    with TuningDB(db_path) as db, evaluator:
        try:
            result = search(base, registry, evaluator, ctx, config, db,
                            [h.steps for h in seeds], progress=bar, key=key)
        finally:
            bar.close()
        replay = apply_trace(base, result.best_steps, registry, ctx)
        rows = ablate(base, result.best_steps, result.best_ms, registry, ctx, evaluator,
                      db, key) if result.best_ms else []
    paths["dir"].mkdir(parents=True, exist_ok=True)
    unit = " (modelled)" if result.modelled else ""
    save_trace(result.best_steps, paths["trace"], kernel=base, extra={
        "target": result.target, "device": result.device, "time_ms": result.best_ms,
        "baseline_ms": result.baseline_ms, "modelled": result.modelled,
        "sizes": dict(ctx.sizes)})
    paths["ir"].write_text(print_kernel(result.best_kernel))
    module_target = "cuda" if target == "cuda" else "metal"
    module_error = write_kernel_module(result.best_kernel, loaded, module_target,
                                       paths["module"])
    settings = {"strategy": config.strategy, "seed": config.seed, "hints": ", ".join(
        h.name for h in seeds) or "none", "tuning database": str(db_path)}
    files = write_report(paths["report"], result=result, base=base,
                         step_kernels=replay.kernels, ablation=rows,
                         title=f"{base.name} ({loaded.path.name})", settings=settings)

    if result.best_ms is None:
        print(f"no valid candidate in {len(result.history)} evaluations: the output is the "
              "unrewritten kernel")
    else:
        speed = f", x{result.speedup:.3g} over the unrewritten kernel " \
                f"({result.baseline_ms:.4g} ms)" if result.speedup else ""
        print(f"best: {result.best_ms:.4g} ms{unit}{speed}, {len(result.best_steps)} steps, "
              f"{len(result.history)} evaluations ({result.cached} from the tuning database) "
              f"in {result.wall_s:.1f} s")
    kind = "CUDA" if module_target == "cuda" else "Metal"
    print(f"  kernel ({kind} MLX module): "
          + (f"not written: {module_error}" if module_error else str(paths["module"])))
    print(f"  trace:  {paths['trace']}  (replay: kir apply {args.file} --trace {paths['trace']})")
    print(f"  IR:     {paths['ir']}")
    print(f"  report: {files['report']}  (+ {files['plot'].name})")
    print(f"  tuning database: {db_path}")
    return 1 if module_error else 0


def write_kernel_module(kernel, loaded: Loaded, target: str, path: Path) -> str | None:
    """Write the MLX module for ``kernel``; returns why it could not be written, or None."""
    from kir.backends import emit
    from kir.backends.module import write_module

    try:
        emitted = emit(kernel, loaded.bound, target)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_module(emitted, path, loaded.bound)
    except KirError as exc:
        return exc.message
    return None
