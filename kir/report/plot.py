"""The best-so-far curve: ``progress.png`` with matplotlib (the optional ``plot`` extra), else
the same data as ``progress.csv`` and a note saying why there is no picture."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from kir.search.engine import EvalRecord


def curve(history: Sequence[EvalRecord]) -> list[tuple[int, float | None, float | None, str]]:
    """(evaluation number from 1, this candidate's time, best time so far, status)."""
    return [(r.index + 1, r.time_ms, r.best_ms, r.status) for r in history]


def write_csv(history: Sequence[EvalRecord], path: Path) -> Path:
    """The curve as CSV: evaluation, time_ms, best_ms, status, cached."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["evaluation", "time_ms", "best_ms", "status", "cached"])
        for r in history:
            writer.writerow([r.index + 1, "" if r.time_ms is None else f"{r.time_ms:.6g}",
                             "" if r.best_ms is None else f"{r.best_ms:.6g}", r.status,
                             int(r.cached)])
    return path


def write_plot(history: Sequence[EvalRecord], directory: Path, *, modelled: bool,
               baseline_ms: float | None, title: str) -> tuple[Path, str]:
    """Write ``progress.png`` (or ``progress.csv`` without matplotlib). Returns the file and
    a line for the report saying what it is."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed, and none may exist
        import matplotlib.pyplot as plt
    except ImportError:
        path = write_csv(history, directory / "progress.csv")
        return path, ("matplotlib is not installed (`pip install 'kir[plot]'`), so the "
                      f"best-so-far data is in [{path.name}]({path.name}) instead of a plot.")
    unit = "ms (modelled)" if modelled else "ms"
    points = [(n, best) for n, _, best, _ in curve(history) if best is not None]
    valid = [(n, t) for n, t, _, status in curve(history) if status == "ok" and t is not None]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if valid:
        ax.scatter(*zip(*valid), s=8, alpha=0.35, label="valid candidate")
    if points:
        ax.step(*zip(*points), where="post", linewidth=2, label="best so far")
    if baseline_ms is not None:
        ax.axhline(baseline_ms, linestyle="--", color="grey", label="unrewritten kernel")
    ax.set_xlabel("evaluations")
    ax.set_ylabel(f"time, {unit}")
    ax.set_title(title)
    ax.legend(loc="upper right")
    fig.tight_layout()
    path = directory / "progress.png"
    fig.savefig(path)
    plt.close(fig)
    return path, f"![best-so-far time against evaluations]({path.name})"
