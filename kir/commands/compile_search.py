"""``kir compile FILE --search``: find the fastest valid rewrite, write it out with its trace,
IR and report.

The search is :class:`kir.api.searching.SearchSession` (the Python API runs the same one):
it picks the evaluator (MLX Metal, MLX CUDA, or the Apple-GPU cost model when no GPU is
here), checks what can be checked before the budget is spent and searches with hints and the
tuning database. This module adds what a command line needs: options, the progress bar, the
files under ``kir-out/<stem>/<kernel>/`` and the lines saying where they went.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from kir.driver.load import Loaded
from kir.errors import KirError

# The search itself lives in kir.api.searching (shared with the Python API); these names
# stay importable from here.
from kir.api.searching import (  # noqa: E402,F401
    DEFAULT_BUDGET,
    MODEL_NOTE,
    MODEL_PROFILE,
    ablate_and_adopt,
    adopt,
    adopt_stored_best,
    emit_or_explain,
    make_evaluator,
    parse_duration,
    resolve_target,
    sizes_label,
    time_unit,
    validation_fingerprint,
)
from kir.api.results import make_folder  # noqa: E402,F401


def check_sizes_for(args: argparse.Namespace, loaded: Loaded) -> dict[str, int] | None:
    """``--check-size`` (None without it: the search session takes the spec's ``check``
    table, else sizes derived from its defaults; see :class:`kir.api.SearchSession`)."""
    from kir.driver.load import parse_size_overrides

    return parse_size_overrides(getattr(args, "check_size", None),
                                option="--check-size") or None


def output_paths(args: argparse.Namespace, loaded: Loaded) -> dict[str, Path]:
    """Where each file goes (:func:`kir.api.results.output_paths`): ``--out-dir`` (default
    ``kir-out/<stem>/<kernel>/``), ``-o`` the module, ``--report`` the report folder."""
    from kir.api.results import output_paths as paths_for

    paths = paths_for(loaded, args.out_dir, args.output, args.report)
    note_unimportable(paths["module"])
    return paths


def note_unimportable(module: Path) -> None:
    """Say so when ``-o`` names a module ``import`` cannot load by name (spaces, ...)."""
    from kir.api.results import module_name

    if module.suffix == ".py" and not module.stem.isidentifier():
        print(f"note: {module.name} is not an importable module name (write -o "
              f"{module_name(module.stem)}.py to `import {module_name(module.stem)}`); "
              "importlib can still load it from its path", file=sys.stderr)


def run_search(args: argparse.Namespace, loaded: Loaded) -> int:
    """Search, write the winner's module, trace, IR and report, and say where they went.
    Exit 0, or 1 when the unrewritten kernel fails its own check (nothing written) or the
    module cannot be written, or 130 after Ctrl-C (the best so far written)."""
    from kir.api.searching import SearchRequest, SearchSession
    from kir.commands.progress import ProgressBar
    from kir.search.phases import time_line, verdict_line

    if args.no_db and args.db:
        raise KirError("--db and --no-db together", hint="give one of them")
    request = SearchRequest(args.target, args.budget, args.time, args.strategy, args.seed,
                            check_sizes_for(args, loaded),
                            False if args.no_db else (args.db or None), tuple(args.rules),
                            getattr(args, "cluster", None),
                            getattr(args, "device_resource", None))
    if request.budget is not None and request.budget < 1:
        raise KirError(f"--budget {request.budget}: the search needs at least one evaluation",
                       hint="leave --budget out for the default (40), or give --time")
    paths = output_paths(args, loaded)
    session = SearchSession(loaded, request, note=lambda line: print(line, file=sys.stderr))
    bar = ProgressBar(modelled=session.modelled, time_limit_s=session.limit)
    try:
        searched = session.run(progress=bar)
    finally:
        bar.close()
    print(time_line(searched.result.phases, searched.result.wall_s), file=sys.stderr)
    verdicts = verdict_line(searched.result.history,
                            searched.result.best_kernel.fingerprint())
    if verdicts:
        print(verdicts, file=sys.stderr)
    if searched.baseline_failed:
        return baseline_failed(searched.result, loaded)
    return write_results(args, searched, paths)


def baseline_failed(result, loaded: Loaded) -> int:
    """The unrewritten kernel failed its own check: say so, write nothing, exit 1."""
    verdict = result.history[0] if result.history else None
    reason = f"{verdict.status}: {verdict.error}" if verdict else "not evaluated"
    print(f"the unrewritten kernel fails its own check ({reason})\n"
          f"  nothing was searched or written: fix the kernel or its spec "
          f"({loaded.spec.path.name}), then check with `kir compile {loaded.path}`",
          file=sys.stderr)
    return 1


def write_results(args, searched, paths: dict[str, Path]) -> int:
    """Write trace, IR, module and report (:func:`kir.api.results.write_outputs`) and print
    where they went."""
    from kir.api.results import write_outputs

    loaded, result, unit = searched.loaded, searched.result, searched.unit
    written = write_outputs(searched, paths)
    module_error, files = written.module_error, written.files
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
        if searched.speedup_over_mlx:
            print(f"  x{searched.speedup_over_mlx:.3g} over the MLX reference "
                  f"({searched.mlx_reference_ms:.4g} ms, {loaded.spec.reference_mlx})")
    kind = "CUDA" if searched.module_target == "cuda" else "Metal"
    print(f"  kernel ({kind} MLX module): "
          + (f"not written: {module_error}" if module_error else str(paths["module"])))
    print(f"  trace:  {paths['trace']}  (replay: {replay_command(args, loaded, paths)})")
    print(f"  IR:     {paths['ir']}")
    print(f"  report: {files['report']}  (+ {files['plot'].name})")
    print(f"  tuning database: {searched.settings['tuning database']}")
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
    for folder in getattr(args, "include", None) or []:
        words += ["-I", str(folder)]
    for size in args.size or []:
        words += ["--size", size]
    for rules in args.rules or []:
        words += ["--rules", str(rules)]
    words += ["--trace", str(paths["trace"])]
    return " ".join(shlex.quote(w) for w in words)
