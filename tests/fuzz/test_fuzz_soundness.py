"""Rule soundness fuzzing: random valid kernels x random rule sequences keep their meaning.

``irgen.kernels()`` draws a kernel that verifies and is defined on any input; a random genome
(as the search draws them) is applied; the result must verify and compute the same ``y`` as
the original on the interpreter. A counterexample is saved under ``regressions/`` as the
kernel's IR text, the trace and the size (``<fingerprint>.kir`` + ``.trace.json``), and every
saved one is replayed by :func:`test_saved_regressions_stay_fixed`.
(``tests/rules/test_catalog_soundness.py`` does the same on the example kernels.)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irgen import kernels

from kir.driver.registry import load_registry
from kir.interp import run_kernel
from kir.ir import Kernel
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import RuleContext, Step, apply_trace, parse_step
from kir.search.genome import random_genome
from kir.spec.compare import compare_output

REGISTRY = load_registry(plugins=False)
REGRESSIONS = Path(__file__).parent / "regressions"
# irgen's loops run at most a few hundred iterations: a rewrite that loops longer is wrong, and
# the default limit (10^7) would spend minutes proving it.
MAX_STEPS = 100_000
RTOL, ATOL = 1e-4, 1e-5  # f32 defaults; fast-math rules stay inside them on irgen's ranges


def _inputs(kernel: Kernel, n: int, seed: int) -> dict[str, np.ndarray | int]:
    rng = np.random.default_rng(seed)
    args: dict[str, np.ndarray | int] = {}
    for param in kernel.params:
        if param.name == "n":
            args["n"] = n
        elif param.name == "y":
            args["y"] = np.zeros(n, np.float32)
        else:
            args[param.name] = rng.uniform(-2, 2, n).astype(np.float32)
    return args


def _check(kernel: Kernel, steps: list[Step], n: int, seed: int) -> str | None:
    """Why applying ``steps`` to ``kernel`` is unsound at size ``n``, or None."""
    ctx = RuleContext(sizes={"N": n}, scalars={"n": n})
    try:
        result = apply_trace(kernel, steps, REGISTRY, ctx)
        verify(result.kernel)
    except Exception as exc:  # noqa: BLE001 - a rule crash or an unverifiable result
        return f"{type(exc).__name__}: {exc}"
    args = _inputs(kernel, n, seed)
    want = run_kernel(kernel, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                               for k, v in args.items()}, {"N": n},
                      max_steps=MAX_STEPS)["y"]
    try:
        got = run_kernel(result.kernel, args, {"N": n}, max_steps=MAX_STEPS)["y"]
    except Exception as exc:  # noqa: BLE001
        return f"rewritten kernel fails to run: {type(exc).__name__}: {exc}"
    outcome = compare_output("y", got, want, RTOL, ATOL)
    return None if outcome.ok else outcome.describe()


def _save(kernel: Kernel, steps: list[Step], n: int, seed: int, why: str) -> Path:
    REGRESSIONS.mkdir(exist_ok=True)
    stem = REGRESSIONS / kernel.fingerprint()[:16]
    stem.with_suffix(".kir").write_text(print_kernel(kernel))
    stem.with_suffix(".trace.json").write_text(json.dumps(
        {"steps": [str(s) for s in steps], "n": n, "seed": seed, "why": why}, indent=2) + "\n")
    return stem


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels(), st.integers(0, 2**32 - 1), st.sampled_from([1, 37, 64, 100]))
def test_random_rule_sequences_keep_random_kernels(kernel, seed, n):
    rng = random.Random(seed)
    ctx = RuleContext(sizes={"N": n}, scalars={"n": n})
    steps = list(random_genome(kernel, REGISTRY, ctx, rng, rng.randint(1, 5)))
    why = _check(kernel, steps, n, seed)
    if why is not None:
        where = _save(kernel, steps, n, seed, why)
        pytest.fail(f"[{', '.join(map(str, steps))}] at n={n} is unsound: {why}\n"
                    f"saved as {where}.kir / .trace.json")


def _saved() -> list[Path]:
    return sorted(REGRESSIONS.glob("*.kir")) if REGRESSIONS.is_dir() else []


@pytest.mark.parametrize("path", _saved(), ids=lambda p: p.stem)
def test_saved_regressions_stay_fixed(path):
    kernel = parse_kernel(path.read_text(), filename=str(path))
    trace = json.loads(path.with_suffix(".trace.json").read_text())
    steps = [parse_step(text, REGISTRY) for text in trace["steps"]]
    assert _check(kernel, steps, trace["n"], trace["seed"]) is None
