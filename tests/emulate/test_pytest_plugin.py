"""The pytest plugin runs an mlx-lm-style module's own test on Linux, unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import pytest

from kir.emulate import emulate_metal_kernels, emulator_available

AVAILABLE, REASON = emulator_available()
HERE = Path(__file__).resolve().parent / "mlxlm_style"
pytestmark = [
    pytest.mark.skipif(not AVAILABLE, reason=f"CPU emulator unavailable: {REASON}"),
    pytest.mark.skipif(mx.metal.is_available(), reason="Metal is present: nothing to emulate"),
]


def run_module_tests(*options: str) -> subprocess.CompletedProcess:
    # The plugin is named explicitly (-p), so the run does not depend on the package's
    # pytest11 entry point being installed.
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-p", "kir.emulate.pytest_plugin", "-o", "python_files=check_*.py",
               "--rootdir", str(HERE), *options, str(HERE / "check_decay_scan.py")]
    return subprocess.run(command, capture_output=True, text=True, cwd=HERE, env=env)


def test_module_test_skips_without_the_option_and_passes_with_it() -> None:
    plain = run_module_tests()
    assert plain.returncode == 0 and "1 skipped" in plain.stdout, plain.stdout + plain.stderr
    emulated = run_module_tests("--emulate-metal")
    assert emulated.returncode == 0 and "1 passed" in emulated.stdout, \
        emulated.stdout + emulated.stderr


def test_context_manager_replaces_and_restores() -> None:
    original = mx.fast.metal_kernel
    with emulate_metal_kernels() as factory:
        assert mx.fast.metal_kernel is factory and mx.metal.is_available()
        kernel = mx.fast.metal_kernel(name="twice", input_names=["x"], output_names=["y"],
                                      source="uint i = thread_position_in_grid.x;\n"
                                             "y[i] = 2 * x[i];")
        (y,) = kernel(inputs=[mx.arange(8, dtype=mx.float32)], grid=(8, 1, 1),
                      threadgroup=(8, 1, 1), output_shapes=[(8,)], output_dtypes=[mx.float32])
        assert y.tolist() == [2.0 * i for i in range(8)]
    assert mx.fast.metal_kernel is original and not mx.metal.is_available()


def test_fixture(emulated_metal) -> None:
    import importlib

    sys.path.insert(0, str(HERE))
    try:
        module = importlib.import_module("decay_scan")
        module = importlib.reload(module)  # built at import: now inside the fixture
    finally:
        sys.path.remove(str(HERE))
    assert module._decay_scan_kernel is not None
    q = mx.random.normal((1, 3, 32), key=mx.random.key(1))
    state = mx.zeros((1, 32))
    y, _ = module.decay_scan(q, q, mx.ones((1, 3)), mx.ones((1, 3)), state)
    y_ref, _ = module.decay_scan_ops(q, q, mx.ones((1, 3)), mx.ones((1, 3)), state)
    assert mx.allclose(y, y_ref, rtol=1e-4, atol=1e-4).item()
