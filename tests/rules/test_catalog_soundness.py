"""Soundness of the whole rule catalog on the examples.

Every loaded rule is applied at every site with every parameter value to every example, at two
small size sets (one ragged), and the result is compared with the original kernel on the
interpreter. Then hypothesis draws random rule SEQUENCES (as the search would) on each example.
No application may change the outputs or produce a kernel the verifier or interpreter rejects.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_sizes import EXAMPLES, SIZE_SETS, sweep_summary

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.rulecheck import context_for
from kir.driver.runners import copy_inputs, run_interp
from kir.ir.verify import verify
from kir.rules import apply_trace
from kir.search.genome import random_genome
from kir.spec.compare import compare_outputs

REGISTRY = load_registry(plugins=False)


def test_every_rule_site_and_parameter_keeps_every_example(capsys):
    counts, bad = sweep_summary(list(REGISTRY.values()))
    checked = counts.get("same", 0) + counts.get("changed", 0)
    with capsys.disabled():
        print(f"\ncatalog soundness: {len(REGISTRY)} rules, {checked} applications checked "
              f"at 2 sizes over {len(SIZE_SETS)} examples "
              f"({counts.get('not-applicable', 0)} not applicable)")
    assert not bad, "rule applications that changed results:\n" + "\n".join(map(str, bad))
    assert checked >= 100, f"only {checked} applications were checked: sites vanished?"


@pytest.mark.parametrize("name", sorted(SIZE_SETS))
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), length=st.integers(1, 4))
def test_random_rule_sequences_keep_results(name, seed, length):
    sizes = SIZE_SETS[name][1]  # the ragged set: the harder case
    loaded = load_kernel(Path(EXAMPLES) / name, sizes=sizes)
    ctx = context_for(loaded)
    genome = random_genome(loaded.kernel, REGISTRY, ctx, random.Random(seed), length)
    result = apply_trace(loaded.kernel, genome, REGISTRY, ctx)
    verify(result.kernel)
    if any(getattr(REGISTRY[s.rule], "precision", None) for s in result.applied):
        # tf32-matrix trades precision on purpose: the spec's tolerance decides at
        # validation (tests/rules/test_tf32_matrix.py checks it stays within its bound).
        return
    inputs = loaded.bound.make_inputs(seed % 7)
    want = run_interp(loaded, copy_inputs(inputs))
    got = run_interp(loaded.__class__(result.kernel, loaded.bound, loaded.path, loaded.source),
                     copy_inputs(inputs))
    bound = loaded.bound
    outcome = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    steps = ", ".join(str(s) for s in result.applied)
    assert outcome.ok, f"{name}: [{steps}] changed results:\n{outcome.describe()}"
