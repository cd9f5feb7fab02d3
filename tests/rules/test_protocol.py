"""Rule protocol v2 for the rules converted in the first batch (loop, reduction, math and
memory rules) and the declarative algebra rules: one step through ``apply_step`` runs the
rule's legality analysis exactly once (``kir.rules.ANALYSES``, counted by
``BaseRule._planned``), and its apply consumes the plan instead of analysing again (the
function at the heart of each rule's analysis is counted too, where it has one). The steps
and kernels are the first applied case of each rule's text case file."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from kir.driver.registry import load_registry
from kir.driver.rulecases import parse_cases
from kir.ir import Kernel
from kir.ir.parser import parse_kernel
from kir.rules import ANALYSES, LegacyRule, RuleContext, apply_step, parse_step

CASES = Path(__file__).parent / "cases"
REGISTRY = load_registry(plugins=False)
# Each rule with the module-level function its analysis calls once per step (the analysis
# that ran in both sites() and apply() before protocol v2), or None where the analysis is
# the candidate list itself (fast-math, the declarative rules): ANALYSES alone shows those.
BATCH = {
    "unroll-loop": ("unroll_loop", "has_own_exit"),
    "interchange-loops": ("interchange_loops", "_check_shape"),
    "fuse-loops": ("fuse_loops", "_shape_refusal"),
    "hoist-invariant": ("hoist_invariant", "buffers_written"),
    "specialize-param": ("specialize_param", "used_vars"),
    "fast-math": None,
    "online-softmax": ("online_softmax", "find_passes"),
    "warp-reduce": ("warp_reduce", "reductions"),
    "split-reduction": ("split_reduction", "_lane_refusal"),
    "privatize-atomic": ("privatize_atomic", "_refusal"),
    "mma-tile": ("mma_tile", "_operands"),
    "cooperative-load": ("cooperative_load", "_inlined_body"),
    "double-buffer": ("double_buffer", "_check"),
    "exp-to-exp2": None,
    "exp-to-exp2-fast": None,
    "div-to-mul": None,
    "fold-scale": None,
}


def _first_application(rule: str):
    """The kernel, first step and rule context of the first applied case in
    ``cases/<rule>.kir``."""
    path = CASES / f"{rule}.kir"
    case = next(c for c in parse_cases(path.read_text(), str(path)) if c.refuse is None)
    text = "\n".join([""] * (case.ir_start - 1) + case.ir_lines) + "\n"
    kernel = parse_kernel(text, str(path), locate_unmarked=True)
    scalars = {}
    for word in (case.scalars[1].split() if case.scalars else ()):
        name, _, value = word.partition("=")
        scalars[name] = float(value) if "." in value else int(value)
    return kernel, parse_step(case.steps[0][1], REGISTRY), RuleContext(scalars=scalars)


@pytest.mark.parametrize("rule", sorted(BATCH))
def test_one_step_runs_the_analysis_once(rule, monkeypatch):
    assert not isinstance(REGISTRY[rule], LegacyRule), "still on the first protocol"
    calls = []
    if BATCH[rule] is not None:
        module = importlib.import_module(f"kir.rewrites.{BATCH[rule][0]}")
        analysis = getattr(module, BATCH[rule][1])

        def counted(*args, **kwargs):
            calls.append(args)
            return analysis(*args, **kwargs)
        monkeypatch.setattr(module, BATCH[rule][1], counted)
    kernel, step, ctx = _first_application(rule)
    ANALYSES.clear()
    result = apply_step(kernel, step, REGISTRY, ctx)
    assert isinstance(result, Kernel), result
    assert ANALYSES[rule] == 1, dict(ANALYSES)
    if BATCH[rule] is not None:
        assert len(calls) == 1, f"{BATCH[rule][1]} ran {len(calls)} times"

