"""Each example, run as original CUDA on the CPU, matches its numpy reference in refs.py.

Uses the gpu-emulator prototype in /work/shared (g++ + a CUDA shim header), which shares no
code with kir's frontend; skipped when it or g++ is missing. kir's own emulator replaces it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from kir.spec import load_spec

PROTOTYPE = Path("/work/shared/prototypes/gpu-emulator")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = ["flash_attn", "softmax", "layernorm", "sgemm", "reduce", "selective_scan"]


@pytest.fixture(scope="module")
def gpushim():
    if not (PROTOTYPE / "gpushim.py").is_file():
        pytest.skip(f"gpu-emulator prototype not found at {PROTOTYPE}")
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    # The prototype reads these at import; its default cache sits in the (shared) prototype
    # folder, so keep compiled kernels in a temp folder that persists between test runs.
    os.environ.setdefault("SHIM_CACHE", os.path.join(tempfile.gettempdir(), "kir-gpushim-cache"))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.path.insert(0, str(PROTOTYPE))
    try:
        import gpushim as module
    except Exception as exc:  # pragma: no cover - depends on the shared folder
        pytest.skip(f"cannot import gpushim: {exc}")
    finally:
        sys.path.remove(str(PROTOTYPE))
    return module


_MODULES: dict[str, object] = {}


def _module(gpushim, name: str, spec):
    if name not in _MODULES:
        source = (EXAMPLES / f"{name}.cu").read_text()
        kernel = spec.kernel
        if spec.templates:
            values = spec.bind().template_values()
            kernel += "<" + ", ".join(str(values[t]) for t in spec.templates) + ">"
        _MODULES[name] = (gpushim.CudaModule(source, [kernel]), kernel)
    return _MODULES[name]


@pytest.mark.parametrize("sizes", ["default", "ragged"])
@pytest.mark.parametrize("name", NAMES)
def test_example_matches_reference(gpushim, monkeypatch, name: str, sizes: str) -> None:
    spec = load_spec(EXAMPLES / f"{name}.kir.toml")
    assert spec.ragged, "every example has ragged sizes"
    bound = spec.bind(spec.ragged if sizes == "ragged" else None)
    module, kernel = _module(gpushim, name, spec)
    values = bound.make_inputs(seed=7)
    expected = bound.reference(values)
    args = []
    for arg in spec.args.values():
        value = values[arg.name]
        if arg.is_scalar and arg.dtype == "f32":
            value = np.float32(value)
        args.append(value)
    # Shuffled block order: atomics and cross-block assumptions must not depend on it.
    monkeypatch.setenv("SHIM_ORDER", "2")
    module.launch(kernel, grid=bound.grid, block=bound.block, args=args,
                  shared_mem=bound.shared_bytes, mode=3)
    assert bound.outputs
    for out in bound.outputs:
        rtol, atol = bound.tolerance(spec.args[out].dtype)
        np.testing.assert_allclose(values[out], expected[out], rtol=rtol, atol=atol,
                                   err_msg=f"{name} {sizes} output {out}")
