"""The campaign report: per kernel and device the best time and its ratio to the unrewritten
kernel, and the rule x device transfer table — which pieces of CUDA practice paid off on which
device, from each search's ablation (the winner's time without that step).

Written as ``campaign.md``, ``campaign.csv`` (one row per search) and a chart of the
speed-ups (``speedups.png`` with matplotlib, the ``plot`` extra); each search's own report
(best-so-far plot, steps, diffs) sits in a folder beside it. Modelled devices are marked as
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

from kir.driver.load import Loaded
from kir.report.ablation import AblationRow
from kir.search.device import DeviceDescriptor
from kir.search.engine import SearchResult


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


def rule_of(step: str) -> str:
    """``tile-loop{loop=L0,factor=8}`` → ``tile-loop``."""
    return step.split("{", 1)[0]


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
    """Write ``campaign.md``, ``campaign.csv`` and the speed-up chart; returns the report."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    csv_path = _write_csv(outcomes, directory / "campaign.csv")
    chart = _write_chart(outcomes, devices, directory / "speedups.png")
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
    lines += [f"![speed-up over the unrewritten kernel, per kernel and device]({chart.name})"
              if chart else "(matplotlib is not installed, `pip install 'kir[plot]'`: no "
              "chart; the data is in the CSV.)", ""]
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


def _write_chart(outcomes: Sequence[SearchOutcome], devices: Sequence[str],
                 path: Path) -> Path | None:
    """Grouped bars of the speed-up per kernel (x sizes) and device; None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    groups = list(dict.fromkeys(f"{o.kernel}\n{o.sizes_text}" for o in outcomes))
    width = 0.8 / max(1, len(devices))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(groups)), 4), dpi=100)
    for i, device in enumerate(devices):
        speed = {f"{o.kernel}\n{o.sizes_text}": o.speedup or 0.0 for o in outcomes
                 if o.device == device}
        ax.bar([g + i * width for g in range(len(groups))],
               [speed.get(name, 0.0) for name in groups], width, label=device)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    found = [o.speedup for o in outcomes if o.speedup]
    if found and max(found) / min(found) > 20:  # one restructured kernel dwarfs the rest
        ax.set_yscale("log")
    ax.set_xticks([g + width * (len(devices) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels(groups, fontsize=7)
    ax.set_ylabel("speed-up over the unrewritten kernel"
                  + (" (modelled)" if any(o.modelled for o in outcomes) else ""))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
