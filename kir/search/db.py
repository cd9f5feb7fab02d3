"""The tuning database: every evaluation a search makes, kept so a search resumes and a
second run is instant.

SQLite in WAL mode, one transaction per evaluation, written as each evaluation completes, so a
search killed at any moment leaves every completed evaluation on disk and no half-written row.
Results are keyed by :class:`TuningKey` (base kernel fingerprint, sizes, target, device, kir
version, MLX version, operating system, and what validation depends on); under a key, one row
per candidate fingerprint. :meth:`TuningDB.merge` combines databases filled on other machines.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from kir.errors import KirError
from kir.search.evaluator import Evaluation

SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS keys (
    id INTEGER PRIMARY KEY,
    kernel_fp TEXT NOT NULL, sizes TEXT NOT NULL, target TEXT NOT NULL,
    device TEXT NOT NULL, version TEXT NOT NULL, kernel_name TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL, validation TEXT NOT NULL DEFAULT '',
    mlx TEXT NOT NULL DEFAULT '', os TEXT NOT NULL DEFAULT '',
    UNIQUE (kernel_fp, sizes, target, device, version, validation, mlx, os)
);
CREATE TABLE IF NOT EXISTS evaluations (
    key_id INTEGER NOT NULL REFERENCES keys(id),
    fingerprint TEXT NOT NULL, genome TEXT NOT NULL, status TEXT NOT NULL,
    time_ms REAL, error TEXT NOT NULL DEFAULT '', details TEXT NOT NULL DEFAULT '{}',
    timestamp REAL NOT NULL,
    PRIMARY KEY (key_id, fingerprint)
);
"""

EXPORT_FIELDS = ("kernel", "kernel_fp", "sizes", "target", "device", "version", "validation",
                 "mlx", "os", "fingerprint", "genome", "status", "time_ms", "error", "timestamp")

# Schema 1 keyed rows without what validation depends on; its rows stay listed (under an empty
# validation, which no search asks for) but never answer a search again.
_MIGRATE_1_TO_2 = """
CREATE TABLE keys_v2 (
    id INTEGER PRIMARY KEY,
    kernel_fp TEXT NOT NULL, sizes TEXT NOT NULL, target TEXT NOT NULL,
    device TEXT NOT NULL, version TEXT NOT NULL, kernel_name TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL, validation TEXT NOT NULL DEFAULT '',
    UNIQUE (kernel_fp, sizes, target, device, version, validation)
);
INSERT INTO keys_v2 (id, kernel_fp, sizes, target, device, version, kernel_name, created)
    SELECT id, kernel_fp, sizes, target, device, version, kernel_name, created FROM keys;
DROP TABLE keys;
ALTER TABLE keys_v2 RENAME TO keys
"""

# Schema 2 keyed rows without the MLX version and the operating system (issue 15). Its rows
# keep both empty: the cost model's keys (which depend on neither) go on answering, while a
# GPU search, whose key now names its MLX, misses rows measured under an unknown one.
_MIGRATE_2_TO_3 = """
CREATE TABLE keys_v3 (
    id INTEGER PRIMARY KEY,
    kernel_fp TEXT NOT NULL, sizes TEXT NOT NULL, target TEXT NOT NULL,
    device TEXT NOT NULL, version TEXT NOT NULL, kernel_name TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL, validation TEXT NOT NULL DEFAULT '',
    mlx TEXT NOT NULL DEFAULT '', os TEXT NOT NULL DEFAULT '',
    UNIQUE (kernel_fp, sizes, target, device, version, validation, mlx, os)
);
INSERT INTO keys_v3 (id, kernel_fp, sizes, target, device, version, kernel_name, created,
                     validation)
    SELECT id, kernel_fp, sizes, target, device, version, kernel_name, created, validation
    FROM keys;
DROP TABLE keys;
ALTER TABLE keys_v3 RENAME TO keys
"""

_MIGRATIONS = {1: _MIGRATE_1_TO_2, 2: _MIGRATE_2_TO_3}  # from schema N to N + 1


def kir_version() -> str:
    """The installed kir version (part of every key: a new kir may build other kernels)."""
    from kir.version import __version__

    return __version__


def default_db_path(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """Where the tuning database lives when ``--db`` is not given: ``$KIR_CACHE_DIR``, else
    the user cache dir (``~/Library/Caches/kir`` on macOS, ``$XDG_CACHE_HOME/kir`` or
    ``~/.cache/kir`` elsewhere), file ``tuning.db``."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if env.get("KIR_CACHE_DIR"):
        return Path(env["KIR_CACHE_DIR"]) / "tuning.db"
    home = Path(env.get("HOME") or Path.home())
    if platform == "darwin":
        return home / "Library" / "Caches" / "kir" / "tuning.db"
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
    return base / "kir" / "tuning.db"


def canonical_sizes(sizes: Mapping[str, int]) -> str:
    """Sizes as canonical JSON (sorted keys, no spaces), so equal sizes give equal keys."""
    return json.dumps({str(k): sizes[k] for k in sorted(sizes)}, separators=(",", ":"))


@dataclass(frozen=True)
class TuningKey:
    """What a measurement depends on besides the candidate itself.

    ``validation`` fingerprints what a verdict was judged by: the spec (tolerances, ragged
    and check sizes, input ranges, ``init``), the reference's source and the rules' sources
    (see ``kir.commands.compile_search.validation_fingerprint``). Without it a verdict given
    under a loose tolerance would answer a later search under a strict one.

    ``device``, ``mlx`` and ``os`` come from the :class:`kir.search.device.DeviceDescriptor`
    of the machine that measured (``mlx`` and ``os`` are empty for the cost model)."""

    kernel_fp: str
    sizes: str  # canonical JSON, see canonical_sizes
    target: str
    device: str
    version: str
    kernel_name: str = ""  # for listings only; not part of the identity
    validation: str = ""
    mlx: str = ""
    os: str = ""

    @classmethod
    def make(cls, kernel_fp: str, sizes: Mapping[str, int], target: str, device: str,
             version: str | None = None, kernel_name: str = "",
             validation: str = "", mlx: str = "", os: str = "") -> "TuningKey":
        """A key from a fingerprint and raw sizes (the version defaults to this kir's)."""
        return cls(kernel_fp, canonical_sizes(sizes), target, device,
                   version or kir_version(), kernel_name, validation, mlx, os)

    @property
    def identity(self) -> tuple[str, ...]:
        return (self.kernel_fp, self.sizes, self.target, self.device, self.version,
                self.validation, self.mlx, self.os)


@dataclass(frozen=True)
class Row:
    """One stored evaluation."""

    fingerprint: str
    genome: tuple[str, ...]
    evaluation: Evaluation
    timestamp: float


@dataclass(frozen=True)
class KeyInfo:
    """One key in the database with a summary of its rows (``kir db list``)."""

    key: TuningKey
    count: int
    ok: int
    best_ms: float | None
    baseline_ms: float | None
    last: float


class TuningDB:
    """An open tuning database. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | Path, *, timeout_s: float = 10.0,
                 read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._key_ids: dict[tuple[str, ...], int] = {}
        self.damaged = 0  # rows found unreadable (they answer nothing; a search rewrites them)
        if read_only:
            self._conn = self._open_read_only(timeout_s)
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KirError(f"cannot create the folder for tuning database {self.path}: "
                           f"{exc.strerror}") from None
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, one per evaluation.
            self._conn = sqlite3.connect(str(self.path), timeout=timeout_s,
                                         isolation_level=None)
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        # Several processes opening a new database at once (a campaign's searches) race to
        # switch it to WAL, which SQLite answers with "database is locked" at once instead of
        # waiting for the busy timeout: try again until the timeout is spent.
        deadline = time.monotonic() + timeout_s
        pause = 0.02
        while True:
            try:
                self._open()
                break
            except sqlite3.OperationalError as exc:
                locked = "locked" in str(exc) or "busy" in str(exc)
                if not locked or time.monotonic() + pause > deadline:
                    self._conn.close()
                    raise self._error(exc) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
            except sqlite3.Error as exc:
                self._conn.close()
                raise self._error(exc) from None

    # -------------------------------------------------------------------------- plumbing

    def _open_read_only(self, timeout_s: float) -> sqlite3.Connection:
        """A connection that never writes (``kir db`` on a database it may not write: a
        read-only folder or file system). SQLite's read-only mode still needs the WAL
        index beside the file; where even that cannot be made, the file is read as
        immutable (no other process may be writing it then, which a read-only medium
        ensures)."""
        if not self.path.is_file():
            raise KirError(f"no tuning database at {self.path}")
        uri = self.path.resolve().as_uri()
        last: Exception | None = None
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                conn = sqlite3.connect(uri + query, uri=True, timeout=timeout_s,
                                       isolation_level=None)
                self._check_schema(conn)
                return conn
            except sqlite3.Error as exc:
                last = exc
        raise self._error(last)  # type: ignore[arg-type]

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" not in tables:
            raise KirError(f"{self.path} is not a kir tuning database",
                           hint="pass --db to choose another file")
        row = conn.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
        if row is None or not str(row[0]).isdigit() or int(row[0]) > SCHEMA_VERSION:
            raise KirError(f"tuning database {self.path} has schema "
                           f"{row[0] if row else 'none'}, which this kir does not read "
                           f"({SCHEMA_VERSION})",
                           hint="upgrade kir, or pass --db to use another file")

    def _error(self, exc: Exception) -> KirError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            hint = "another kir process holds it; wait for it, or pass --db to use another file"
        elif "not a database" in text or "malformed" in text or "corrupt" in text:
            hint = "the file is damaged: move it away (kir recreates it) or pass --db"
        else:
            hint = "pass --db to use another file"
        return KirError(f"tuning database {self.path}: {text}", hint=hint)

    def _open(self) -> None:
        conn = self._conn
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise KirError(f"tuning database {self.path}: cannot switch to WAL mode "
                           f"(journal mode is {mode})",
                           hint="put the database on a local file system, or pass --db")
        # NORMAL is durable against a killed process in WAL mode (only power loss can lose the
        # last commits), and much faster than FULL for one small transaction per evaluation.
        conn.execute("PRAGMA synchronous=NORMAL")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise KirError(f"{self.path} is an SQLite file but not a kir tuning database",
                           hint="pass --db to choose another file")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise KirError(f"tuning database {self.path} has schema {row[0]}, newer than "
                               f"this kir understands ({SCHEMA_VERSION})",
                               hint="upgrade kir, or pass --db to use another file")
            elif int(row[0]) < SCHEMA_VERSION:
                for version in range(int(row[0]), SCHEMA_VERSION):
                    for statement in filter(None, (s.strip()
                                                   for s in _MIGRATIONS[version].split(";"))):
                        conn.execute(statement)
                conn.execute("UPDATE meta SET value=? WHERE name='schema'", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection (rows are already committed)."""
        self._conn.close()

    def __enter__(self) -> "TuningDB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def journal_mode(self) -> str:
        return str(self._query("PRAGMA journal_mode")[0][0])

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        try:
            return self._conn.execute(sql, tuple(args)).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _key_id(self, key: TuningKey, create: bool) -> int | None:
        cached = self._key_ids.get(key.identity)
        if cached is not None:
            return cached
        rows = self._query("SELECT id FROM keys WHERE kernel_fp=? AND sizes=? AND target=? "
                           "AND device=? AND version=? AND validation=? AND mlx=? AND os=?",
                           key.identity)
        if rows:
            self._key_ids[key.identity] = rows[0][0]
            return rows[0][0]
        if not create:
            return None
        self._query("INSERT OR IGNORE INTO keys (kernel_fp, sizes, target, device, version, "
                    "validation, mlx, os, kernel_name, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*key.identity, key.kernel_name, time.time()))
        return self._key_id(key, create=False)

    # ------------------------------------------------------------------------------- API

    def lookup(self, key: TuningKey, fingerprint: str) -> Evaluation | None:
        """The stored evaluation of candidate ``fingerprint`` under ``key``, if any."""
        found = self.row(key, fingerprint)  # a damaged row answers nothing: judged again
        return found.evaluation if found is not None else None

    def record(self, key: TuningKey, fingerprint: str, genome: Sequence[str],
               evaluation: Evaluation, timestamp: float | None = None) -> None:
        """Store one evaluation, committed before returning (its own transaction);
        ``timestamp`` keeps a merged row's own time (default: now)."""
        details = json.dumps(dict(evaluation.details), sort_keys=True, default=str)
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                key_id = self._key_id(key, create=True)
                self._conn.execute(
                    "INSERT OR REPLACE INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (key_id, fingerprint, json.dumps(list(genome)), evaluation.status,
                     evaluation.time_ms, evaluation.error, details,
                     time.time() if timestamp is None else timestamp))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                self._key_ids.pop(key.identity, None)  # the key row may have rolled back
                raise
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def row(self, key: TuningKey, fingerprint: str) -> Row | None:
        """The stored row of candidate ``fingerprint`` under ``key`` (genome, time stamp)."""
        key_id = self._key_id(key, create=False)
        if key_id is None:
            return None
        rows = self._query("SELECT genome, status, time_ms, error, details, timestamp FROM "
                           "evaluations WHERE key_id=? AND fingerprint=?", (key_id, fingerprint))
        if not rows:
            return None
        text, status, time_ms, error, details, stamp = rows[0]
        genome, evaluation = _genome(text), _evaluation(status, time_ms, error, details)
        if genome is None or evaluation is None or not isinstance(stamp, (int, float)):
            self.damaged += 1  # a damaged row is as good as none: a merge replaces it
            return None
        return Row(fingerprint, tuple(genome), evaluation, float(stamp))

    def best(self, key: TuningKey) -> tuple[tuple[str, ...], float] | None:
        """The fastest valid candidate's genome (step strings) and time, if any."""
        key_id = self._key_id(key, create=False)
        if key_id is None:
            return None
        rows = self._query("SELECT genome, time_ms FROM evaluations WHERE key_id=? AND "
                           "status='ok' AND typeof(time_ms) IN ('real', 'integer') "
                           "ORDER BY time_ms, length(genome), genome", (key_id,))
        for genome_text, time_ms in rows:
            genome = _genome(genome_text)
            if genome is not None:
                return tuple(genome), float(time_ms)
            self.damaged += 1
        return None

    def rows(self, key: TuningKey) -> list[Row]:
        """Every stored evaluation under ``key``, oldest first."""
        key_id = self._key_id(key, create=False)
        if key_id is None:
            return []
        rows = self._query("SELECT fingerprint, genome, status, time_ms, error, details, "
                           "timestamp FROM evaluations WHERE key_id=? ORDER BY timestamp, "
                           "rowid", (key_id,))
        out = []
        for fp, genome_text, status, time_ms, error, details, stamp in rows:
            genome = _genome(genome_text)
            evaluation = _evaluation(status, time_ms, error, details)
            if genome is None or evaluation is None or not isinstance(stamp, (int, float)):
                self.damaged += 1  # listed nowhere; ``kir db show`` says how many
                continue
            out.append(Row(str(fp), tuple(genome), evaluation, float(stamp)))
        return out

    def runs(self) -> list[KeyInfo]:
        """Every key with its row count, valid count, best and baseline times."""
        rows = self._query(
            "SELECT k.kernel_fp, k.sizes, k.target, k.device, k.version, k.kernel_name, "
            "k.validation, k.mlx, k.os, count(e.fingerprint), sum(e.status='ok'), "
            "min(CASE WHEN e.status='ok' "
            "THEN e.time_ms END), max(CASE WHEN e.genome='[]' AND e.status='ok' "
            "THEN e.time_ms END), coalesce(max(e.timestamp), k.created) "
            "FROM keys k LEFT JOIN evaluations e ON e.key_id = k.id "
            "GROUP BY k.id ORDER BY k.created, k.id")
        return [KeyInfo(TuningKey(*("" if v is None else str(v) for v in r[:9])),
                        int(r[9] or 0), int(r[10] or 0), _number(r[11]), _number(r[12]),
                        _number(r[13]) or 0.0)
                for r in rows]

    def export(self, fmt: str = "json", key: TuningKey | None = None) -> str:
        """All rows (or those of ``key``) as JSON (a list of objects) or CSV text."""
        infos = [i for i in self.runs() if key is None or i.key.identity == key.identity]
        records: list[dict[str, Any]] = []
        for info in infos:
            k = info.key
            for row in self.rows(k):
                ev = row.evaluation
                records.append(dict(zip(EXPORT_FIELDS, (
                    k.kernel_name, k.kernel_fp, k.sizes, k.target, k.device, k.version,
                    k.validation, k.mlx, k.os, row.fingerprint, " ".join(row.genome),
                    ev.status, ev.time_ms, ev.error, row.timestamp))))
        if fmt == "json":
            return json.dumps(records, indent=2) + "\n"
        if fmt == "csv":
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(records)
            return out.getvalue()
        raise KirError(f"unknown export format {fmt!r}", hint="use json or csv")

    def integrity_ok(self) -> bool:
        """SQLite's own consistency check of the whole file."""
        return self._query("PRAGMA integrity_check")[0][0] == "ok"


def _number(value: object) -> float | None:
    """A stored number, or None for NULL or a value damage left in a REAL column."""
    return float(value) if isinstance(value, (int, float)) else None


def _genome(text: object) -> list[str] | None:
    """A stored genome (a JSON list of step strings), or None when the row is damaged."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def _evaluation(status: object, time_ms: object, error: object,
                details: object) -> Evaluation | None:
    """A stored evaluation, or None when the row is damaged (a status kir does not know, a
    time that is not a number, details that are not a JSON object, ...)."""
    try:
        extra = json.loads(details) if isinstance(details, str) and details else {}
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(extra, dict) or not isinstance(error, (str, type(None))) \
            or not (time_ms is None or isinstance(time_ms, (int, float))):
        return None
    try:
        return Evaluation(str(status), None if time_ms is None else float(time_ms),
                          error or "", extra)
    except KirError:
        return None
