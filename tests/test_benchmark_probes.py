"""The hand-written kernels of ``benchmarks/matmul_probe.py`` (cited by BENCHMARKS.md round 5)
and ``benchmarks/row_probe.py`` (round 6) still build for sm_90, and each variant is the
change it names: pairing halves the tensor-core instructions, the 16-byte copy adds vector
loads, the asynchronous copies are ``cp.async``, the staged rows are in shared memory."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.benchmark_scripts import benchmark_script

PROBE = Path(__file__).parents[1] / "benchmarks" / "matmul_probe.py"

pytestmark = [pytest.mark.nvcc,
              pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")]


def _probe():
    return benchmark_script("matmul_probe")


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
    # the cp.async pipelines (round 10): N stages keep N - 1 tile copies in flight
    for stages in (2, 3):
        text = ptx[f"pair+vec+async{stages}"]
        assert "cp.async.cg.shared.global" in text and mma[f"pair+vec+async{stages}"] == 32
        assert f"cp.async.wait_group {stages - 2}" in text
    assert "cp.async" not in ptx["pair+vec"]


def test_row_probe_kernels_build_and_are_what_they_say(tmp_path, monkeypatch):
    """benchmarks/row_probe.py (BENCHMARKS.md round 6): every softmax and layer norm variant
    builds for sm_90; the staged ones declare the 32 KB row in shared memory, the others
    none that size, and every variant loads 128 bits at a time."""
    monkeypatch.syspath_prepend(str(PROBE.parent))  # it imports mlx_timing beside it
    probe = benchmark_script("row_probe")
    header = f"#include <cuda_runtime.h>\n#include <math.h>\n#define COLS {probe.COLS}\n" \
        + probe._BLOCK_REDUCE
    signatures = {"softmax": "const float* x, float* y",
                  "ln": "const float* x, const float* gamma, const float* beta, "
                        "const float* eps, float* y"}
    for family, variants in (("softmax", probe._SOFTMAX), ("ln", probe._LAYERNORM)):
        for name, (_threads, body) in variants.items():
            source = tmp_path / f"{family}_{name}.cu"
            source.write_text(header + f'extern "C" __global__ void k({signatures[family]}) '
                              f"{{\n{body}\n}}\n")
            out = tmp_path / f"{family}_{name}.ptx"
            done = subprocess.run(["nvcc", "-ptx", "-arch=sm_90", str(source), "-o", str(out)],
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, (family, name, done.stderr)
            ptx = out.read_text()
            staged = ".shared .align 16 .b8 row[32768]" in ptx or "row[32768]" in ptx
            assert staged == (name == "shared"), (family, name)
            assert "ld.global.v4.f32" in ptx or "ld.global.nc.v4.f32" in ptx, (family, name)
