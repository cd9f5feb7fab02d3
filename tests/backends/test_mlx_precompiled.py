"""CUDA kernels compiled by kir (NVRTC on a lean prelude) instead of on MLX's first call.

Here (no GPU, no NVRTC library): the translation unit builds with nvcc for sm_90 for kernels
that use 16-bit floats, bit tricks, shuffles and the matrix rules' inline assembly, and it
names each kernel by its text. On an NVIDIA GPU (marked ``cuda``): the binary computes
exactly what MLX's own compile of the same kernel computes, a kernel the lean prelude cannot
compile falls back to MLX's path, and NVRTC's log reaches the error."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kir.backends import TARGETS, emit
from kir.backends.mlx_precompiled import precompiled_source
from kir.backends.mlx_runner import available_targets
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.errors import KirError
from kir.rules import apply_trace, context_for
from kir.search.hints import hints

ROOT = Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "tests" / "frontend" / "data"
# 16-bit pairs, bf16, bit casts and counts, warp votes, a shuffle softmax, vector loads.
FRONTEND_KERNELS = ["half2_bias_act", "bf16_pairs", "math_bits", "float_bits", "block_votes",
                    "warp_softmax_tt", "aligned_vector", "packed_types"]

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
needs_gpu = pytest.mark.skipif("cuda" not in available_targets(),
                               reason="needs MLX's CUDA back end on an NVIDIA GPU")


def _emitted(path: Path, sizes: dict | None = None, hint: int | None = None):
    """``path``'s kernel emitted for CUDA, or the kernel of its ``hint``-th search hint."""
    loaded = load_kernel(path, sizes=sizes or {})
    kernel = loaded.kernel
    if hint is not None:
        registry = load_registry()
        ctx = context_for(loaded, TARGETS["cuda"])
        steps = hints(kernel, registry, ctx)[hint].steps
        kernel = apply_trace(kernel, list(steps), registry, ctx, strict=True).kernel
    return loaded, emit(kernel, loaded.bound, "cuda")


def _nvcc(source: str, tmp_path: Path, assemble: bool) -> None:
    path = tmp_path / "ahead.cu"
    path.write_text(source)
    out = tmp_path / ("ahead.cubin" if assemble else "ahead.ptx")
    done = subprocess.run(["nvcc", "-cubin" if assemble else "-ptx", "-arch=sm_90", str(path),
                           "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + "\n" + source


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("name", FRONTEND_KERNELS)
def test_the_lean_unit_builds_with_nvcc(name, tmp_path):
    _, emitted = _emitted(FRONTEND / f"{name}.cu")
    _nvcc(precompiled_source(emitted)[0], tmp_path, assemble=False)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("example,sizes", [
    ("sgemm.cu", {"M": 256, "N": 256, "K": 256}),  # a pipelined warp-tiled GEMM, mma.sync
    ("flash_attn.cu", {"N": 128}),  # mma-attention's template
])
def test_the_first_hint_of_a_tensor_core_kernel_assembles(example, sizes, tmp_path):
    _, emitted = _emitted(ROOT / "examples" / example, sizes, hint=0)
    _nvcc(precompiled_source(emitted)[0], tmp_path, assemble=True)


def test_16_bit_headers_only_where_the_kernel_uses_those_types():
    _, plain = _emitted(ROOT / "examples" / "softmax.cu")
    _, halves = _emitted(FRONTEND / "half2_bias_act.cu")
    _, bf16 = _emitted(FRONTEND / "bf16_pairs.cu")
    assert "cuda_fp16.h" not in precompiled_source(plain)[0]
    assert "cuda_bf16.h" not in precompiled_source(plain)[0]
    assert "#include <cuda_fp16.h>" in precompiled_source(halves)[0]
    assert "#include <cuda_bf16.h>" in precompiled_source(bf16)[0]


def test_the_kernel_is_named_by_its_text():
    """MLX keeps precompiled modules by name for the life of the process: two kernels must
    never share one, and the same kernel keeps its name."""
    _, emitted = _emitted(ROOT / "examples" / "softmax.cu")
    source, name = precompiled_source(emitted)
    assert f'extern "C" __global__ void {name}(' in source
    assert precompiled_source(emitted)[1] == name
    other = dataclasses.replace(emitted, source=emitted.source + "\n// another body")
    assert precompiled_source(other)[1] != name


def test_template_arguments_are_left_to_mlx():
    _, emitted = _emitted(ROOT / "examples" / "softmax.cu")
    with pytest.raises(KirError, match="template"):
        precompiled_source(dataclasses.replace(emitted, template=(("T", 4),)))


def test_no_nvrtc_library_is_a_clear_error(monkeypatch):
    from kir.backends import nvrtc

    monkeypatch.setattr(nvrtc, "_loaded_library", lambda stem: None)
    with pytest.raises(KirError, match="no libnvrtc.so library") as raised:
        nvrtc._library("libnvrtc.so", ("libkir-no-such-nvrtc.so",))
    assert "mlx[cuda]" in raised.value.hint


# On an NVIDIA GPU.

def _outputs(built, inputs) -> list[np.ndarray]:
    return [np.array(out) for out in built(inputs).values()]


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("path,sizes,hint", [
    (ROOT / "examples" / "softmax.cu", {}, None),
    (ROOT / "examples" / "sgemm.cu", {"M": 256, "N": 256, "K": 256}, 0),
    (ROOT / "examples" / "flash_attn.cu", {"N": 128}, 0),
    (FRONTEND / "half2_bias_act.cu", {}, None),
    (FRONTEND / "bf16_pairs.cu", {}, None),
], ids=["softmax", "sgemm-pipelined", "attention-mma", "half2", "bf16"])
def test_compiled_by_kir_computes_what_mlx_compiled_computes(path, sizes, hint):
    from kir.backends.mlx_precompiled import PrecompiledKernel
    from kir.backends.mlx_runner import MLXKernel

    loaded, emitted = _emitted(path, sizes, hint)
    inputs = loaded.bound.make_inputs(0)
    ahead = PrecompiledKernel(emitted)
    assert ahead.compiled.image and ahead.compiled.seconds > 0
    for mine, mlx in zip(_outputs(ahead, inputs), _outputs(MLXKernel(emitted), inputs)):
        np.testing.assert_array_equal(mine, mlx)


@pytest.mark.cuda
@needs_gpu
def test_a_kernel_the_lean_prelude_cannot_compile_goes_through_mlx():
    """A header that uses libc++ from MLX's own headers: NVRTC refuses the lean unit, and the
    runner builds MLX's kernel instead (which compiles and runs)."""
    from kir.backends.mlx_runner import MLXKernel
    from kir.measure.gpu.jobs import MLXRunner

    loaded, emitted = _emitted(ROOT / "examples" / "softmax.cu")
    needs_mlx = dataclasses.replace(
        emitted, header="__device__ float kir_big() "
                        "{ return cuda::std::numeric_limits<float>::max(); }\n")
    built = MLXRunner().build_ahead(needs_mlx)
    assert type(built) is MLXKernel and not built.compiled_ahead
    assert MLXRunner().build_ahead(emitted).compiled_ahead
    inputs = loaded.bound.make_inputs(0)
    expected = loaded.bound.reference(dict(inputs))
    np.testing.assert_allclose(built(inputs)["y"], expected["y"], rtol=1e-4, atol=1e-6)


@pytest.mark.cuda
@needs_gpu
def test_nvrtc_says_what_is_wrong():
    from kir.backends.nvrtc import nvrtc

    with pytest.raises(KirError, match="kir_undeclared"):
        nvrtc().compile('extern "C" __global__ void k(float* y) { y[0] = kir_undeclared; }')
