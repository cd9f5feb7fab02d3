"""The hand-written kernels of ``benchmarks/matmul_probe.py`` (cited by BENCHMARKS.md round 5)
still build for sm_90, and each variant is the change it names: pairing halves the
tensor-core instructions, the 16-byte copy adds vector loads."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

PROBE = Path(__file__).parents[1] / "benchmarks" / "matmul_probe.py"

pytestmark = [pytest.mark.nvcc,
              pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")]


def _probe():
    spec = importlib.util.spec_from_file_location("matmul_probe", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ptx(tmp_path: Path, probe, knobs) -> str:
    source = tmp_path / "probe.cu"
    source.write_text(probe.HELPERS + 'extern "C" __global__ void k(const float* A, '
                      "const float* B, const int* M, const int* N, const int* K, float* C) {\n"
                      + probe.source(64, 128, 16, 2, 2, *knobs) + "\n}\n")
    out = tmp_path / "probe.ptx"
    result = subprocess.run(["nvcc", "-ptx", "-arch=sm_90", str(source), "-o", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return out.read_text()


def test_every_variant_builds_and_is_what_it_says(tmp_path):
    probe = _probe()
    ptx = {name: _ptx(tmp_path, probe, knobs) for name, knobs in probe.VARIANTS.items()}
    mma = {name: text.count("mma.sync.aligned.m16n8k8") for name, text in ptx.items()}
    # 4 x 8 accumulators a warp, two k steps of 8 per 16-deep tile, unrolled.
    assert mma["emitted-like"] == 64 and mma["pair"] == 32
    assert "ld.global.v4.f32" in ptx["vec"] and "ld.global.v4.f32" not in ptx["emitted-like"]
