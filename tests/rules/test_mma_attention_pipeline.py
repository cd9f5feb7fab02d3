"""mma-attention with two stages: the next K/V tile copied (asynchronously, for f32) while
the current one is multiplied. Right at ragged and tiny sizes on the interpreter for every
kernel style (whose model of asynchronous copies lands them as late as the waits allow), on
the emulated CUDA target, in dynamic shared memory where the stages exceed CUDA's 48 KB of
arrays, and on the GPU where one is present."""

from __future__ import annotations

import dataclasses

import pytest
from loop_sizes import EXAMPLES
from test_mma_attention import KERNELS, RULE, _agrees, _rewritten, gpu_matches_reference

from kir.backends import TARGETS, emit
from kir.driver.load import load_kernel
from kir.ir import Alloc, AsyncWait, Store, transform
from kir.rules import NotApplicable, context_for


def _step(config: str) -> str:
    return f"mma-attention{{at=kernel,config={config},stages=2}}"


@pytest.mark.parametrize("path", list(KERNELS), ids=lambda p: p.stem)
@pytest.mark.parametrize("config", ["32x32/2", "64x16/4"])
def test_two_stages_are_right_at_other_sizes(path, config):
    out = _rewritten(path, [_step(config)])
    copies = [n for n in out.body.walk() if isinstance(n, Store) and n.asynchronous]
    f32 = load_kernel(path).bound.spec.args[next(iter(load_kernel(path).bound.spec.args))]
    assert len(copies) == (2 if f32.dtype == "f32" else 0)  # K's and V's 16-byte copies
    assert [n.pending for n in out.body.walk() if isinstance(n, AsyncWait)] == [0]
    for sizes in KERNELS[path]:
        _agrees(path, out, sizes)


def test_a_wait_that_leaves_the_tile_in_flight_is_caught():
    out = _rewritten(EXAMPLES / "flash_attn.cu", [_step("32x32/2")])

    def lenient(n):
        return dataclasses.replace(n, pending=1) if isinstance(n, AsyncWait) else None
    late = dataclasses.replace(out, body=transform(out.body, lenient))
    with pytest.raises(AssertionError, match="MISMATCH"):
        _agrees(EXAMPLES / "flash_attn.cu", late, KERNELS[EXAMPLES / "flash_attn.cu"][0])


def test_emitted_for_cuda_on_the_emulator():
    from kir.backends.emulate import emulator_available
    from kir.driver.runners import RUNNERS

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    # CUDA only: two stages of 32 or more keys at head dimension 64 exceed Metal's 32 KB
    # (refused there, test below), and Metal copies synchronously anyway.
    # (One build, on 3xTF32: the emulator compiles this kernel for 13 s on a 2-core machine.)
    path = EXAMPLES / "flash_attn.cu"
    out = _rewritten(path, [_step("32x32/2"), "tf32x3-matrix{at=all}"], "cuda")
    _agrees(path, out, KERNELS[path][0], RUNNERS["emulate-cuda"])
    assert "kir_copy_async<16>(" in emit(out, load_kernel(path).bound, "cuda").source


def test_stages_over_48_kb_take_dynamic_shared_memory_on_cuda_only():
    loaded = load_kernel(EXAMPLES / "flash_attn.cu")
    out = RULE.rewrite(loaded.kernel, "kernel", {"config": "64x32/4", "stages": 2},
                       context_for(loaded, TARGETS["cuda"]))
    assert out.launch.shared_bytes == 2 * 32 * (2 * 64 + 12) * 4  # two stages of K and V
    assert [a.name for a in out.body.walk() if isinstance(a, Alloc) and a.dynamic] == ["fa_T"]
    # 35 KB dynamic beside 17 KB static: MLX is asked for over 48000 dynamic bytes, its
    # trigger for raising the kernel's limit (kir.backends.emitter._dynamic_request).
    assert emit(out, loaded.bound, "cuda").shared_memory > 48000
    _agrees(EXAMPLES / "flash_attn.cu", out, KERNELS[EXAMPLES / "flash_attn.cu"][0])
    small = RULE.rewrite(loaded.kernel, "kernel", {"config": "64x16/4", "stages": 2},
                         context_for(loaded, TARGETS["cuda"]))
    assert small.launch.shared_bytes == 0
    metal = RULE.rewrite(loaded.kernel, "kernel", {"config": "64x32/4", "stages": 2},
                         context_for(loaded, TARGETS["metal"]))
    assert isinstance(metal, NotApplicable) and "shared memory" in metal.reason


@pytest.mark.cuda
@pytest.mark.parametrize("config", ["64x16/4", "64x32/4"])
@pytest.mark.parametrize("path", [EXAMPLES / "flash_attn.cu", *list(KERNELS)[3:]],
                         ids=lambda p: p.stem)
def test_on_the_gpu_matches_the_reference(path, config):
    """cp.async K/V tiles on an NVIDIA GPU at a ragged size (at 64x32/4 in dynamic shared
    memory beside 17 KB of static scratch: the launch MLX raises the limit for only when
    the emitter asks for more than 48000 dynamic bytes); the 16-bit kernels' synchronous
    copies in two stages."""
    gpu_matches_reference(path, [_step(config), "tf32x3-matrix{at=all}"])
