"""The trace that turns examples/selective_scan.cu into a warp-parallel scan, end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.rulecheck import context_for
from kir.interp import run_kernel
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import apply_trace, load_trace, parse_step, save_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRACE_FILE = EXAMPLES / "traces" / "selective_scan.parallel.json"
# Each (b, d, n) thread becomes a 32-lane warp scanning time; 4 sequences per 128-thread block.
STEPS = ["parallel-scan{loop=L0,seqs=4}"]


@pytest.fixture(scope="module")
def registry():
    return load_registry(plugins=False)


def test_saved_trace_is_the_documented_one(registry, tmp_path):
    steps = load_trace(TRACE_FILE, registry)
    assert [str(s) for s in steps] == STEPS
    # The file is what save_trace writes for these steps (regenerate it if this fails).
    kernel = load_kernel(EXAMPLES / "selective_scan.cu").kernel
    fresh = tmp_path / "t.json"
    save_trace([parse_step(s, registry) for s in STEPS], fresh, kernel=kernel)
    assert json.loads(fresh.read_text()) == json.loads(TRACE_FILE.read_text())


@pytest.mark.parametrize("sizes", [{}, {"L": 37}, {"B": 1, "L": 100, "D": 4, "S": 8}])
def test_trace_gives_a_parallel_scan_with_the_same_results(registry, sizes):
    loaded = load_kernel(EXAMPLES / "selective_scan.cu", sizes=sizes)
    steps = load_trace(TRACE_FILE, registry)
    done = apply_trace(loaded.kernel, steps, registry, context_for(loaded), strict=True)
    assert [str(s) for s in done.applied] == STEPS
    out = done.kernel
    verify(out)
    shuffles = [n for n in out.body.walk() if type(n).__name__ == "Shuffle"]
    assert len(shuffles) == 13  # 5 scan rounds x 2, the exclusive shift x 2, the broadcast
    bound = loaded.bound
    inputs = bound.make_inputs(0)
    want = bound.reference(dict(inputs))["y"]
    got = run_kernel(out, inputs, bound.sizes)["y"]
    rtol, atol = bound.tolerance(bound.spec.args["y"].dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_scan_round_trips_and_runs_as_emitted_metal(registry):
    """The scanned kernel prints and parses back, and its emitted Metal (simd_shuffle_up)
    matches the reference on the CPU emulator at a ragged length."""
    from kir.backends.emulate import emulator_available

    from kir.driver.runners import check_on_target

    loaded = load_kernel(EXAMPLES / "selective_scan.cu", sizes={"B": 1, "L": 37, "D": 4, "S": 8})
    out = apply_trace(loaded.kernel, load_trace(TRACE_FILE, registry), registry,
                      context_for(loaded), strict=True).kernel
    assert parse_kernel(print_kernel(out)) == out
    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    outcome = check_on_target(dataclasses.replace(loaded, kernel=out), "emulate-metal")
    assert outcome.result.ok, outcome.result.describe()
