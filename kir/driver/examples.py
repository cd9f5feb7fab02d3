"""The example kernels installed with kir (package ``kir.examples``, the repository's
``examples/`` folder): where they are, and copying them somewhere a user can edit them."""

from __future__ import annotations

import shutil
from importlib.resources import files
from pathlib import Path

from kir.errors import KirError

SHIPPED = ("*.cu", "*.kir.toml", "refs.py", "traces/*.json")


def examples_dir() -> Path:
    """The folder of the installed examples (a checkout's ``examples/`` when kir is installed
    in editable mode)."""
    return Path(str(files("kir.examples")))


def example_files(folder: Path | None = None) -> list[Path]:
    """CUDA files in ``folder`` (default: the installed examples) that have a spec."""
    folder = folder or examples_dir()
    return sorted(p for p in folder.glob("*.cu") if p.with_suffix(".kir.toml").exists())


def copy_examples(target: Path) -> list[Path]:
    """Copy the example kernels, specs, references and traces into ``target`` (created);
    refuses to overwrite a file that is already there."""
    source = examples_dir()
    found = [p for pattern in SHIPPED for p in sorted(source.glob(pattern))]
    if not found:
        raise KirError(f"no examples found in {source}", hint="reinstall kir")
    clashes = [target / p.relative_to(source) for p in found
               if (target / p.relative_to(source)).exists()]
    if clashes:
        raise KirError(f"{clashes[0]} already exists: nothing was copied",
                       hint="choose another folder (kir examples DIR)")
    copied = []
    for path in found:
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
        copied.append(destination)
    return copied
