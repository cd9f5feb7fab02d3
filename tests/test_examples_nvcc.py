"""Every example is plain CUDA that nvcc accepts (compile only: no GPU needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SOURCES = sorted(EXAMPLES.glob("*.cu"))
NVCC = shutil.which("nvcc")


def test_all_six_examples_present() -> None:
    names = {p.stem for p in SOURCES}
    assert {"flash_attn", "softmax", "layernorm", "sgemm", "reduce", "selective_scan"} <= names


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_example_compiles_with_nvcc(source: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [NVCC, "-c", "-arch=sm_90", str(source), "-o", str(tmp_path / (source.stem + ".o"))],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / (source.stem + ".o")).stat().st_size > 0
