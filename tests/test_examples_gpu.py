"""The six examples on an NVIDIA GPU through MLX's CUDA back end (skipped without one):
the emitted CUDA (no rewrites) matches kir's interpreter at the default and ragged sizes, the
ORIGINAL kernel through CuPy (when CuPy is installed) matches the numpy reference, and the
generated CUDA-target module, imported and called with mx.arrays, gives the same results."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from kir.backends import emit
from kir.backends.mlx_runner import MLXKernel, available_targets
from kir.backends.module import write_module

from kir.driver.load import load_kernel
from kir.driver.runners import copy_inputs, run_interp
from kir.spec.compare import compare_outputs

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["flash_attn", "softmax", "layernorm", "sgemm", "reduce", "selective_scan"]
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif("cuda" not in available_targets(),
                                 reason="needs MLX's CUDA back end on an NVIDIA GPU")]


def _tolerance(loaded):
    return lambda out: loaded.bound.tolerance(loaded.bound.spec.args[out].dtype)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("ragged", [False, True], ids=["default", "ragged"])
def test_emitted_cuda_matches_the_interpreter(name, ragged):
    path = ROOT / "examples" / f"{name}.cu"
    sizes = dict(load_kernel(path).spec.ragged) if ragged else {}
    loaded = load_kernel(path, sizes=sizes)
    inputs = loaded.bound.make_inputs(5)
    want = run_interp(loaded, copy_inputs(inputs))
    got = MLXKernel(emit(loaded.kernel, loaded.bound, "cuda"))(copy_inputs(inputs))
    result = compare_outputs(got, want, _tolerance(loaded))
    assert result.ok, result.describe()


@pytest.mark.parametrize("name", NAMES)
def test_original_through_cupy_matches_the_reference(name):
    pytest.importorskip("cupy", reason="CuPy runs the original kernel unmodified")
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_baselines import CupyOriginal

    loaded = load_kernel(ROOT / "examples" / f"{name}.cu")
    inputs = loaded.bound.make_inputs(6)
    result = compare_outputs(CupyOriginal(loaded)(inputs),
                             loaded.bound.reference(copy_inputs(inputs)), _tolerance(loaded))
    assert result.ok, result.describe()


@pytest.mark.parametrize("name", ["softmax", "flash_attn"])
def test_generated_cuda_module_gives_correct_results(name, tmp_path):
    import mlx.core as mx

    loaded = load_kernel(ROOT / "examples" / f"{name}.cu")
    emitted = emit(loaded.kernel, loaded.bound, "cuda")
    path = write_module(emitted, tmp_path / f"{name}_kir.py", loaded.spec)
    spec = importlib.util.spec_from_file_location(f"{name}_kir", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inputs = loaded.bound.make_inputs(7)
    buffers = [name_ for name_, a in loaded.spec.args.items()
               if a.is_buffer and a.role in ("in", "inout")
               and not (a.role == "inout" and a.init not in ("input", None))]
    outputs = getattr(module, loaded.kernel.name)(*[mx.array(inputs[b]) for b in buffers])
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    want = loaded.bound.reference(copy_inputs(inputs))
    got = {o: np.array(v) for o, v in zip(loaded.bound.outputs, outputs)}
    result = compare_outputs(got, want, _tolerance(loaded))
    assert result.ok, result.describe()
