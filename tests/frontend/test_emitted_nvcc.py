"""The CUDA kir emits for this round's frontend kernels builds with nvcc for sm_90 (the
emulator compiles it with g++ against its own header; nvcc checks it against CUDA's:
``half2``/``make_half2``, ``__popc``, ``__int_as_float``, ``isnan`` ...). Compile only: no
GPU is needed. To PTX only: these kernels hold no inline assembly (the matrix rules' tests,
whose mma.sync errors only ptxas reports, assemble theirs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.nvcc_build import nvcc_sm90

from kir.backends import emit
from kir.driver.load import load_kernel

DATA = Path(__file__).parent / "data"
KERNELS = ["method_rows", "particles", "warp_softmax_tt", "half2_bias_act", "aligned_vector",
           "lambda_rows", "packed_types", "act_and_mul", "math_bits", "float_bits",
           "block_votes", "packed_bits", "bf16_pairs", "bit_atomics", "lane_asm", "samples_reduce",
           "short_vectors", "cub_rms", "cub_quant", "cub_offsets", "cub_scan_rows", "torch_acc",
           "cub_argmax", "llmc_idioms", "sign_split_atomics"]
SPECS = ["packed_bits_memcpy", "packed_bits_half"]  # more kernels of packed_bits.cu


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("name", KERNELS)
def test_emitted_cuda_builds_with_nvcc(name, tmp_path):
    loaded = load_kernel(DATA / f"{name}.cu")
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("spec", SPECS)
def test_emitted_cuda_of_other_kernels_builds_with_nvcc(spec, tmp_path):
    loaded = load_kernel(DATA / "packed_bits.cu", spec_path=DATA / f"{spec}.kir.toml")
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)
