"""The trace that turns examples/flash_attn.cu (FlashAttention-1) into the FlashAttention-2
schedule: parallel over query tiles, running max/sum/output accumulator in registers."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.rulecheck import context_for
from kir.driver.runners import copy_inputs, reference_outputs
from kir.interp import run_kernel
from kir.ir import For, Load, Special, Store, Var
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import apply_trace, load_trace, parse_step, save_trace
from kir.spec.compare import compare_outputs
from kir.spec.sizeexpr import eval_size_expr

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRACE_FILE = EXAMPLES / "traces" / "flash_attn.fa2.json"
# FA-1 -> FA-2 (Dao 2023, §3.1-3.2): swap the tile loops, give each query tile a block, keep
# l, m and the O row in registers across the K/V loop; then the load/exp refinements.
STEPS = ["interchange-loops{loop=L0}", "parallelize-loop{loop=L2,dim=z}",
         "promote-to-registers{buffer=l}", "promote-to-registers{buffer=m}",
         "promote-to-registers{buffer=O}", "cooperative-load{loop=L1}",
         "hoist-invariant{loop=L0}", "exp-to-exp2-fast{at=all}"]
STATE = ("l", "m", "O")


@pytest.fixture(scope="module")
def registry():
    return load_registry(plugins=False)


def _fa2(registry, sizes):
    loaded = load_kernel(EXAMPLES / "flash_attn.cu", sizes=sizes)
    steps = load_trace(TRACE_FILE, registry)
    done = apply_trace(loaded.kernel, steps, registry, context_for(loaded), strict=True)
    assert [str(s) for s in done.applied] == STEPS
    return loaded, done.kernel


def test_saved_trace_is_the_documented_one(registry, tmp_path):
    assert [str(s) for s in load_trace(TRACE_FILE, registry)] == STEPS
    kernel = load_kernel(EXAMPLES / "flash_attn.cu").kernel
    fresh = tmp_path / "t.json"
    save_trace([parse_step(s, registry) for s in STEPS], fresh, kernel=kernel)
    assert json.loads(fresh.read_text()) == json.loads(TRACE_FILE.read_text())


def test_result_is_parallel_over_query_tiles_with_state_in_registers(registry):
    loaded, out = _fa2(registry, {})
    verify(out)
    assert parse_kernel(print_kernel(out)) == out
    # One block per query tile: grid z = ceil(N / T) = 8, block.z picks the tile.
    assert eval_size_expr(out.launch.grid[2], dict(loaded.bound.sizes)) == 8
    assert any(isinstance(n, Special) and n.kind == "block" and n.axis == "z"
               for n in out.body.walk())
    loop_vars = [n.var for n in out.body.walk() if isinstance(n, For)]
    assert "i" not in loop_vars and "j" in loop_vars
    # l, m, O touch global memory only before and after the K/V loop, never inside it.
    j_loop = next(n for n in out.body.walk() if isinstance(n, For) and n.var == "j")
    inside = [n for n in j_loop.walk() if isinstance(n, (Load, Store)) and n.buffer in STATE]
    assert inside == []
    touched = {n.buffer for n in out.body.walk() if isinstance(n, (Load, Store))}
    assert set(STATE) <= touched
    # ... and the K/V loop works on the registers instead.
    read = {n.name for n in j_loop.walk() if isinstance(n, Var)}
    assert {"l_reg", "m_reg"} <= read
    assert any(isinstance(n, Store) and n.buffer == "O_reg" for n in j_loop.walk())


@pytest.mark.parametrize("sizes,run_at", [({}, {}), ({"N": 200}, {"N": 200}),
                                          ({}, {"N": 200}), ({"N": 200}, {"N": 64})])
def test_trace_keeps_results_on_the_interpreter(registry, sizes, run_at):
    """Rewritten at ``sizes``, run at ``run_at``: the query-tile grid is the spec's expression
    for Tr, not the count at the rewrite's sizes, so the kernel is right at any N."""
    loaded, out = _fa2(registry, sizes)
    assert out.launch.grid[2] == "ceil(N / T)"
    loaded = load_kernel(EXAMPLES / "flash_attn.cu", sizes=run_at)
    bound = loaded.bound
    inputs = bound.make_inputs(0)
    want, _ = reference_outputs(loaded, copy_inputs(inputs))
    got = run_kernel(out, copy_inputs(inputs), bound.sizes)
    result = compare_outputs(got, want, lambda o: bound.tolerance(bound.spec.args[o].dtype))
    assert result.ok, result.describe()


def test_fa2_runs_as_emitted_metal(registry):
    from kir.backends.emulate import emulator_available

    from kir.driver.runners import check_on_target

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    loaded, out = _fa2(registry, {})
    outcome = check_on_target(dataclasses.replace(loaded, kernel=out), "emulate-metal")
    assert outcome.result.ok, outcome.result.describe()
