"""What a checked run records: one :class:`LaunchRecord` per kernel launch.

``kir check`` opens a :class:`CheckSession`, runs the user's wrapper with every
``mx.fast.metal_kernel`` built in checked mode, and reads the launches back: the checked
build's findings, the output elements no thread wrote, the threadgroup memory each kernel
declared, and the Python line that launched it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kir.backends.emulate.checked import Finding
from kir.errors import Loc, source_line_of

_KIR_ROOT = Path(__file__).resolve().parents[1]
_BACKENDS_ROOT = Path(__file__).resolve().parents[2] / "backends"


@dataclass
class LaunchRecord:
    """One launch of an emulated kernel in checked mode."""

    kernel: str
    body_file: str  # the name findings use for the kernel's source
    source: str
    call_site: Loc | None
    call_line: str | None
    grid: tuple[int, ...]
    threadgroup: tuple[int, ...]
    output_names: list[str]
    output_shapes: list[tuple[int, ...]]
    init_value: float | None
    findings: list[Finding] = field(default_factory=list)
    unwritten: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (count, first)
    threadgroup_memory: list[tuple[int, str, int]] = field(default_factory=list)
    error: Exception | None = None


@dataclass
class CheckSession:
    """The launches of a checked run, in order."""

    launches: list[LaunchRecord] = field(default_factory=list)


def _skipped_roots() -> tuple[Path, ...]:
    """Folders whose frames are not the user's: kir's and MLX's."""
    roots = [_KIR_ROOT, _BACKENDS_ROOT]
    mlx = sys.modules.get("mlx")
    for folder in getattr(mlx, "__path__", []):
        roots.append(Path(folder).resolve())
    return tuple(roots)


def caller_site() -> tuple[Loc | None, str | None]:
    """The first frame outside kir and MLX: the user's line that launched the kernel."""
    frame = sys._getframe(1)
    while frame is not None:
        path = Path(frame.f_code.co_filename).resolve()
        inside = any(path.is_relative_to(root) for root in _skipped_roots())
        if not inside:
            try:
                text = source_line_of(path.read_text(), frame.f_lineno)
            except OSError:
                text = None
            col = 1 + len(text) - len(text.lstrip()) if text else 1
            shown = os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)
            return Loc(shown, frame.f_lineno, col), text
        frame = frame.f_back
    return None, None


def record_launch(session: CheckSession, kernel: Any, *, grid: tuple[int, ...],
                  threadgroup: tuple[int, ...], output_shapes: list[tuple[int, ...]],
                  init_value: float | None) -> LaunchRecord:
    """A new record for a launch about to run (its results are filled in afterwards)."""
    site, line = caller_site()
    record = LaunchRecord(kernel.name, kernel.body_file, kernel.source, site, line, grid,
                          threadgroup, list(kernel.output_names), output_shapes, init_value)
    session.launches.append(record)
    return record
