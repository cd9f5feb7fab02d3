"""The best-so-far curve: ``progress.svg`` drawn here with no dependency (every report has a
picture), the data as ``progress.csv``, and ``progress.png`` as well when matplotlib (the
optional ``plot`` extra) is installed."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Sequence
from xml.sax.saxutils import escape

from kir.search.engine import EvalRecord

WIDTH, HEIGHT = 720, 400
LEFT, RIGHT, TOP, BOTTOM = 78, 20, 40, 56  # margins around the plotting area


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


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [low, high] (1, 2 or 5 times a power of
    ten apart)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def svg_text(history: Sequence[EvalRecord], *, modelled: bool, baseline_ms: float | None,
             title: str) -> str:
    """The best-so-far plot as SVG text: valid candidates as dots, the best so far as a
    step line, the unrewritten kernel's time dashed."""
    points = [(n, best) for n, _, best, _ in curve(history) if best is not None]
    valid = [(n, t) for n, t, _, status in curve(history) if status == "ok" and t is not None]
    times = [t for _, t in valid] + [b for _, b in points] + \
        ([baseline_ms] if baseline_ms is not None else [])
    unit = "ms (modelled)" if modelled else "ms"
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    evaluations = max([n for n, *_ in curve(history)] or [1])
    xticks = [t for t in nice_ticks(0, evaluations, 6) if t <= evaluations * 1.0001] or [0]
    x_high = max(evaluations, 1)
    yticks = nice_ticks(min(times), max(times), 5) if times else [0.0, 1.0]
    y_low, y_high = yticks[0], yticks[-1] if yticks[-1] > yticks[0] else yticks[0] + 1

    def x(n: float) -> float:
        return LEFT + plot_w * n / x_high

    def y(t: float) -> float:
        return TOP + plot_h * (1 - (t - y_low) / (y_high - y_low))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">'
           f'{escape(title)}</text>']
    for tick in yticks:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" '
                   f'y2="{y(tick):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
                   f'{tick:.4g}</text>')
    for tick in xticks:
        out.append(f'<text x="{x(tick):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">'
                   f'{tick:g}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
               'stroke="#444"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 14}" text-anchor="middle">'
               'evaluations</text>')
    out.append(f'<text transform="translate(18 {TOP + plot_h / 2}) rotate(-90)" '
               f'text-anchor="middle">time, {escape(unit)}</text>')
    if baseline_ms is not None:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(baseline_ms):.1f}" '
                   f'y2="{y(baseline_ms):.1f}" stroke="grey" stroke-dasharray="6 4"/>')
    for n, t in valid:
        out.append(f'<circle cx="{x(n):.1f}" cy="{y(t):.1f}" r="2.5" fill="#1f77b4" '
                   'fill-opacity="0.4"/>')
    if points:
        path = [f"M{x(points[0][0]):.1f},{y(points[0][1]):.1f}"]
        for (_, before), (n, best) in zip(points, points[1:]):
            path.append(f"H{x(n):.1f}V{y(best):.1f}")
        path.append(f"H{x(x_high):.1f}")
        out.append(f'<path d="{"".join(path)}" fill="none" stroke="#ff7f0e" '
                   'stroke-width="2"/>')
    legend = [("#ff7f0e", "line", "best so far"), ("#1f77b4", "dot", "valid candidate")]
    if baseline_ms is not None:
        legend.append(("grey", "dash", "unrewritten kernel"))
    out.append(f'<rect x="{LEFT + plot_w - 158}" y="{TOP + 4}" width="150" '
               f'height="{16 * len(legend) + 6}" fill="white" fill-opacity="0.85"/>')
    for i, (color, kind, label) in enumerate(legend):
        ly = TOP + 16 + 16 * i
        lx = LEFT + plot_w - 150
        if kind == "dot":
            out.append(f'<circle cx="{lx + 10}" cy="{ly - 4}" r="3" fill="{color}"/>')
        else:
            dash = ' stroke-dasharray="6 4"' if kind == "dash" else ""
            out.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{ly - 4}" y2="{ly - 4}" '
                       f'stroke="{color}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 26}" y="{ly}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_plot(history: Sequence[EvalRecord], directory: Path, *, modelled: bool,
               baseline_ms: float | None, title: str) -> tuple[Path, str]:
    """Write ``progress.svg`` and ``progress.csv`` (and ``progress.png`` with matplotlib).
    Returns the picture the report shows and the report's line for it."""
    write_csv(history, directory / "progress.csv")
    path = directory / "progress.svg"
    path.write_text(svg_text(history, modelled=modelled, baseline_ms=baseline_ms, title=title))
    write_png(history, directory / "progress.png", modelled=modelled, baseline_ms=baseline_ms,
              title=title)
    return path, (f"![best-so-far time against evaluations]({path.name}) "
                  "(data: [progress.csv](progress.csv))")


def write_png(history: Sequence[EvalRecord], path: Path, *, modelled: bool,
              baseline_ms: float | None, title: str) -> Path | None:
    """The same plot as PNG through matplotlib (``pip install 'kir-compiler[plot]'``);
    None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed, and none may exist
        import matplotlib.pyplot as plt
    except ImportError:
        return None
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
    fig.savefig(path)
    plt.close(fig)
    return path
