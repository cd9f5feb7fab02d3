"""The campaign report: per kernel and device the best time and its ratio to the unrewritten
kernel, and the rule x device transfer table — which pieces of CUDA practice paid off on which
device, from each search's ablation (the winner's time without that step).

Written as ``campaign.md``, ``campaign.csv`` (one row per search) and a chart of the
speed-ups (``speedups.svg``, drawn without dependencies like the reports' best-so-far plots of
:mod:`kir.report.plot`); each search's own report (best-so-far plot, steps, diffs) sits in a
folder beside it. Modelled devices are marked as
such in every table: a cost model's time is not a measurement.
"""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence
from xml.sax.saxutils import escape

from kir.driver.load import Loaded
from kir.report.ablation import AblationRow
from kir.report.plot import BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH, nice_ticks
from kir.search.device import DeviceDescriptor
from kir.search.engine import SearchResult
from kir.search.records import rule_of


@dataclass
class SearchOutcome:
    """One search of a campaign: which kernel at which sizes on which device, and how it
    went (``error`` when it could not run)."""

    kernel: str
    sizes: dict[str, int]
    device: str
    order: int = 0  # the kernel x sizes position in the campaign file
    descriptor: DeviceDescriptor | None = None
    best_ms: float | None = None
    baseline_ms: float | None = None
    steps: tuple[str, ...] = ()
    evaluations: int = 0
    cached: int = 0
    wall_s: float = 0.0
    modelled: bool = False
    time_sizes: dict[str, int] = field(default_factory=dict)
    ablation: list[AblationRow] = field(default_factory=list)
    report: Path | None = None
    error: str = ""

    @classmethod
    def start(cls, loaded: Loaded, device: str, order: int = 0) -> "SearchOutcome":
        return cls(loaded.kernel.name, dict(loaded.bound.sizes), device, order)

    def finish(self, result: SearchResult, ablation: Sequence[AblationRow],
               time_sizes: Mapping[str, int]) -> None:
        self.best_ms, self.baseline_ms = result.best_ms, result.baseline_ms
        self.steps = tuple(str(s) for s in result.best_steps)
        self.evaluations, self.cached = len(result.history), result.cached
        self.wall_s, self.modelled = result.wall_s, result.modelled
        self.time_sizes, self.ablation = dict(time_sizes), list(ablation)

    @property
    def speedup(self) -> float | None:
        return self.baseline_ms / self.best_ms if self.best_ms and self.baseline_ms else None

    @property
    def sizes_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items())

    @property
    def unit(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in self.time_sizes.items())
        kind = "modelled" if self.modelled else "measured"
        return f" ({kind} at {where})" if where else f" ({kind})"

    @property
    def slug(self) -> str:
        """The folder of this search's own report."""
        raw = f"{self.kernel}-{'-'.join(f'{k}{v}' for k, v in self.sizes.items())}/{self.device}"
        return re.sub(r"[^A-Za-z0-9_./-]+", "-", raw)

    def line(self) -> str:
        """One line for the campaign's progress output."""
        head = f"{self.kernel} ({self.sizes_text}) on {self.device}"
        if self.error:
            return f"{head}: failed: {self.error}"
        best = "no valid candidate" if self.best_ms is None else \
            f"best {self.best_ms:.4g} ms{self.unit}" + \
            (f" x{self.speedup:.3g}" if self.speedup else "")
        return (f"{head}: {best}, {self.evaluations} evaluations ({self.cached} from the "
                f"tuning database) in {self.wall_s:.1f} s")


def transfer(outcomes: Sequence[SearchOutcome]) -> dict[str, dict[str, list[float | None]]]:
    """Rule → device → the effect of that rule's steps in each winner there (time without
    the step over the winner's time: above 1 it paid off; None: the kernel without it was
    not valid, the step was needed)."""
    table: dict[str, dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
    for outcome in outcomes:
        for row in outcome.ablation:
            table[rule_of(row.step)][outcome.device].append(row.effect)
    return {rule: dict(devices) for rule, devices in sorted(table.items())}


def transfer_cell(effects: Sequence[float | None]) -> str:
    """``x1.31 (3)``: the geometric mean effect over the winners holding the rule; needed
    steps counted apart."""
    if not effects:
        return "—"
    valued = [e for e in effects if e is not None and e > 0]
    parts = []
    if valued:
        mean = math.exp(sum(math.log(e) for e in valued) / len(valued))
        parts.append(f"x{mean:.2f} ({len(valued)})")
    needed = len(effects) - len(valued)
    if needed:
        parts.append(f"needed ({needed})")
    return ", ".join(parts)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g} ms"


def write_campaign_report(directory: str | Path, outcomes: Sequence[SearchOutcome], *,
                          devices: Sequence[str],
                          settings: Mapping[str, str] | None = None) -> Path:
    """Write ``campaign.md``, ``campaign.csv`` and ``speedups.svg``; returns the report."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    csv_path = _write_csv(outcomes, directory / "campaign.csv")
    chart = directory / "speedups.svg"
    chart.write_text(speedup_svg(outcomes, devices))
    modelled = sorted({o.device for o in outcomes if o.modelled})
    lines = ["# kir campaign report", ""]
    if modelled:
        lines += [f"> Modelled: no GPU timed {', '.join(modelled)}. Those times come from "
                  "kir's cost model for the named Apple GPU, not from a measurement.", ""]
    lines += [f"- {k}: {v}" for k, v in (settings or {}).items()] + [""]
    lines += ["## Best kernels", "",
              "| kernel | sizes | device | best | unrewritten | speed-up | steps | "
              "evaluations (from the database) |", "|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        device = f"{o.device} (modelled)" if o.modelled else o.device
        if o.error:
            lines.append(f"| {o.kernel} | {o.sizes_text} | {device} | failed: {o.error} "
                         "| | | | |")
            continue
        speed = f"x{o.speedup:.3g}" if o.speedup else "—"
        link = f"[{len(o.steps)}]({o.report.relative_to(directory)})" \
            if o.report and o.report.is_relative_to(directory) else str(len(o.steps))
        lines.append(f"| {o.kernel} | {o.sizes_text} | {device} | {_ms(o.best_ms)} | "
                     f"{_ms(o.baseline_ms)} | {speed} | {link} | {o.evaluations} "
                     f"({o.cached}) |")
    table = transfer(outcomes)
    lines += ["", "## What transferred: rule x device", "",
              "Each cell: the geometric mean over the winning kernels that hold the rule of "
              "(time without the step / winner's time), and how many winners; above x1 the "
              "rule paid off there, below it hurt; *needed*: without it the kernel was not "
              "valid. Modelled devices are marked.", ""]
    if table:
        heads = [f"{d} (modelled)" if d in modelled else d for d in devices]
        lines += ["| rule | " + " | ".join(heads) + " |",
                  "|---|" + "---|" * len(devices)]
        for rule, cells in table.items():
            lines.append(f"| {rule} | " + " | ".join(transfer_cell(cells.get(d, []))
                                                     for d in devices) + " |")
    else:
        lines.append("No winner held a step: nothing to ablate.")
    lines += ["", f"Data: [{csv_path.name}]({csv_path.name})."]
    lines += [f"![speed-up over the unrewritten kernel, per kernel and device]({chart.name})",
              ""]
    report = directory / "campaign.md"
    report.write_text("\n".join(lines))
    return report


def _write_csv(outcomes: Sequence[SearchOutcome], path: Path) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["kernel", "sizes", "device", "modelled", "best_ms", "baseline_ms",
                         "speedup", "steps", "evaluations", "cached", "wall_s", "error"])
        for o in outcomes:
            writer.writerow([o.kernel, o.sizes_text, o.device, int(o.modelled),
                             "" if o.best_ms is None else f"{o.best_ms:.6g}",
                             "" if o.baseline_ms is None else f"{o.baseline_ms:.6g}",
                             "" if o.speedup is None else f"{o.speedup:.4g}",
                             " ".join(o.steps), o.evaluations, o.cached, f"{o.wall_s:.2f}",
                             o.error])
    return path


COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def speedup_svg(outcomes: Sequence[SearchOutcome], devices: Sequence[str]) -> str:
    """Grouped bars of the speed-up over the unrewritten kernel per kernel (x sizes) and
    device, as SVG text drawn without dependencies; a log scale when one restructured kernel
    would dwarf the rest (speed-ups spanning more than 20x)."""
    groups = list(dict.fromkeys((o.kernel, o.sizes_text) for o in outcomes))
    speed = {(o.kernel, o.sizes_text, o.device): o.speedup for o in outcomes if o.speedup}
    found = list(speed.values()) or [1.0]
    log = max(found) / min(found) > 20
    if log:
        low, high = math.floor(math.log10(min(min(found), 1.0))), \
            math.ceil(math.log10(max(found)))
        ticks = [10.0 ** e for e in range(low, max(high, low + 1) + 1)]
    else:
        ticks = nice_ticks(0.0, max(max(found), 1.0), 5)
    width = max(WIDTH, 60 + 110 * len(groups))
    plot_w, plot_h = width - LEFT - RIGHT, HEIGHT - TOP - BOTTOM - 14

    def y(value: float) -> float:
        if log:
            share = (math.log10(value) - math.log10(ticks[0])) / \
                (math.log10(ticks[-1]) - math.log10(ticks[0]))
        else:
            share = (value - ticks[0]) / (ticks[-1] - ticks[0])
        return TOP + plot_h * (1 - share)

    modelled = " (modelled)" if any(o.modelled for o in outcomes) else ""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" '
           f'viewBox="0 0 {width} {HEIGHT}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">speed-up over '
           f'the unrewritten kernel{modelled}</text>']
    for tick in ticks:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" '
                   f'y2="{y(tick):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
                   f'x{tick:g}</text>')
    if ticks[0] <= 1.0 <= ticks[-1]:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(1.0):.1f}" '
                   f'y2="{y(1.0):.1f}" stroke="grey" stroke-dasharray="6 4"/>')
    slot = plot_w / max(1, len(groups))
    bar = slot * 0.8 / max(1, len(devices))
    for g, (kernel, sizes) in enumerate(groups):
        for d, device in enumerate(devices):
            value = speed.get((kernel, sizes, device))
            if value is None:
                continue
            left = LEFT + g * slot + slot * 0.1 + d * bar
            top, base = y(value), y(max(ticks[0], min(1.0, ticks[-1])) if log else ticks[0])
            out.append(f'<rect x="{left:.1f}" y="{min(top, base):.1f}" width="{bar:.1f}" '
                       f'height="{abs(base - top):.1f}" fill="{COLORS[d % len(COLORS)]}">'
                       f'<title>{escape(kernel)} on {escape(device)}: x{value:.3g}</title>'
                       '</rect>')
        center = LEFT + g * slot + slot / 2
        out.append(f'<text x="{center:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">'
                   f'{escape(kernel)}</text>')
        out.append(f'<text x="{center:.1f}" y="{TOP + plot_h + 30}" text-anchor="middle" '
                   f'fill="#666">{escape(sizes)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
               'stroke="#444"/>')
    for d, device in enumerate(devices):
        lx = LEFT + 10 + 110 * d
        out.append(f'<rect x="{lx}" y="{HEIGHT - 22}" width="12" height="12" '
                   f'fill="{COLORS[d % len(COLORS)]}"/>')
        out.append(f'<text x="{lx + 16}" y="{HEIGHT - 12}">{escape(device)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
