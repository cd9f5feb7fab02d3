"""examples/mlx/rmsnorm_model.py runs as documented: a kir kernel in an mlx.nn.Module at three
shapes and two dtypes, through the MLX fallback here, and through the Metal kernel on the CPU
emulator with --emulate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kir.backends.emulate import emulator_available

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mlx" / "rmsnorm_model.py"


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_example_falls_back_on_mlx_without_a_gpu_kernel():
    out = run()
    assert out.count("via the MLX fallback") == 6 and out.rstrip().endswith("OK")


@pytest.mark.skipif(not emulator_available()[0], reason="the CPU emulator needs a C++ compiler")
def test_the_example_runs_the_metal_kernel_on_the_emulator():
    out = run("--emulate")
    assert out.count("via the GPU kernel") == 6 and out.rstrip().endswith("OK")
    for dtype in ("float32", "float16"):
        assert out.count(f"mlx.core.{dtype}") == 3
