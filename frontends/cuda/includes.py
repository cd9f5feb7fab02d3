"""``#include "file"``: finding a user's header and reading it for the preprocessor.

Quoted includes are looked up as a C compiler does for ``-I``: the including file's own
folder first, then the include directories given (``-I DIR`` on the command line, the spec's
``include`` list). Angle-bracket includes (``<cuda_runtime.h>``, ``<torch/extension.h>``,
``<cub/cub.cuh>``) name system and library headers: the frontend never reads them — kir knows
CUDA's builtins itself, and host libraries are host code. A quoted header that is not found
is skipped as well: the kernel then fails where it uses a name the header would have
defined, with that name's location.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MAX_INCLUDE_DEPTH = 32


@dataclass
class IncludeState:
    """What the preprocessing of one file and its headers shares: the macro table, the
    directories searched, headers marked ``#pragma once`` already read, the headers being
    read (an include cycle without guards stops there) and the nesting depth."""

    macros: dict
    include_dirs: tuple[Path, ...] = ()
    once: set[Path] = field(default_factory=set)
    active: list[Path] = field(default_factory=list)


def header_name(directive_rest: str) -> tuple[str, bool] | None:
    """(name, quoted) from the text after ``#include``, or None for a computed include."""
    text = directive_rest.strip()
    if text.startswith('"'):
        end = text.find('"', 1)
        return (text[1:end], True) if end > 1 else None
    if text.startswith("<"):
        end = text.find(">", 1)
        return (text[1:end], False) if end > 1 else None
    return None


def find_header(name: str, including_file: str, state: IncludeState) -> Path | None:
    """The file a quoted ``#include "name"`` in ``including_file`` reads, or None."""
    folders = [Path(including_file).parent, *state.include_dirs]
    for folder in folders:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def should_read(path: Path, state: IncludeState) -> bool:
    """False for a ``#pragma once`` header already read, and for a header that includes
    itself (directly or not) without a guard."""
    key = path.resolve()
    return key not in state.once and key not in state.active
