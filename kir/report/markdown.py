"""``report.md``: what the search found and which CUDA knowledge survived on the target."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Mapping, Sequence

from kir.ir import Kernel
from kir.ir.printer import print_kernel
from kir.report.ablation import AblationRow, rule_outcomes
from kir.report.plot import write_plot
from kir.search.engine import SearchResult
from kir.search.phases import phase_table

_STATUS_ORDER = ("faster", "slower", "invalid", "compile_error", "crash", "timeout", "nan",
                 "not_applicable")


def _ms(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:.4g} ms{unit}"


def step_diffs(base: Kernel, kernels: Sequence[Kernel], steps: Sequence[str]) -> list[str]:
    """A unified diff of the location-free IR text for each step."""
    out = []
    before = print_kernel(base, locations=False)
    for step, kernel in zip(steps, kernels):
        after = print_kernel(kernel, locations=False)
        diff = "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                            after.splitlines(keepends=True),
                                            fromfile="before", tofile=f"after {step}"))
        out.append(diff or "(no textual change)\n")
        before = after
    return out


def write_report(directory: str | Path, *, result: SearchResult, base: Kernel,
                 step_kernels: Sequence[Kernel], ablation: Sequence[AblationRow],
                 title: str, settings: Mapping[str, object] | None = None,
                 unit: str | None = None) -> dict[str, Path]:
    """Write ``report.md`` and the progress plot (or CSV) into ``directory``. ``step_kernels``
    are the kernels after each winning step (for the diffs); ``unit`` is what each time is,
    e.g. " (modelled at N=64)" (default: " (modelled)" for modelled results). Returns the
    files written by role: "report", "plot"."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    modelled = result.modelled
    if unit is None:
        unit = " (modelled)" if modelled else ""
    plot_path, plot_line = write_plot(result.history, directory, modelled=modelled,
                                      baseline_ms=result.baseline_ms, title=title)
    winner = [str(s) for s in result.best_steps]
    lines = [f"# kir search report: {title}", ""]
    if modelled:
        lines += ["> No GPU timed these kernels: every time below comes from kir's cost model "
                  f"({result.target}), not a measurement.", ""]
    speedup = f"{result.speedup:.3g}x" if result.speedup else "—"
    lines += [
        "| | |", "| --- | --- |",
        f"| target | {result.target} on {result.device} |",
        f"| unrewritten kernel | {_ms(result.baseline_ms, unit)} |",
        f"| best kernel | {_ms(result.best_ms, unit)} |",
        f"| speed-up | {speedup}{unit} |",
        f"| evaluations | {len(result.history)} ({result.evaluator_calls} new, "
        f"{result.cached} from the tuning database); stopped: {result.stopped} |",
        f"| outcomes | {', '.join(f'{k} {v}' for k, v in sorted(result.counts.items()))} |",
    ]
    for name, value in (settings or {}).items():
        lines.append(f"| {name} | {value} |")
    lines += ["", "## Best-so-far time", "", plot_line, ""]
    lines += ["## Where the time went", "",
              "The search's seconds by phase: applying rules (with fingerprinting), the tuning "
              "database, then the evaluator's phases.", "",
              *phase_table(result.phases, result.wall_s), ""]

    lines += ["## Winning trace", ""]
    if not winner:
        lines += ["No rewrite beat the unrewritten kernel: the best kernel is the input.", ""]
    else:
        lines += [f"{i + 1}. `{s}`" for i, s in enumerate(winner)] + [""]
        for i, (step, diff) in enumerate(zip(winner, step_diffs(base, step_kernels, winner))):
            lines += [f"### Step {i + 1}: `{step}`", "", "```diff", diff.rstrip("\n"), "```", ""]

    lines += ["## Transfer table", "",
              "Each winning step taken out in turn, the rest replayed and evaluated: the effect "
              "is the time without the step over the best time (above 1: the step paid off).", ""]
    if ablation:
        lines += [f"| rule step | time without it{unit} | effect | verdict |",
                  "| --- | --- | --- | --- |"]
        for row in ablation:
            effect = f"{row.effect:.3g}x" if row.effect is not None else "—"
            time_text = _ms(row.time_without_ms) if row.time_without_ms is not None \
                else row.status
            lines.append(f"| `{row.step}` | {time_text} | {effect} | {row.verdict} |")
        if any(row.verdict == "hurt" for row in ablation):
            lines += ["", "A step that hurt means the kernel without it is faster than the "
                          "search's best: the search did not try that kernel (a larger "
                          "--budget would find it)."]
    else:
        lines.append("(empty: the winning trace has no steps)")
    lines.append("")

    outcomes = rule_outcomes(result.history, result.baseline_ms, winner)
    lines += ["## Rules tried and rejected", "",
              "Rules in candidates the search judged but not in the winner, with how those "
              "candidates fared (faster / slower: valid and faster / not faster than the "
              f"unrewritten kernel{unit}).", ""]
    if outcomes:
        statuses = [s for s in _STATUS_ORDER if any(s in c for c in outcomes.values())]
        lines += ["| rule | candidates | " + " | ".join(statuses) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in statuses) + " |"]
        for rule, counts in outcomes.items():
            lines.append(f"| {rule} | {sum(counts.values())} | "
                         + " | ".join(str(counts.get(s, 0)) for s in statuses) + " |")
    else:
        lines.append("(none)")
    lines.append("")
    report = directory / "report.md"
    report.write_text("\n".join(lines))
    return {"report": report, "plot": plot_path}
