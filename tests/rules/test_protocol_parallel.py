"""Rule protocol v2 for the rules converted in the second batch (parallel, vectorize, shared
tiles, scan and memory rules): one step through ``apply_step`` runs the rule's legality
analysis exactly once (``kir.rules.ANALYSES``, counted by ``BaseRule._planned``), and its
apply consumes the plan instead of analysing again (the function at the heart of each rule's
analysis is counted too). The steps and kernels are the applied cases of the rules' text
case files, so they are realistic applications, not toy sites."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from kir.driver.registry import load_registry
from kir.driver.rulecases import parse_cases
from kir.ir import Kernel
from kir.ir.parser import parse_kernel
from kir.rules import ANALYSES, RuleContext, apply_step, as_rule, parse_step

CASES = Path(__file__).parent / "cases"
REGISTRY = load_registry(plugins=False)
# Each rule with the module-level function its plan calls once per site (the analysis that
# ran in both sites() and apply() before protocol v2).
BATCH = {
    "coarsen-threads": ("parallel.coarsen_threads", "_plan"),
    "merge-threads": ("parallel.merge_threads", "_dim_tainted"),
    "pad-shared": ("shared_tiles.tiles", "tile_form"),
    "parallel-scan": ("scan.parallel_scan", "recurrence"),
    "parallelize-loop": ("parallel.parallelize_loop", "_shape_problem"),
    "promote-to-registers": ("promote_to_registers", "_loop_plans"),
    "resize-block": ("parallel.resize_block", "_limits"),
    "split-shared": ("split_shared", "single_defs"),
    "stage-in-shared": ("stage_in_shared", "_reads"),
    "transpose-shared": ("shared_tiles.tiles", "tile_form"),
    "vectorize-access": ("vectorize.vectorize_access", "_plan"),
    "vectorize-strided": ("vectorize.vectorize_strided", "_plan"),
}


def _first_application(rule: str):
    """The kernel and step of the first applied case in ``cases/<rule>.kir``."""
    path = CASES / f"{rule}.kir"
    case = next(c for c in parse_cases(path.read_text(), str(path)) if c.refuse is None)
    text = "\n".join([""] * (case.ir_start - 1) + case.ir_lines) + "\n"
    kernel = parse_kernel(text, str(path), locate_unmarked=True)
    (_, step_text), = case.steps
    return kernel, parse_step(step_text, REGISTRY)


@pytest.mark.parametrize("rule", sorted(BATCH))
def test_one_step_runs_the_analysis_once(rule, monkeypatch):
    assert as_rule(REGISTRY[rule]) is REGISTRY[rule], "still on the first protocol"
    module = importlib.import_module(f"kir.rewrites.{BATCH[rule][0]}")
    analysis = getattr(module, BATCH[rule][1])
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return analysis(*args, **kwargs)
    monkeypatch.setattr(module, BATCH[rule][1], counted)
    kernel, step = _first_application(rule)
    ANALYSES.clear()
    result = apply_step(kernel, step, REGISTRY, RuleContext())
    assert isinstance(result, Kernel), result
    assert ANALYSES[rule] == 1, dict(ANALYSES)
    assert len(calls) == 1, f"{BATCH[rule][1]} ran {len(calls)} times"


def test_promote_to_registers_lists_sites_with_one_analysis_per_buffer():
    # Its sites (buffer, buffer@L...) come from one analysis of each candidate buffer across
    # every loop, not one per site.
    kernel, _ = _first_application("promote-to-registers")
    ANALYSES.clear()
    assert REGISTRY["promote-to-registers"].sites(kernel) == ["acc"]
    buffers = [p.name for p in kernel.params if p.is_buffer]
    assert ANALYSES["promote-to-registers"] == len(buffers)
