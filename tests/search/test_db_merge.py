"""``kir db merge``: databases filled on two machines combine into one; duplicates are
skipped, conflicts (a different time, a different verdict) reported and resolved as asked;
the incoming file is never written; the MLX version and OS are part of the key (schema 3)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from kir.commands.main import main
from kir.errors import KirError
from kir.search import Evaluation, TuningDB, TuningKey
from kir.search.db_merge import merge_into

M2 = TuningKey.make("k1", {"N": 64}, "metal", "Apple M2", "0.1.0", "softmax",
                    "v1", "0.30.0", "macOS 15.1 arm64")
M3 = TuningKey.make("k1", {"N": 64}, "metal", "Apple M3", "0.1.0", "softmax",
                    "v1", "0.30.0", "macOS 15.1 arm64")
M2_NEWER_MLX = TuningKey.make("k1", {"N": 64}, "metal", "Apple M2", "0.1.0", "softmax",
                              "v1", "0.31.0", "macOS 15.1 arm64")


def fill(path, rows):
    with TuningDB(path) as db:
        for key, fp, genome, evaluation, stamp in rows:
            db.record(key, fp, genome, evaluation, stamp)


@pytest.fixture
def two_machines(tmp_path):
    """Two databases: both hold the unrewritten kernel alike; a candidate timed differently
    on each; one valid here and invalid there; and rows only one of them has."""
    here, there = tmp_path / "here.db", tmp_path / "there.db"
    fill(here, [(M2, "f0", [], Evaluation.timed(2.0), 10.0),
                (M2, "f1", ["unroll-loop{loop=L0,factor=4}"], Evaluation.timed(1.5), 11.0),
                (M2, "f2", ["tile-loop{loop=L0,factor=8}"], Evaluation.timed(1.2), 12.0),
                (M2, "f3", ["coarsen-threads{dim=x,factor=2}"], Evaluation.timed(1.9), 13.0)])
    fill(there, [(M2, "f0", [], Evaluation.timed(2.0), 20.0),
                 (M2, "f1", ["unroll-loop{loop=L0,factor=4}"], Evaluation.timed(1.4), 21.0),
                 (M2, "f2", ["tile-loop{loop=L0,factor=8}"],
                  Evaluation.rejected("invalid", "y differs at (3, 7)"), 22.0),
                 (M2, "f4", ["fast-math"], Evaluation.timed(1.7), 23.0),
                 (M3, "f0", [], Evaluation.timed(1.6), 24.0),
                 (M2_NEWER_MLX, "f0", [], Evaluation.timed(1.8), 25.0)])
    return here, there


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_merge_copies_skips_duplicates_and_reports_conflicts(two_machines):
    here, there = two_machines
    before = digest(there)
    with TuningDB(here) as db:
        report = merge_into(db, there)
        assert report.added == 3  # f4 on the M2, the M3's row, the newer MLX's row
        assert report.duplicates == 1 and report.keys == 3
        kinds = {c.fingerprint: c.kind for c in report.conflicts}
        assert kinds == {"f1": "time", "f2": "status"}
        assert all(c.kept == "existing" for c in report.conflicts)
        assert db.lookup(M2, "f1").time_ms == 1.5 and db.lookup(M2, "f2").ok
        assert db.lookup(M2, "f4").time_ms == 1.7
        assert db.row(M2, "f4").timestamp == 23.0  # its own time stamp
        # Other chips and other MLX releases stay apart: three keys, not one.
        assert db.lookup(M3, "f0").time_ms == 1.6
        assert db.lookup(M2_NEWER_MLX, "f0").time_ms == 1.8
        assert db.lookup(M2, "f0").time_ms == 2.0
        assert len(db.runs()) == 3
        again = merge_into(db, there)  # merging twice changes nothing
        assert again.added == 0 and again.duplicates == 4 and len(again.conflicts) == 2
    assert digest(there) == before  # the incoming file was only read


@pytest.mark.parametrize("prefer, f1_ms, f2_status", [
    ("existing", 1.5, "ok"), ("incoming", 1.4, "invalid"), ("newer", 1.4, "invalid")])
def test_conflicts_resolved_as_asked(two_machines, prefer, f1_ms, f2_status):
    here, there = two_machines
    with TuningDB(here) as db:
        report = merge_into(db, there, prefer)
        assert db.lookup(M2, "f1").time_ms == f1_ms
        assert db.lookup(M2, "f2").status == f2_status
    assert {c.kept for c in report.conflicts} == {"existing" if prefer == "existing"
                                                 else "incoming"}


def test_kir_db_merge_command(two_machines, tmp_path, capsys):
    here, there = two_machines
    third = tmp_path / "third.db"
    fill(third, [(M2, "f5", ["exp-to-exp2"], Evaluation.timed(1.95), 30.0)])
    assert main(["db", "merge", str(there), str(third), "--db", str(here)]) == 0
    out = capsys.readouterr().out
    assert "4 rows added, 1 duplicates, 2 conflicts" in out
    assert "conflict (status): softmax on Apple M2 [f2] tile-loop{loop=L0,factor=8}: here " \
           "1.2 ms, incoming invalid (y differs at (3, 7)); kept existing" in out
    assert "conflict (time):" in out
    # `import` is the same action; a fresh target database is created.
    fresh = tmp_path / "fresh.db"
    assert main(["db", "import", str(here), "--db", str(fresh)]) == 0
    with TuningDB(fresh) as db:
        assert len(db.runs()) == 3 and db.lookup(M2, "f5").time_ms == 1.95


def test_merge_refuses_bad_inputs(two_machines, tmp_path, capsys):
    here, _ = two_machines
    assert main(["db", "merge", str(tmp_path / "nothing.db"), "--db", str(here)]) == 2
    assert "no tuning database at" in capsys.readouterr().err
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert main(["db", "merge", str(foreign), "--db", str(here)]) == 2
    err = capsys.readouterr().err
    assert str(foreign) in err and "not a kir tuning database" in err
    assert main(["db", "merge", str(here), "--db", str(here)]) == 2
    assert "is the database being merged into" in capsys.readouterr().err
    assert main(["db", "merge", "--db", str(here)]) == 2
    with TuningDB(here) as db, pytest.raises(KirError, match="preference"):
        merge_into(db, here, "oldest")


def test_schema_2_database_merges_without_being_migrated_in_place(tmp_path):
    """A database from a kir before the MLX version was in the key: its rows come in with
    the MLX version and OS empty, and the file itself keeps schema 2."""
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript("""
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema', '2');
        CREATE TABLE keys (id INTEGER PRIMARY KEY, kernel_fp TEXT NOT NULL,
            sizes TEXT NOT NULL, target TEXT NOT NULL, device TEXT NOT NULL,
            version TEXT NOT NULL, kernel_name TEXT NOT NULL DEFAULT '', created REAL NOT NULL,
            validation TEXT NOT NULL DEFAULT '',
            UNIQUE (kernel_fp, sizes, target, device, version, validation));
        CREATE TABLE evaluations (key_id INTEGER NOT NULL REFERENCES keys(id),
            fingerprint TEXT NOT NULL, genome TEXT NOT NULL, status TEXT NOT NULL,
            time_ms REAL, error TEXT NOT NULL DEFAULT '', details TEXT NOT NULL DEFAULT '{}',
            timestamp REAL NOT NULL, PRIMARY KEY (key_id, fingerprint));
        INSERT INTO keys VALUES (1, 'k1', '{"N":64}', 'model:apple-m2', 'model:apple-m2',
            '0.1.0', 'softmax', 1.0, 'v1');
        INSERT INTO evaluations VALUES (1, 'f0', '[]', 'ok', 2.0, '', '{}', 2.0);
    """)
    conn.close()
    modelled = TuningKey.make("k1", {"N": 64}, "model:apple-m2", "model:apple-m2", "0.1.0",
                              "softmax", "v1")
    with TuningDB(tmp_path / "new.db") as db:
        assert merge_into(db, old).added == 1
        assert db.lookup(modelled, "f0").time_ms == 2.0  # modelled rows keep answering
    conn = sqlite3.connect(old)
    assert conn.execute("SELECT value FROM meta WHERE name='schema'").fetchone()[0] == "2"
    conn.close()
