"""warp-tile-matmul's software pipeline (``stages`` 2 and 3): whole tiles copied by
asynchronous copies into one stage while another is multiplied. Right at ragged, larger and
tiny sizes on the interpreter (which lands each copy as late as its wait allows, so a wait
one group too lenient reads stale tiles and is caught), on both emulated targets, compiled to
``cp.async`` for sm_90, a plain copy on Metal, refused over the target's shared memory, and on
the GPU where one is present."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from test_warp_tile_matmul import (DATA, EXAMPLES, KERNELS, OTHER_SIZES, RULE, _agrees,
                                   _rewritten, gpu_matches_reference)

from kir.backends import TARGETS, emit
from kir.driver.load import load_kernel
from kir.driver.runners import copy_inputs, run_interp
from kir.ir import Alloc, AsyncWait, Store, transform
from kir.rules import NotApplicable, context_for
from kir.spec.compare import compare_outputs
from tests.nvcc_build import nvcc_sm90

# Block tiles whose pipelines fit CUDA's 48 KB of static shared memory at 2 and 3 stages.
PIPELINED = ["64x64x16/2x2", "32x64x16/1x2", "128x64x16/2x2", "64x128x16/2x2"]
LINEAR = DATA / "linear_nt.cu"  # B stored N x K: the transposed tile's copies


def _step(config: str, stages: int) -> str:
    return f"warp-tile-matmul{{loop=L1,config={config},stages={stages}}}"


@pytest.mark.parametrize("path", [*KERNELS, LINEAR], ids=lambda p: p.stem)
@pytest.mark.parametrize("config", PIPELINED)
@pytest.mark.parametrize("stages", [2, 3])
def test_every_pipelined_tile_is_right_at_other_sizes(path, config, stages):
    _, out = _rewritten(path, [_step(config, stages)])
    copies = [n for n in out.body.walk() if isinstance(n, Store) and n.asynchronous]
    assert len(copies) == 2  # one 16-byte copy of A's tile, one of B's
    assert [n.pending for n in out.body.walk() if isinstance(n, AsyncWait)] == [stages - 2]
    sizes = OTHER_SIZES if path != LINEAR else [{"BT": 33, "OC": 97, "C": 65},
                                                 {"BT": 136, "OC": 264, "C": 40}]
    for size in sizes:
        _agrees(path, out, size)


def _waiting_for(kernel, pending: int):
    def wait(n):
        return dataclasses.replace(n, pending=pending) if isinstance(n, AsyncWait) else None
    return dataclasses.replace(kernel, body=transform(kernel.body, wait))


@pytest.mark.parametrize("stages", [2, 3])
def test_a_wait_that_leaves_the_tile_in_flight_is_caught(stages):
    """The interpreter lands copies only when a wait requires it: waiting for one group
    fewer multiplies tiles that have not arrived (NaN, shared memory's fill)."""
    _, out = _rewritten(EXAMPLES / "sgemm.cu", [_step("64x64x16/2x2", stages)])
    late = _waiting_for(out, stages - 1)
    sized = load_kernel(EXAMPLES / "sgemm.cu", sizes={"M": 128, "N": 128, "K": 64})
    inputs = sized.bound.make_inputs(1)
    got = run_interp(dataclasses.replace(sized, kernel=late), copy_inputs(inputs))
    want = sized.bound.reference(copy_inputs(inputs))
    assert not compare_outputs(got, want, lambda o: sized.bound.tolerance("f32")).ok
    _agrees(EXAMPLES / "sgemm.cu", out, {"M": 128, "N": 128, "K": 64})  # the built one is right


def test_emitted_for_both_targets_on_the_emulator():
    from kir.backends.emulate import emulator_available
    from kir.driver.runners import RUNNERS

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    step = _step("32x64x16/1x2", 2)
    for target, steps in (("cuda", [step]), ("cuda", [step, "tf32-matrix{at=all}"]),
                          ("metal", [step])):
        _, out = _rewritten(EXAMPLES / "sgemm.cu", steps, target)
        for sizes in (OTHER_SIZES[0], {"M": 64, "N": 128, "K": 48}):  # ragged; whole tiles
            _agrees(EXAMPLES / "sgemm.cu", out, sizes, RUNNERS[f"emulate-{target}"])
    # Three stages of 128x128 tiles: in dynamic shared memory.
    _, out = _rewritten(EXAMPLES / "sgemm.cu", [_step("128x128x16/2x2", 3)])
    assert out.launch.shared_bytes > 48 * 1024
    _agrees(EXAMPLES / "sgemm.cu", out, {"M": 136, "N": 264, "K": 40}, RUNNERS["emulate-cuda"])


def test_cuda_copies_asynchronously_and_metal_synchronously():
    loaded, cuda = _rewritten(EXAMPLES / "sgemm.cu", [_step("64x64x16/2x2", 2)])
    emitted = emit(cuda, loaded.bound, "cuda")
    source = emitted.source
    assert source.count("kir_copy_async<16>(") == 2 and "kir_copy_wait<0>();" in source
    assert "cp.async.cg.shared.global" in emitted.header  # the helper
    loaded, metal = _rewritten(EXAMPLES / "sgemm.cu", [_step("64x64x16/2x2", 2)], "metal")
    source = emit(metal, loaded.bound, "metal").source
    assert "kir_copy" not in source and "cp.async" not in source
    assert source.count("(const device float4*)") == 2  # the same copies, as loads and stores


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compiles_to_cp_async_for_sm90(tmp_path):
    loaded, out = _rewritten(EXAMPLES / "sgemm.cu", [_step("128x128x16/2x2", 2),
                                                     "tf32-matrix{at=all}"])
    ptx = nvcc_sm90(emit(out, loaded.bound, "cuda"), tmp_path, ptx=True)
    # 128x16 and 16x128 tiles over 128 threads, 4 floats a copy: 4 + 4 copies, unrolled.
    assert ptx.count("cp.async.cg.shared.global") == 8
    assert ptx.count("cp.async.wait_group 0") == 1 and ptx.count("cp.async.commit_group") == 1


def test_a_pipeline_over_static_shared_memory_takes_dynamic_memory_on_cuda():
    """Over CUDA's 48 KB of static arrays the stages move to dynamic shared memory (up to
    227 KB); Metal has 32 KB in all and refuses."""
    loaded = load_kernel(EXAMPLES / "sgemm.cu")
    cuda = context_for(loaded, TARGETS["cuda"])
    small = RULE.rewrite(loaded.kernel, "L1", {"config": "128x128x16/2x2", "stages": 2}, cuda)
    assert small.launch.shared_bytes == 0  # 37 KB of tiles: static
    for config, stages, tiles in (("128x128x16/2x2", 3, 3 * (128 * 20 + 16 * 136) * 4),
                                  ("128x128x32/2x4", 2, 2 * (128 * 36 + 32 * 136) * 4)):
        out = RULE.rewrite(loaded.kernel, "L1", {"config": config, "stages": stages}, cuda)
        assert out.launch.shared_bytes == tiles > 48 * 1024
        assert [a.name for a in out.body.walk() if isinstance(a, Alloc) and a.dynamic] == \
            ["wt_S"]
        _agrees(EXAMPLES / "sgemm.cu", out, {"M": 136, "N": 264, "K": 40})
    metal = RULE.rewrite(loaded.kernel, "L1", {"config": "128x128x16/2x2", "stages": 2},
                         context_for(loaded, TARGETS["metal"]))
    assert isinstance(metal, NotApplicable) and "shared memory" in metal.reason


@pytest.mark.cuda
@pytest.mark.parametrize("config,stages", [("64x64x16/2x2", 3), ("128x128x16/2x2", 2),
                                           ("128x128x16/2x2", 3), ("128x128x32/2x4", 2)])
def test_on_the_gpu_matches_the_reference(config, stages):
    """cp.async, its waits and the edge tiles' synchronous copies on an NVIDIA GPU (the last
    two in dynamic shared memory over 48 KB), at a size with whole and edge tiles and at one
    of whole tiles only."""
    gpu_matches_reference([_step(config, stages), "tf32-matrix{at=all}"])
