"""The frontend's test kernels on an NVIDIA GPU through MLX's CUDA back end (skipped without
one): kir's emitted CUDA, and the original kernel through CuPy where CuPy is installed, match
each kernel's numpy reference. The CPU emulator runs the same kernels in CI; the GPU is what
found that NVRTC lost the low byte of a half's bits kept in a 16-bit register
(q8_quantize: the block scale split into bytes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from kir.backends.mlx_runner import available_targets

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target

DATA = Path(__file__).parent / "data"
KERNELS = ["int8_gemv_dp4a", "int_intrinsics", "short_types", "aos_bodies", "warp_sync",
           "math_more", "q8_blocks", "q8_quantize", "half_exact", "last_block_sum",
           "retire_count_sum", "single_pass_sum"]
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif("cuda" not in available_targets(),
                                 reason="needs MLX's CUDA back end on an NVIDIA GPU")]


@pytest.mark.parametrize("name", KERNELS)
def test_emitted_cuda_on_the_gpu(name):
    outcome = check_on_target(load_kernel(DATA / f"{name}.cu"), "mlx-cuda", seed=3)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("name", KERNELS)
def test_original_through_cupy(name):
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed")
    outcome = check_on_target(load_kernel(DATA / f"{name}.cu"), "cupy-original", seed=3)
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("sizes", [{"N": 1 << 22, "BLOCKS": 528}, {"N": 1000003, "BLOCKS": 131}])
def test_the_last_block_sums_every_partial_at_scale(sizes):
    """Hundreds of blocks race for the ticket: the fence and the shared flag must hold on the
    device, run after run (the emulator runs blocks in turn and cannot race)."""
    loaded = load_kernel(DATA / "last_block_sum.cu", sizes=sizes)
    for seed in range(3):
        outcome = check_on_target(loaded, "mlx-cuda", seed=seed)
        assert outcome.result.ok, (seed, outcome.result.describe())
