"""Crash-safe tuning database: the real ``kir compile --search`` killed with SIGKILL again and
again resumes with every completed evaluation intact.

Each round starts the search, waits until it has committed at least one new evaluation, waits
a random moment more and kills it (SIGKILL: no cleanup runs). After each kill the database
must pass SQLite's integrity check, hold at least as many rows as before, and hold every row
seen before unchanged. The last run is left to finish: it completes the budget, reusing the
earlier rows from the database.
"""

from __future__ import annotations

import json
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from kir.search.evaluator import STATUSES

ROOT = Path(__file__).resolve().parents[1]
KILLS = 5
BUDGET = 200  # more than five killed runs can finish: this search judges ~80 a second


def _command(db: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "kir.commands.main", "compile", str(ROOT / "examples" / "softmax.cu"),
            "--search", "--target", "model", "--size", "rows=4", "--size", "cols=64",
            "--budget", str(BUDGET), "--db", str(db), "--out-dir", str(out)]


def _rows(db: Path) -> dict[tuple[int, str], tuple]:
    """Every evaluation row, keyed by (key id, fingerprint); {} before the tables exist."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute("SELECT key_id, fingerprint, genome, status, time_ms, error "
                            "FROM evaluations").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return {}
    finally:
        conn.close()
    return {(r[0], r[1]): r[2:] for r in rows}


def _check_database(db: Path) -> None:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
        for genome, status, time_ms in conn.execute(
                "SELECT genome, status, time_ms FROM evaluations"):
            assert status in STATUSES, status
            assert (time_ms is not None) == (status == "ok"), (status, time_ms)
            assert isinstance(json.loads(genome), list)
    finally:
        conn.close()


def test_search_killed_five_times_resumes_with_every_row_intact(tmp_path):
    db, out = tmp_path / "X.db", tmp_path / "out"
    rng = random.Random(6)
    seen: dict[tuple[int, str], tuple] = {}
    counts: list[int] = []
    kills = 0
    while kills < KILLS:
        before = len(seen)
        proc = subprocess.Popen(_command(db, out), cwd=str(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 90
            while len(_rows(db)) <= before and proc.poll() is None:
                assert time.monotonic() < deadline, "no new evaluation within 90 s"
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.3))  # a random moment: mid-evaluation or mid-commit
            finished = proc.poll() is not None
            if not finished:
                proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            output = proc.communicate()[0].decode(errors="replace")
        assert finished or proc.returncode == -signal.SIGKILL, output
        assert not finished, f"the search finished before kill {kills + 1}:\n{output}"
        kills += 1
        _check_database(db)
        rows = _rows(db)
        lost = [k for k in seen if k not in rows]
        changed = [k for k in seen if k in rows and rows[k] != seen[k]]
        assert not lost and not changed, f"kill {kills}: lost {lost[:3]}, changed {changed[:3]}"
        assert len(rows) > before
        seen = rows
        counts.append(len(rows))
    assert counts == sorted(counts) and kills >= KILLS

    final = subprocess.run(_command(db, out), cwd=str(tmp_path), capture_output=True,
                           text=True, timeout=300)
    assert final.returncode == 0, final.stdout + final.stderr
    found = re.search(r"(\d+) evaluations \((\d+) from the tuning database\)", final.stdout)
    assert found, final.stdout
    total, cached = int(found.group(1)), int(found.group(2))
    assert total == BUDGET
    _check_database(db)
    rows = _rows(db)
    assert all(rows.get(k) == v for k, v in seen.items())
    # Resuming re-evaluated nothing that had completed: every earlier row came from the DB
    # (the search is seeded, so it walks the same candidates again).
    assert cached >= min(len(seen), BUDGET), (cached, len(seen), final.stdout)
