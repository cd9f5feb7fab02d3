"""Combine tuning databases filled on different machines into one (``kir db merge``).

Independent searches (one per Mac, say) each fill their own database; the coordinator of a
campaign owns the one that answers later searches. Rows are matched by their key (kernel,
sizes, target, device, versions, validation) and candidate fingerprint:

* a row the target lacks is copied, with its own time stamp;
* the same verdict twice (same status, time and error) is a duplicate and is skipped;
* two different verdicts on one candidate are a *conflict*: both are reported, and the one
  kept is the target's (``prefer="existing"``, the default), the incoming one
  (``"incoming"``) or the newer one (``"newer"``). Two timings of one candidate on one device
  differ a little whenever both were measured; a different *status* (valid on one machine,
  invalid on another) points at a flaky kernel or a flaky machine.

The incoming file is read through a private snapshot (SQLite's backup API: a consistent copy
that includes its write-ahead log), so merging never writes to it, not even to migrate an older
schema.
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kir.errors import KirError
from kir.search.db import Row, TuningDB, TuningKey
from kir.search.evaluator import Evaluation

PREFERENCES = ("existing", "incoming", "newer")


@dataclass(frozen=True)
class Conflict:
    """Two different verdicts on one candidate under one key, and which one was kept."""

    key: TuningKey
    fingerprint: str
    genome: tuple[str, ...]
    existing: Evaluation
    incoming: Evaluation
    kept: str  # "existing" or "incoming"

    @property
    def kind(self) -> str:
        """"status" when the verdicts disagree on validity, else "time"."""
        return "status" if self.existing.status != self.incoming.status else "time"

    def describe(self) -> str:
        """One line for the command's report."""
        steps = " ".join(self.genome) or "(unrewritten)"
        return (f"{self.key.kernel_name or self.key.kernel_fp} on {self.key.device} "
                f"[{self.fingerprint}] {steps}: here {_verdict(self.existing)}, incoming "
                f"{_verdict(self.incoming)}; kept {self.kept}")


@dataclass
class MergeReport:
    """What a merge did, counted over every incoming row."""

    added: int = 0
    duplicates: int = 0
    keys: int = 0  # incoming keys looked at
    conflicts: list[Conflict] = field(default_factory=list)


def _verdict(evaluation: Evaluation) -> str:
    if evaluation.ok:
        return f"{evaluation.time_ms:.4g} ms"
    return f"{evaluation.status} ({evaluation.error[:50]})" if evaluation.error \
        else str(evaluation.status)


def _same(a: Evaluation, b: Evaluation) -> bool:
    return a.status == b.status and a.time_ms == b.time_ms and a.error == b.error


def merge_into(target: TuningDB, source: str | Path, prefer: str = "existing",
               report: MergeReport | None = None) -> MergeReport:
    """Copy every row of the database at ``source`` into ``target`` (see the module text);
    returns the counts and conflicts (added to ``report`` when given)."""
    if prefer not in PREFERENCES:
        raise KirError(f"unknown merge preference {prefer!r}",
                       hint=f"use one of {', '.join(PREFERENCES)}")
    report = report if report is not None else MergeReport()
    source = Path(source)
    if source.resolve() == target.path.resolve():
        raise KirError(f"{source} is the database being merged into",
                       hint="name another file, or pass --db for the target")
    with tempfile.TemporaryDirectory(prefix="kir-merge-") as folder:
        snapshot = Path(folder) / "incoming.db"
        _snapshot(source, snapshot)
        try:
            incoming = TuningDB(snapshot)
        except KirError as exc:  # it names the private copy: name the user's file
            raise KirError(exc.message.replace(str(snapshot), str(source)),
                           hint="name a kir tuning database") from None
        with incoming:
            for info in incoming.runs():
                report.keys += 1
                for row in incoming.rows(info.key):
                    _merge_row(target, info.key, row, prefer, report)
    return report


def _merge_row(target: TuningDB, key: TuningKey, row: Row, prefer: str,
               report: MergeReport) -> None:
    here = target.row(key, row.fingerprint)
    if here is None:
        target.record(key, row.fingerprint, row.genome, row.evaluation, row.timestamp)
        report.added += 1
        return
    if _same(here.evaluation, row.evaluation):
        report.duplicates += 1
        return
    take = prefer == "incoming" or (prefer == "newer" and row.timestamp > here.timestamp)
    if take:
        target.record(key, row.fingerprint, row.genome, row.evaluation, row.timestamp)
    report.conflicts.append(Conflict(key, row.fingerprint, row.genome, here.evaluation,
                                     row.evaluation, "incoming" if take else "existing"))


def _snapshot(source: Path, copy: Path) -> None:
    """A consistent private copy of the database at ``source`` (read-only access to it)."""
    if not source.is_file():
        raise KirError(f"no tuning database at {source}", hint="name an existing .db file")
    try:
        reader = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
        try:
            writer = sqlite3.connect(str(copy))
            try:
                reader.backup(writer)
            finally:
                writer.close()
        finally:
            reader.close()
    except sqlite3.Error as exc:
        raise KirError(f"cannot read tuning database {source}: {exc}",
                       hint="is it a kir tuning database? `kir db list --db FILE` checks") \
            from None
