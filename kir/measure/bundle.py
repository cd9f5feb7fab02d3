"""A spec as content: its TOML text and its reference module's source, addressed by hash.

A job sent to another machine cannot name the coordinator's files. :class:`SpecBundle` carries
what validation reads from disk — the spec's text and the source of the reference module
beside it — and :meth:`SpecBundle.materialize` writes them into a private folder named by
their hash on the worker, where :func:`kir.spec.load_spec` reads them as usual (the same code,
the same error messages). Writing is atomic (a temporary name, then a rename), so workers of
one host sharing the folder never read a half-written file.

The reference module runs on every worker that loads the bundle: workers must trust whoever
sends them jobs (docs/SCALE_OUT.md).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kir.spec import Spec
from kir.spec.bound import reference_file


@dataclass(frozen=True)
class SpecBundle:
    """A spec's text and its reference module's source. ``spec_name`` and
    ``reference_name`` are file names relative to the spec's folder (labels in messages)."""

    spec_name: str
    spec_text: str
    reference_name: str = ""  # "" when the spec has no reference
    reference_source: str = ""

    @classmethod
    def of(cls, spec: Spec) -> "SpecBundle":
        """The bundle of a loaded spec (its reference module read now)."""
        file = reference_file(spec)
        if file is None:
            return cls(spec.path.name, spec.text)
        relative = file.relative_to(spec.path.resolve().parent).as_posix()
        try:
            source = file.read_text(encoding="utf-8")
        except OSError:
            source = ""  # a missing module fails on the worker with the spec's own message
            relative = ""
        return cls(spec.path.name, spec.text, relative, source)

    @property
    def digest(self) -> str:
        """A hash of the whole bundle (names included): the folder it is written to."""
        digest = hashlib.sha256()
        for part in (self.spec_name, self.spec_text, self.reference_name,
                     self.reference_source):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()[:24]

    def materialize(self, root: str | Path | None = None) -> Path:
        """Write the bundle under ``root`` (default: a per-user folder in the temporary
        directory) unless it is there already; returns the spec's path."""
        base = Path(root or default_root())
        base.mkdir(parents=True, exist_ok=True, mode=0o700)  # the reference is code
        folder = base / self.digest
        spec_path = folder / self.spec_name
        files = {spec_path: self.spec_text}
        if self.reference_name:
            files[folder / self.reference_name] = self.reference_source
        for path, text in files.items():
            if not path.is_file():
                _write_atomic(path, text)
        return spec_path


def default_root() -> Path:
    """``$TMPDIR/kir-bundles-<uid>``: private to this user."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"kir-bundles-{uid}"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
