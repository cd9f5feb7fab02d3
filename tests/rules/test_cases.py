"""Every rule's text cases (``tests/rules/cases/<rule>.kir``): IR in, the steps, CHECK lines
on the IR out, or the refusal expected (see :mod:`kir.driver.rulecases` for the format).
Every built-in rule has a file with at least one applied case and one refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.driver.registry import load_registry
from kir.driver.rulecases import parse_cases, run_case

CASES = Path(__file__).parent / "cases"
REGISTRY = load_registry(plugins=False)


def _all_cases():
    for path in sorted(CASES.glob("*.kir")):
        for case in parse_cases(path.read_text(), str(path)):
            yield pytest.param(case, id=case.label)


@pytest.mark.parametrize("case", list(_all_cases()))
def test_case(case):
    outcome = run_case(case, REGISTRY)
    assert outcome.ok, str(outcome)


def test_every_rule_has_a_case_file_with_an_application_and_a_refusal():
    missing = []
    for name in sorted(REGISTRY):
        path = CASES / f"{name}.kir"
        if not path.exists():
            missing.append(f"{name}: no {path.name}")
            continue
        cases = parse_cases(path.read_text(), str(path))
        if not any(c.refuse is None for c in cases) or not any(c.refuse for c in cases):
            missing.append(f"{name}: needs an applied case and a refusal")
    assert not missing, "\n".join(missing)
