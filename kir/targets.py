"""Where a loaded kernel can run, and checking it there against its reference.

``interp`` is kir's numpy interpreter. Other targets (emulated Metal/CUDA, MLX on a GPU) are
registered by the backends. Every target is a function ``(loaded, inputs) -> outputs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from kir.check import CheckResult, compare_outputs
from kir.load import Loaded

Runner = Callable[[Loaded, dict], dict[str, np.ndarray]]


def run_interp(loaded: Loaded, inputs: dict) -> dict[str, np.ndarray]:
    """Run on the numpy interpreter; returns the spec's outputs."""
    from kir.interp import run_kernel

    result = run_kernel(loaded.kernel, inputs, loaded.bound.sizes)
    return {name: result[name] for name in loaded.bound.outputs}


TARGETS: dict[str, Runner] = {"interp": run_interp}


@dataclass(frozen=True)
class Outcome:
    outputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    reference_name: str
    result: CheckResult


def reference_outputs(loaded: Loaded, inputs: dict) -> tuple[dict[str, np.ndarray], str]:
    """The spec's reference function's outputs, or the interpreter's when it names none."""
    expected = loaded.bound.reference(inputs)
    if expected is not None:
        return expected, f"reference {loaded.spec.reference}"
    return run_interp(loaded, inputs), "the interpreter (the spec names no reference)"


def check_on_target(loaded: Loaded, target: str, *, seed: int = 0) -> Outcome:
    """Run ``loaded`` on ``target`` with the spec's random inputs for ``seed`` and compare."""
    from kir.errors import KirError

    if target not in TARGETS:
        raise KirError(f"unknown target {target!r}", hint=f"choose one of {', '.join(TARGETS)}")
    bound = loaded.bound
    inputs = bound.make_inputs(seed)
    expected, name = reference_outputs(loaded, copy_inputs(inputs))
    got = TARGETS[target](loaded, copy_inputs(inputs))
    result = compare_outputs(got, expected, lambda out: bound.tolerance(bound.spec.args[out].dtype))
    return Outcome(got, expected, name, result)


def copy_inputs(inputs: dict) -> dict:
    """A copy of an input set whose arrays a run may write without touching the original."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
