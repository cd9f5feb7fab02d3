"""The emitted CUDA bodies, wrapped in the signature MLX generates, compile with nvcc."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import (
    atomic_kernel,
    atomic_spec,
    block_sum_kernel,
    block_sum_spec,
    dynamic_shared_kernel,
    dynamic_shared_spec,
    inout_kernel,
    inout_spec,
)
from kir.backends import emit
from kir.backends.cuda import STANDALONE_PRELUDE, cuda_signature

pytestmark = [pytest.mark.nvcc,
              pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")]


def _translation_unit() -> str:
    cases = [(block_sum_kernel(), block_sum_spec()), (inout_kernel(), inout_spec()),
             (atomic_kernel(), atomic_spec()), (dynamic_shared_kernel(), dynamic_shared_spec())]
    headers, kernels = [], []
    for kernel, spec in cases:
        e = emit(kernel, spec.bind(), "cuda")
        headers.append(e.header)
        inputs = list(zip(e.input_names, e.input_dtypes, e.input_shapes))
        outputs = list(zip(e.output_names, e.output_dtypes))
        kernels.append(cuda_signature(e.name, inputs, outputs, e.source, "", prelude=""))
    # One translation unit keeps the test to a single nvcc run; helpers appear once each.
    unique = "\n\n".join(dict.fromkeys(h for h in headers if h))
    return STANDALONE_PRELUDE + unique + "\n" + "\n".join(kernels)


def test_emitted_cuda_compiles(tmp_path):
    source = tmp_path / "kernels.cu"
    source.write_text(_translation_unit())
    result = subprocess.run(["nvcc", "-c", "-arch=sm_90", str(source), "-o",
                             str(tmp_path / "kernels.o")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr + "\n" + source.read_text()
    assert (tmp_path / "kernels.o").stat().st_size > 0
