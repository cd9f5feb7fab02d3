"""How much of a folder of CUDA files the frontend lowers: every ``__global__`` function
(every instance of a macro-generated family), lowered with its spec where one names it, or
else with stand-in template arguments; each refusal with its location and message.

A spec goes with a kernel when it sits beside the source as ``X.kir.toml`` or
``X.<anything>.kir.toml`` (for a file ``X.cu`` with several kernels) and names it (its
``kernel`` key, or the file's only kernel). Used by ``benchmarks/frontend_coverage.py`` and
the corpus tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kir.errors import KirError, Loc

CUDA_SUFFIXES = (".cu", ".cuh")
#: Stand-ins for template arguments no spec gives: enough to see whether the kernel lowers.
STAND_IN_TYPE = "f32"
STAND_IN_VALUE = 32


@dataclass(frozen=True)
class Outcome:
    """One kernel of one file: lowered or refused (``error``), with the spec used (if any)
    and the template stand-ins assumed (``assumed``, e.g. ``T=f32, BLOCK=32``)."""

    path: Path
    kernel: str
    error: KirError | None
    spec: Path | None = None
    assumed: str = ""
    # The error lies inside another __global__ function of the file (it must never).
    misplaced: bool = False

    @property
    def lowered(self) -> bool:
        return self.error is None


def cuda_files(root: Path) -> list[Path]:
    """The CUDA sources under ``root`` (a folder, recursively, or one file)."""
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.suffix in CUDA_SUFFIXES and p.is_file())


def specs_for(path: Path) -> dict[str, Path]:
    """Kernel name -> spec file, for the specs beside ``path``."""
    from kir.frontends.cuda import list_kernels
    from kir.spec import load_spec

    found: dict[str, Path] = {}
    candidates = sorted(path.parent.glob(f"{path.stem}.kir.toml")) + \
        sorted(path.parent.glob(f"{path.stem}.*.kir.toml"))
    for spec_path in candidates:
        spec = load_spec(spec_path)
        name = spec.kernel
        if name is None:
            names = list_kernels(path.read_text(encoding="utf-8", errors="replace"), str(path))
            name = names[0] if len(names) == 1 else None
        if name is not None:
            found.setdefault(name, spec_path)
    return found


def lower_one(path: Path, kernel: str, spec: Path | None,
              include_dirs: Sequence[Path] = ()) -> Outcome:
    """Lower ``kernel`` of ``path``: with its spec (bound at the spec's sizes), or without
    one, with stand-ins for the template arguments."""
    from kir.driver.load import load_kernel
    from kir.frontends.cuda import instantiated_template_values, kernel_template, load_cuda

    text = path.read_text(encoding="utf-8", errors="replace")
    assumed = ""
    try:
        if spec is not None:
            load_kernel(path, spec_path=spec, kernel_name=kernel, include_dirs=include_dirs)
        else:
            values: dict[str, int | str] = {}
            given = instantiated_template_values(text, str(path), kernel, include_dirs)
            for t in kernel_template(text, str(path), kernel, include_dirs):
                if not t.has_default and t.name not in given:
                    values[t.name] = STAND_IN_TYPE if t.is_type else STAND_IN_VALUE
            assumed = ", ".join(f"{k}={v}" for k, v in values.items())
            load_cuda(text, str(path), kernel=kernel, template_values=values,
                      include_dirs=include_dirs)
        return Outcome(path, kernel, None, spec, assumed)
    except KirError as exc:
        return Outcome(path, kernel, exc, spec, assumed,
                       _inside_other_kernel(text, path, kernel, exc.loc, include_dirs))


def _inside_other_kernel(text: str, path: Path, kernel: str, loc: Loc | None,
                         include_dirs: Sequence[Path]) -> bool:
    """Whether ``loc`` falls inside another ``__global__`` function's text in ``path``."""
    from kir.frontends.cuda.preprocess import preprocess
    from kir.frontends.cuda.scan import scan_units

    if loc is None or loc.file != str(path):
        return False
    try:
        src = preprocess(text, str(path), include_dirs=include_dirs)
    except KirError:
        return False
    for unit in scan_units(src.text):
        if unit.kind != "global" or unit.name == kernel:
            continue
        first, last = src.loc(unit.start), src.loc(max(unit.end - 1, unit.start))
        if first.file == loc.file and (first.line, first.col) <= (loc.line, loc.col) \
                <= (last.line, last.col):
            return True
    return False


def survey(root: Path, include_dirs: Sequence[Path] = ()) -> list[Outcome]:
    """Lower every kernel of every CUDA file under ``root``."""
    from kir.frontends.cuda import list_kernels

    outcomes = []
    for path in cuda_files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            names = list_kernels(text, str(path), include_dirs)
            specs = specs_for(path)
        except KirError as exc:  # the file does not even preprocess
            outcomes.append(Outcome(path, "*", exc))
            continue
        for name in dict.fromkeys(names):
            outcomes.append(lower_one(path, name, specs.get(name), include_dirs))
    return outcomes


def reason(error: KirError) -> str:
    """A refusal's message without its names and numbers: what groups refusals by kind."""
    import re

    text = error.message.splitlines()[0]
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\b\d+\b", "N", text)
    return text
