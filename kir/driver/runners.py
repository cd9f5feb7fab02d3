"""Where a loaded kernel can run (:data:`RUNNERS`, the choices of ``kir run --target``), and
checking it there against its reference.

``interp`` is kir's numpy interpreter; ``emulate-metal`` / ``emulate-cuda`` run the emitted
source on the CPU emulator; ``emulate-original`` runs the user's own CUDA there; ``mlx`` (or
``mlx-metal`` / ``mlx-cuda``) runs the emitted kernel on this machine's GPU through MLX. Every
target is a function ``(loaded, inputs) -> outputs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from kir.driver.load import Loaded
from kir.spec.compare import CheckResult, compare_outputs

Runner = Callable[[Loaded, dict], dict[str, np.ndarray]]


def run_interp(loaded: Loaded, inputs: dict, *,
               max_steps: int | None = None) -> dict[str, np.ndarray]:
    """Run on the numpy interpreter (under the ``interp_s`` limit); returns the spec's
    outputs."""
    from kir.interp import run_kernel
    from kir.limits import current

    result = run_kernel(loaded.kernel, inputs, loaded.bound.sizes, max_steps=max_steps,
                        time_limit_s=current().interp_s)
    return {name: result[name] for name in loaded.bound.outputs}


def run_emitted(target: str, emulated: bool) -> Runner:
    """A runner that emits ``target`` source and runs it on the CPU emulator or on MLX."""
    def runner(loaded: Loaded, inputs: dict) -> dict[str, np.ndarray]:
        from kir.backends import emit

        emitted = emit(loaded.kernel, loaded.bound, target)
        if emulated:
            from kir.backends.emulated_runner import EmulatedKernel

            return EmulatedKernel(emitted)(inputs)
        from kir.backends.mlx_runner import MLXKernel

        return MLXKernel(emitted)(inputs)
    return runner


def run_original(loaded: Loaded, inputs: dict, *, timeout: float = 60.0) -> dict[str, np.ndarray]:
    """Run the user's original ``__global__`` function from ``loaded.source`` on the emulator
    with the spec's launch; returns the spec's outputs."""
    from kir.backends.emulate import run_original_cuda
    from kir.backends.emulated_runner import require_emulator
    from kir.errors import KirError
    from kir.frontends.cuda import template_params

    require_emulator()
    bound = loaded.bound
    names = list(bound.spec.args)
    args = [inputs[n] for n in names]
    templates = bound.template_values()
    params = template_params(loaded.source, str(loaded.path), loaded.kernel.name)
    missing = [p for p in params if p not in templates]
    if missing:
        raise KirError(f"the spec gives no value for template parameter {missing[0]!r}")
    results = run_original_cuda(loaded.source, loaded.kernel.name, args, grid=bound.grid,
                                block=bound.block, shared_bytes=bound.shared_bytes,
                                template_args=[templates[p] for p in params],
                                filename=str(loaded.path), timeout=timeout)
    by_name = dict(zip(names, results))
    return {name: np.asarray(by_name[name]).reshape(bound.shape(name))
            for name in bound.outputs}


def run_mlx(loaded: Loaded, inputs: dict) -> dict[str, np.ndarray]:
    """MLX on this machine's GPU: Metal on Apple Silicon, else CUDA."""
    from kir.backends.mlx_runner import available_targets, require_target

    have = available_targets()
    target = "metal" if "metal" in have else "cuda" if "cuda" in have else "metal"
    require_target(target)
    return run_emitted(target, emulated=False)(loaded, inputs)


RUNNERS: dict[str, Runner] = {
    "interp": run_interp,
    "emulate-metal": run_emitted("metal", emulated=True),
    "emulate-cuda": run_emitted("cuda", emulated=True),
    "emulate-original": run_original,
    "mlx": run_mlx,
    "mlx-metal": run_emitted("metal", emulated=False),
    "mlx-cuda": run_emitted("cuda", emulated=False),
}


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


def check_on_target(loaded: Loaded, target: str, *, seed: int = 0,
                    max_steps: int | None = None) -> Outcome:
    """Run ``loaded`` on ``target`` with the spec's random inputs for ``seed`` and compare."""
    from kir.errors import KirError

    if target not in RUNNERS:
        raise KirError(f"unknown target {target!r}", hint=f"choose one of {', '.join(RUNNERS)}")
    bound = loaded.bound
    inputs = bound.make_inputs(seed)
    expected, name = reference_outputs(loaded, copy_inputs(inputs))
    if target == "interp":
        got = run_interp(loaded, copy_inputs(inputs), max_steps=max_steps)
    else:
        got = RUNNERS[target](loaded, copy_inputs(inputs))
    result = compare_outputs(got, expected, lambda out: bound.tolerance(bound.spec.args[out].dtype))
    return Outcome(got, expected, name, result)


def copy_inputs(inputs: dict) -> dict:
    """A copy of an input set whose arrays a run may write without touching the original."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
