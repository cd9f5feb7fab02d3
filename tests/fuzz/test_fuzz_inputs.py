"""Bounded fuzzing of the specs, traces and user rules kir is handed (each part well under
30 s in CI); ``benchmarks/fuzz_inputs.py`` is the long run. The promise under test: a value,
a refusal or a KirError located in the input, never another exception, never past a limit.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.rulegen import rule_outcome, rule_source
from fuzz.specgen import spec_input, spec_outcome
from fuzz.tracegen import trace_input, trace_outcome
from kir.limits import Limits, configured

SEEDS = st.integers(0, 2**32 - 1)
QUICK = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=300, **QUICK)
@given(SEEDS)
def test_specs_bind_or_give_located_errors(tmp_path_factory, seed):
    data, overrides, kernel = spec_input(seed)
    spec_outcome(data, overrides, kernel, tmp_path_factory.mktemp("spec"))


@settings(max_examples=80, **QUICK)
@given(SEEDS)
def test_traces_replay_or_give_located_errors(tmp_path_factory, seed):
    name, data = trace_input(seed)
    trace_outcome(name, data, tmp_path_factory.mktemp("trace"))


@settings(max_examples=150, **QUICK)
@given(SEEDS)
def test_user_rules_end_in_kernels_refusals_or_rule_errors(tmp_path_factory, seed):
    start = time.monotonic()
    with configured(Limits(rule_s=0.05)):
        rule_outcome(rule_source(seed), tmp_path_factory.mktemp("rule"), seed)
    # Every guarded call stops within 0.05 s of CPU time (0.3 s of wall-clock time) of its
    # limit, and an input makes a handful of them.
    assert time.monotonic() - start < 15


# Seeds the runs found, kept as regressions (each failed before its fix): rules whose
# kernel had None for a body, whose params were 5 or None, and RULES that was not a list.
@pytest.mark.parametrize("seed", [261, 276, 1156])
def test_rule_fuzzer_regressions(tmp_path, seed):
    with configured(Limits(rule_s=0.05)):
        rule_outcome(rule_source(seed), tmp_path, seed)


# An init of -inf for an i32 buffer, a scalar of 1e308 for an f32 one: inputs silently
# wrapped or made infinite (a numpy warning, now a located spec error).
@pytest.mark.parametrize("seed", [13292, 44928, 46324])
def test_spec_fuzzer_regressions(tmp_path, seed):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert spec_outcome(*spec_input(seed), tmp_path) == "error"
