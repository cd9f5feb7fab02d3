"""A finished search written out: the MLX module, the trace, the IR and the report.

``kir compile --search`` and :meth:`kir.api.SearchResult.save` both call
:func:`write_outputs`; :func:`output_paths` says where each file goes by default
(``kir-out/<file stem>/<kernel>/``, so two kernels of one file never overwrite each other).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from kir.api.modules import ModuleBuild, build_module, is_specialized
from kir.api.searching import Searched
from kir.backends.module import ModuleOptions
from kir.driver.load import Loaded, ir_header
from kir.errors import KirError
from kir.ir.printer import print_kernel
from kir.rules import apply_trace, save_trace


def default_out_dir(loaded: Loaded) -> Path:
    """``kir-out/<file stem>/<kernel>/``."""
    return Path("kir-out") / loaded.path.name.split(".")[0] / loaded.kernel.name


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


def module_name(stem: str) -> str:
    """A Python module name made from a file's stem (``my kernel`` → ``my_kernel``,
    ``núcleo`` → ``n_cleo``): the generated module must be importable by ``import NAME``."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "kernel"
    return f"k_{name}" if name[0].isdigit() else name


def output_paths(loaded: Loaded, out_dir: str | Path | None = None,
                 module: str | Path | None = None,
                 report: str | Path | None = None) -> dict[str, Path]:
    """Where each file goes: ``out_dir`` (default :func:`default_out_dir`) holds the trace,
    the IR and (unless ``module`` names it) the module ``<stem>_kir.py``; ``report`` the
    report. Checked (and the folders made) before any work, so a search never ends with
    nowhere to write its result."""
    stem = loaded.path.name.split(".")[0]
    folder = Path(out_dir) if out_dir else default_out_dir(loaded)
    module_path = Path(module) if module else folder / f"{module_name(stem)}_kir.py"
    if module_path.suffix != ".py":
        raise KirError(f"-o {module}: with --search the output is the MLX module (.py)",
                       hint="write -o NAME.py; the trace, IR and report go to --out-dir")
    report_dir = Path(report) if report else folder
    for path, option in ((folder, "--out-dir"), (report_dir, "--report")):
        make_folder(path, option)
    if module and not module_path.parent.is_dir():
        raise KirError(f"-o {module}: folder {module_path.parent} does not exist",
                       hint="create it first, or write the module elsewhere")
    return {"dir": folder, "module": module_path, "trace": folder / "best.trace.json",
            "ir": folder / "best.kir", "report": report_dir}


def general_kernel(searched: Searched):
    """A kernel valid at every size to stand behind a specialized winner: the fastest such
    candidate the tuning database holds for this search, else the unrewritten kernel."""
    from kir.rules import parse_step
    from kir.search import TuningDB

    base = searched.loaded.kernel
    if searched.db_path is None or searched.key is None or not searched.db_path.exists():
        return base
    with TuningDB(searched.db_path) as db:
        rows = sorted((r for r in db.rows(searched.key) if r.evaluation.ok
                       and "specialized" not in r.evaluation.details),
                      key=lambda r: r.evaluation.time_ms)
    for row in rows:
        try:
            steps = [parse_step(text, searched.registry) for text in row.genome]
            kernel = apply_trace(base, steps, searched.registry, searched.ctx).kernel
        except KirError:
            continue
        if not is_specialized(kernel, base):
            return kernel
    return base


def build_searched_module(searched: Searched, *, dtypes=None,
                          options: ModuleOptions = ModuleOptions(),
                          dispatch: bool = True) -> ModuleBuild:
    """The module of a search's winner (with the general kernel behind a specialized one,
    the database's winners for other chips and sizes when ``dispatch``, and the dtype
    variants of a ``typename T`` kernel)."""
    result = searched.result
    winner = result.best_kernel
    general = general_kernel(searched) if is_specialized(winner, searched.loaded.kernel) \
        else None
    device = None if result.modelled else result.device
    return build_module(searched.loaded, target=searched.module_target, kernel=winner,
                        steps=result.best_steps, registry=searched.registry, general=general,
                        device=device, time_ms=result.best_ms, dtypes=dtypes,
                        db_path=searched.db_path if dispatch else None, db_key=searched.key,
                        options=options)


@dataclass(frozen=True)
class Written:
    """What :func:`write_outputs` wrote (``module_error``: why the module was not)."""

    files: Mapping[str, Path]
    module_error: str | None


def write_outputs(searched: Searched, paths: Mapping[str, Path], *,
                  options: ModuleOptions = ModuleOptions()) -> Written:
    """Write the trace, IR, module and report of ``searched`` to ``paths``
    (:func:`output_paths`)."""
    from kir.report import write_report

    loaded, result = searched.loaded, searched.result
    base = loaded.kernel
    save_trace(result.best_steps, paths["trace"], kernel=base, extra={
        "target": result.target, "device": result.device, "time_ms": result.best_ms,
        "baseline_ms": result.baseline_ms, "modelled": result.modelled,
        "sizes": dict(loaded.bound.sizes), "time_sizes": dict(searched.time_sizes or {}),
        "stopped": result.stopped, "wall_s": round(result.wall_s, 3),
        "phases": result.phases.as_dict()})
    paths["ir"].write_text(ir_header(loaded) + print_kernel(result.best_kernel))
    module_error = None
    try:
        paths["module"].parent.mkdir(parents=True, exist_ok=True)
        build_searched_module(searched, options=options).write(paths["module"])
    except KirError as exc:
        module_error = exc.message
    files = write_report(paths["report"], result=result, base=base,
                         step_kernels=searched.step_kernels, ablation=searched.ablation,
                         title=f"{base.name} ({loaded.path.name})", settings=searched.settings,
                         unit=searched.unit)
    return Written({**paths, **files}, module_error)
