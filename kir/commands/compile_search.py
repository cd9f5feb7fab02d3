"""``kir compile FILE --search``: find the fastest valid rewrite, write it out with its trace,
IR and report.

This is the one place that wires the search to a target: it picks the evaluator (MLX Metal,
MLX CUDA, or the Apple-GPU cost model when no GPU is here), hands it to
:func:`kir.search.search` with hints from known CUDA practice and the tuning database, and
writes the winner as an MLX module.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Mapping

from kir.driver.load import Loaded
from kir.errors import KirError
from kir.ir.printer import print_kernel
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


def check_sizes_for(args: argparse.Namespace, loaded: Loaded) -> tuple[dict[str, int] | None, str]:
    """Sizes the interpreter validates candidates at, and where they came from:
    ``--check-size``, else the spec's ``check`` table, else sizes derived from the spec's
    defaults (:func:`kir.spec.shrink.check_sizes`), so a search at 8192 x 8192 does not spend
    minutes per candidate on the interpreter; None when those are the compiled sizes."""
    from kir.driver.load import parse_size_overrides
    from kir.spec.shrink import check_sizes

    given = parse_size_overrides(getattr(args, "check_size", None), option="--check-size")
    if given:
        loaded.spec.bind(given)  # unknown names fail here, with the spec's message
        return given, "--check-size"
    if loaded.spec.check:
        return dict(loaded.spec.check), "the spec's check table"
    derived = check_sizes(loaded.spec, loaded.bound.sizes)
    if derived == dict(loaded.bound.sizes):
        return None, ""
    return derived, "derived from the spec's defaults: it has no check table"


def make_evaluator(loaded: Loaded, target: str, check_sizes: dict[str, int] | None = None,
                   cluster: str | None = None, device_resource: str | None = None):
    """The evaluator for ``target`` ("model", "metal" or "cuda"); ``check_sizes`` moves the
    interpreter's validation (and the cost model's counting) to smaller sizes. With
    ``cluster`` (``ray[:ADDRESS]``) candidates are judged on that cluster's workers, the
    device workers on nodes offering ``device_resource`` (:mod:`kir.cluster`)."""
    if cluster:
        from kir.cluster import cluster_evaluator
        from kir.cluster.connect import role_for

        return cluster_evaluator(loaded, cluster, device_resource,
                                 role_for(target, MODEL_PROFILE), check_sizes)
    try:
        from kir.measure.mlx import MLXEvaluator
        from kir.measure.model import ModelEvaluator
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
    spec and its reference's source (:func:`kir.spec.bound.validation_fingerprint`) and every
    rule's source (:meth:`kir.driver.registry.Registry.fingerprint`)."""
    from kir.spec.bound import validation_fingerprint as spec_fingerprint

    return f"{spec_fingerprint(loaded.spec)}-{registry.fingerprint()}"


def output_paths(args: argparse.Namespace, loaded: Loaded) -> dict[str, Path]:
    """Where each file goes: ``kir-out/<stem>/`` unless ``--out-dir``; ``-o`` names the module,
    ``--report`` the report folder. Checked (and the folders made) before any work, so a
    search never ends with nowhere to write its result."""
    stem = loaded.path.name.split(".")[0]
    out_dir = Path(args.out_dir) if args.out_dir else Path("kir-out") / stem
    module = Path(args.output) if args.output else out_dir / f"{stem}_kir.py"
    if module.suffix != ".py":
        raise KirError(f"-o {args.output}: with --search the output is the MLX module (.py)",
                       hint="write -o NAME.py; the trace, IR and report go to --out-dir")
    report = Path(args.report) if args.report else out_dir
    for folder, option in ((out_dir, "--out-dir"), (report, "--report")):
        make_folder(folder, option)
    if args.output and not module.parent.is_dir():
        raise KirError(f"-o {args.output}: folder {module.parent} does not exist",
                       hint="create it first, or write the module elsewhere")
    return {"dir": out_dir, "module": module, "trace": out_dir / "best.trace.json",
            "ir": out_dir / "best.kir", "report": report}


def make_folder(folder: Path, option: str) -> None:
    """Create ``folder`` (and its parents) or say plainly why it cannot be written to."""
    if folder.exists() and not folder.is_dir():
        raise KirError(f"{option} {folder}: this is a file, not a folder",
                       hint=f"name a folder for {option}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KirError(f"{option} {folder}: cannot create it ({exc.strerror})") from None
    if not os.access(folder, os.W_OK):
        raise KirError(f"{option} {folder}: the folder is not writable")


def sizes_label(sizes: Mapping[str, int]) -> str:
    """``rows=8, cols=64``."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def time_unit(evaluator) -> str:
    """What every time of this search is: measured or modelled, and at which sizes (the cost
    model counts at the check sizes, a GPU times at the compiled ones)."""
    sizes = getattr(evaluator, "time_sizes", None)
    where = f" at {sizes_label(sizes)}" if sizes else ""
    return f" (modelled{where})" if evaluator.modelled else (f" (measured{where})" if where
                                                            else "")


def run_search(args: argparse.Namespace, loaded: Loaded) -> int:
    """Search, write the winner's module, trace, IR and report, and say where they went.
    Exit 0, or 1 when the unrewritten kernel fails its own check (nothing written) or the
    module cannot be written, or 130 after Ctrl-C (the best so far written)."""
    from kir.backends import TARGETS, target_for
    from kir.commands.progress import UNBOUNDED, ProgressBar
    from kir.driver.registry import load_registry
    from kir.ir.verify import verify
    from kir.search import SearchConfig, TuningDB, default_db_path, search
    from kir.search.engine import default_key
    from kir.search.hints import hints

    if loaded.bound is None:
        raise KirError(f"{loaded.path} has no spec: the search needs one to make inputs",
                       hint="write a .kir.toml beside the kernel (see examples/) or pass --spec")
    budget = args.budget
    if budget is not None and budget < 1:
        raise KirError(f"--budget {budget}: the search needs at least one evaluation",
                       hint="leave --budget out for the default (40), or give --time")
    cluster = getattr(args, "cluster", None)
    if getattr(args, "device_resource", None) and not cluster:
        raise KirError("--device-resource names the device workers of a cluster",
                       hint="add --cluster ray[:ADDRESS], or leave --device-resource out")
    if cluster:
        from kir.cluster import parse_cluster, require_ray

        parse_cluster(cluster)  # a bad value or a missing Ray fails before any work
        require_ray()
        target = args.target or "auto"  # what the device workers have, unless named
    else:
        target, note = resolve_target(args.target)
        if note:
            print(note, file=sys.stderr)
    paths = output_paths(args, loaded)
    module_target = "cuda" if target == "cuda" else "metal"
    base = loaded.kernel
    # Before any budget is spent: the unrewritten kernel must fit the target and be emittable.
    verify(base, TARGETS[module_target])
    emit_or_explain(base, loaded, module_target)
    registry = load_registry(args.rules)
    check_sizes, source = check_sizes_for(args, loaded)
    if check_sizes:
        where = "validated and modelled" if target == "model" else "validated on the interpreter"
        print(f"candidates are {where} at {sizes_label(check_sizes)} ({source})",
              file=sys.stderr)
    evaluator = make_evaluator(loaded, target, check_sizes, cluster,
                               getattr(args, "device_resource", None))
    if cluster:  # the device workers said what they time
        target = "model" if evaluator.modelled else evaluator.target
        if module_target != ("cuda" if target == "cuda" else "metal"):
            module_target = "cuda"  # a CUDA fleet: its limits and emitter
            verify(base, TARGETS[module_target])
            emit_or_explain(base, loaded, module_target)
        print(f"judging candidates on the cluster: device {evaluator.descriptor}",
              file=sys.stderr)
        for line in getattr(evaluator.executor, "notes", ()):
            print(line, file=sys.stderr)
    ctx = context_for(loaded, target_for(target))
    limit = parse_duration(args.time) if args.time else None
    # A time limit alone should run until the time is up, not stop at the default budget.
    budget = budget or (UNBOUNDED if limit else DEFAULT_BUDGET)
    config = SearchConfig(strategy=args.strategy, budget=budget, time_limit_s=limit,
                          seed=args.seed)
    seeds = hints(base, registry, ctx)
    db_path = Path(args.db) if args.db else default_db_path()
    unit = time_unit(evaluator)
    bar = ProgressBar(modelled=bool(evaluator.modelled), time_limit_s=limit)
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
        if result.stopped == "baseline_failed":
            return baseline_failed(result, loaded)
        result = adopt_stored_best(result, db, key, base, registry, ctx)
        rows = []
        if result.best_ms and result.stopped != "interrupted":
            result, rows = ablate_and_adopt(result, base, registry, ctx, evaluator, db, key)
    replay = apply_trace(base, result.best_steps, registry, ctx)
    settings = {"strategy": config.strategy, "seed": config.seed, "hints": ", ".join(
        h.name for h in seeds) or "none", "tuning database": str(db_path)}
    return write_results(args, loaded, result, rows, replay.kernels, paths, module_target,
                         unit, getattr(evaluator, "time_sizes", None), settings)


def adopt(result, base, steps, time_ms: float, registry, ctx, why: str):
    """``result`` with the kernel ``steps`` make from ``base`` as its best (at ``time_ms``),
    saying ``why`` on stderr."""
    replay = apply_trace(base, steps, registry, ctx)
    print(f"{why} ({time_ms:.4g} ms against {result.best_ms:.4g} ms): that kernel is the "
          "result", file=sys.stderr)
    return dataclasses.replace(result, best_steps=tuple(replay.applied),
                               best_kernel=replay.kernel, best_ms=time_ms)


def adopt_stored_best(result, db, key, base, registry, ctx):
    """When the tuning database holds a faster valid kernel under ``key`` than this search
    found (an earlier, longer search), that kernel is the result: the written kernel is
    always the fastest one known. Its steps must still replay to the same kernel."""
    from kir.rules import parse_step

    found = db.best(key)
    if not found or result.best_ms is None or found[1] >= result.best_ms:
        return result
    try:
        steps = [parse_step(text, registry) for text in found[0]]
        replayed = apply_trace(base, steps, registry, ctx).kernel
    except KirError:
        return result  # a rule renamed or removed since: the stored row cannot be rebuilt
    known = db.lookup(key, replayed.fingerprint())
    if known is None or not known.ok or known.time_ms != found[1]:
        return result  # the rules changed what those steps build
    return adopt(result, base, steps, found[1], registry, ctx,
                 "the tuning database holds a faster kernel from an earlier search")


def baseline_failed(result, loaded: Loaded) -> int:
    """The unrewritten kernel failed its own check: say so, write nothing, exit 1."""
    verdict = result.history[0] if result.history else None
    reason = f"{verdict.status}: {verdict.error}" if verdict else "not evaluated"
    print(f"the unrewritten kernel fails its own check ({reason})\n"
          f"  nothing was searched or written: fix the kernel or its spec "
          f"({loaded.spec.path.name}), then check with `kir compile {loaded.path}`",
          file=sys.stderr)
    return 1


def ablate_and_adopt(result, base, registry, ctx, evaluator, db, key):
    """The transfer table of the winning trace; when a kernel in it (the winner without one
    step) is faster than the winner, that kernel becomes the result, so the written kernel
    is always the fastest one measured (up to three rounds)."""
    from kir.report import ablate

    for _ in range(3):
        rows = ablate(base, result.best_steps, result.best_ms, registry, ctx, evaluator, db,
                      key)
        faster = [r for r in rows if r.time_without_ms is not None
                  and r.time_without_ms < result.best_ms]
        if not faster:
            return result, rows
        winner = min(faster, key=lambda r: r.time_without_ms)
        rest = [s for s in result.best_steps if str(s) != winner.step]
        result = adopt(result, base, rest, winner.time_without_ms, registry, ctx,
                       f"the winner without {winner.step} is faster")
    return result, ablate(base, result.best_steps, result.best_ms, registry, ctx, evaluator,
                          db, key)


def write_results(args, loaded: Loaded, result, rows, step_kernels, paths: dict[str, Path],
                  module_target: str, unit: str, time_sizes: Mapping[str, int] | None,
                  settings: dict) -> int:
    """Write trace, IR, module and report for ``result`` and print where they went.
    ``step_kernels`` are the kernels after each winning step (the report's diffs)."""
    from kir.report import write_report

    base = loaded.kernel
    save_trace(result.best_steps, paths["trace"], kernel=base, extra={
        "target": result.target, "device": result.device, "time_ms": result.best_ms,
        "baseline_ms": result.baseline_ms, "modelled": result.modelled,
        "sizes": dict(loaded.bound.sizes), "time_sizes": dict(time_sizes or {}),
        "stopped": result.stopped})
    paths["ir"].write_text(print_kernel(result.best_kernel))
    module_error = write_kernel_module(result.best_kernel, loaded, module_target,
                                       paths["module"])
    files = write_report(paths["report"], result=result, base=base,
                         step_kernels=step_kernels, ablation=rows,
                         title=f"{base.name} ({loaded.path.name})", settings=settings,
                         unit=unit)
    if result.stopped == "interrupted":
        print(f"interrupted after {len(result.history)} evaluations: the best so far is "
              "written below", file=sys.stderr)
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
    print(f"  trace:  {paths['trace']}  (replay: {replay_command(args, loaded, paths)})")
    print(f"  IR:     {paths['ir']}")
    print(f"  report: {files['report']}  (+ {files['plot'].name})")
    print(f"  tuning database: {settings['tuning database']}")
    if result.stopped == "interrupted":
        return 130
    return 1 if module_error else 0
def replay_command(args: argparse.Namespace, loaded: Loaded, paths: dict[str, Path]) -> str:
    """The ``kir apply`` command that replays the written trace, with everything the search
    was given that the replay needs (kernel, spec, sizes, user rules)."""
    words = ["kir", "apply", str(loaded.path)]
    if args.kernel:
        words += ["--kernel", args.kernel]
    if args.spec:
        words += ["--spec", str(args.spec)]
    for size in args.size or []:
        words += ["--size", size]
    for rules in args.rules or []:
        words += ["--rules", str(rules)]
    words += ["--trace", str(paths["trace"])]
    return " ".join(shlex.quote(w) for w in words)


def emit_or_explain(kernel, loaded: Loaded, target: str) -> None:
    """Raise a KirError when the target's emitter refuses the unrewritten kernel: a search
    would spend its budget on candidates that can never be written out."""
    from kir.backends import emit

    try:
        emit(kernel, loaded.bound, target)
    except KirError as exc:
        raise KirError(f"the {target} emitter cannot write this kernel: {exc.message}",
                       exc.loc, source_line=exc.source_line,
                       hint=exc.hint or "no search was run") from None


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
