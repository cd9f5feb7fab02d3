"""The case-file checker itself: each directive fails when it should (a checker that cannot
fail would pass every rule)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kir.driver.registry import load_registry
from kir.driver.rulecases import match_checks, parse_cases, run_case
from kir.errors import KirError

REGISTRY = load_registry(plugins=False)
KERNEL = """kernel @t(y: f32* global)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
  for L0 i: i32 = 0; i < 16; i = i + 1 {
    y[i] = 1.0
  }
}
"""


def _run(text, registry=REGISTRY):
    (case,) = parse_cases(text, "t.kir")
    return run_case(case, registry)


def test_checks_match_in_order_next_and_not():
    out = "a\nb\nc\nd\n"
    assert match_checks(out, [(1, "CHECK", "b"), (2, "CHECK-NEXT", "c")]) is None
    assert match_checks(out, [(1, "CHECK", "b"), (2, "CHECK-NEXT", "d")])[1] == 2
    assert match_checks(out, [(1, "CHECK", "c"), (2, "CHECK", "b")])[1] == 2
    assert match_checks(out, [(1, "CHECK", "a"), (2, "CHECK-NOT", "b"), (3, "CHECK", "c")])[1] \
        == 2
    assert match_checks(out, [(1, "CHECK", "c"), (2, "CHECK-NOT", "a")]) is None
    assert match_checks(out, [(1, "CHECK", "{{[bc]}}"), (2, "CHECK-NEXT", "c")]) is None


def test_a_wrong_check_or_refusal_fails():
    good = f"# RUN: tile-loop{{loop=L0,factor=4}}\n{KERNEL}# CHECK: i_tile < 16\n"
    assert _run(good).ok
    assert not _run(good.replace("i_tile < 16", "i_tile < 17")).ok
    refused = f"# RUN: tile-loop{{loop=L0,factor=16}}\n{KERNEL}# REFUSE: one tile\n"
    assert _run(refused).ok
    assert not _run(refused.replace("one tile", "something else")).ok
    assert not _run(f"# RUN: tile-loop{{loop=L0,factor=4}}\n{KERNEL}# REFUSE: one tile\n").ok


def test_equiv_catches_a_rule_that_changes_results():
    spec = importlib.util.spec_from_file_location(
        "drop_loop_rule", Path(__file__).parents[1] / "reliability" / "drop_loop_rule.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry = {**REGISTRY, "drop-loop": module.RULES[0]}
    text = f"# RUN: drop-loop{{loop=L0}}\n# EQUIV: y[16]\n{KERNEL}# CHECK-NOT: for\n"
    outcome = _run(text, registry)
    assert not outcome.ok and "differs" in outcome.message


def test_a_malformed_equiv_line_fails_the_case_at_its_line():
    kernel = KERNEL.replace("y: f32* global)", "y: f32* global, n: i32)")
    text = (f"# RUN: tile-loop{{loop=L0,factor=4}}\n# EQUIV: y[16] n=abc\n{kernel}"
            "# CHECK: i_tile < 16\n")
    outcome = _run(text)  # was an internal error (ValueError) out of `kir rules test`
    assert not outcome.ok and "EQUIV item 'n=abc'" in outcome.message and outcome.line == 2
    assert _run(text.replace("n=abc", "n=3")).ok


def test_scalars_reach_the_rules_context():
    kernel = KERNEL.replace("y: f32* global)", "y: f32* global, n: i32)").replace(
        "i < 16", "i < n")
    text = f"# RUN: specialize-param{{param=n}}\n# SCALARS: n=12\n{kernel}# CHECK: i < 12\n"
    assert _run(text).ok
    assert not _run(text.replace("n=12", "n=13")).ok
    without = _run(text.replace("# SCALARS: n=12\n", ""))
    assert not without.ok and "no value for n" in without.message
    for bad in ("n", "n=twelve"):
        outcome = _run(text.replace("n=12", bad))
        assert not outcome.ok and "SCALARS item" in outcome.message and outcome.line == 2


def test_malformed_files_are_located_errors():
    with pytest.raises(KirError, match="RUN"):
        parse_cases(KERNEL + "# CHECK: x\n", "t.kir")
    with pytest.raises(KirError, match="CHECK lines or a REFUSE"):
        parse_cases("# RUN: tile-loop{loop=L0}\n" + KERNEL, "t.kir")
