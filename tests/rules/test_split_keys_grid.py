"""split-keys-grid on decode attention written two ways: the splits run as blocks along the
grid's y axis, publish their partials to a workspace the launch names (``Launch.scratch``),
and the last block to take a ticket combines them. The result computes what the original does
at the spec's sizes, ragged ones and fewer keys than splits, on the interpreter and as
emitted CUDA and Metal on the CPU emulator, and through the generated MLX module."""

from __future__ import annotations

import dataclasses
import importlib.util

import mlx.core as mx
import numpy as np
import pytest

from decode_kernels import (
    DECODE_16,
    DECODE_WARP,
    REPO,
    REGISTRY,
    assert_emulated_split_matches,
    assert_gpu_split_matches,
    assert_interpreted_split_matches,
    load_decode,
    split,
)

from kir.backends import emit
from kir.backends.emulate import emulator_available
from kir.backends.module import write_module
from kir.driver.runners import copy_inputs, run_interp
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable

def _load(kernel: tuple, sizes: dict):
    return load_decode(kernel, sizes)


def _split(loaded, ways: int, target: str = "cuda"):
    return split(loaded, "split-keys-grid", ways, target)


@pytest.mark.parametrize("kernel", [DECODE_16, DECODE_WARP], ids=["16-threads", "warp"])
@pytest.mark.parametrize("ways", [2, 8, 32, 128])
def test_the_split_computes_what_the_original_does(kernel, ways):
    assert_interpreted_split_matches(kernel, "split-keys-grid", ways)


def test_the_splits_are_blocks_along_y_with_a_workspace_the_launch_names():
    result = _split(_load(DECODE_WARP, {"H": 2, "S": 33}), 8)
    assert result.launch.grid == ("H", "8", "1") and result.launch.block == (32, 1, 1)
    # (m, s, two outputs) a thread, for 32 threads of 8 splits of each head; a ticket a head
    assert result.launch.scratch == (("split_partials", "(H) * (1) * (1) * 1024"),
                                     ("split_tickets", "(H) * (1) * (1)"))
    text = print_kernel(result, locations=False)
    assert "fence device" in text
    assert "split_ticket = atomic.add(split_tickets[former_block], 1_u32)" in text
    assert parse_kernel(text) == dataclasses.replace(result, source=None)


@pytest.mark.skipif(not emulator_available()[0], reason="no C++ compiler for the emulator")
@pytest.mark.parametrize("kernel,target", [(DECODE_16, "cuda"), (DECODE_WARP, "cuda"),
                                           (DECODE_WARP, "metal")],
                         ids=["16-threads-cuda", "warp-cuda", "warp-metal"])
def test_the_emitted_split_runs_on_the_emulator(kernel, target):
    """(The 16-thread kernel has no Metal form: its width-16 shuffle with a loop-variable
    mask is refused by the Metal back end, split or not.)"""
    assert_emulated_split_matches(kernel, "split-keys-grid", target)


@pytest.mark.skipif(not emulator_available()[0], reason="no C++ compiler for the emulator")
def test_the_generated_module_returns_the_output_alone(tmp_path):
    """A user's module: the workspace is two more MLX outputs, allocated on each call and
    dropped from what the function returns."""
    from kir.emulate.patch import emulate_metal_kernels

    at = _load(DECODE_WARP, {"H": 3, "S": 40})
    emitted = emit(_split(at, 4, "metal"), at.bound, "metal")
    assert [a for a, _ in emitted.scratch] == ["split_partials", "split_tickets"]
    path = write_module(emitted, tmp_path / "decode_mod.py", at.bound.spec)
    inputs = at.bound.make_inputs(5)
    want = run_interp(at, copy_inputs(inputs))["out"]
    with emulate_metal_kernels(force=True):
        spec = importlib.util.spec_from_file_location("decode_mod", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        got = module.decode_warp_head(*(mx.array(inputs[n]) for n in ("q", "k_cache",
                                                                       "v_cache")))
    assert isinstance(got, mx.array) and got.shape == (3, 64)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-6)


def test_a_kernel_that_reads_its_y_block_is_refused():
    """No free grid axis: the splits would need one the kernel does not read."""
    at = _load(DECODE_WARP, {"H": 2, "S": 8})
    text = print_kernel(at.kernel).replace('grid=("H", "1", "1")', 'grid=("H", "1", "2")')
    text = text.replace("let head: i32 = i32(block.x)",
                        "let head: i32 = i32(block.x) + 0 * i32(block.y)")
    kernel = parse_kernel(text)
    rule = REGISTRY["split-keys-grid"]
    plans = [rule.plan(kernel, site) for site in rule.candidates(kernel)]
    assert plans and all(isinstance(p, NotApplicable) for p in plans)
    assert "grid axis" in plans[0].reason


@pytest.mark.cuda
@pytest.mark.parametrize("kernel", [DECODE_16, DECODE_WARP], ids=["16-threads", "warp"])
@pytest.mark.parametrize("ways", [4, 128])
def test_on_the_gpu_matches_the_reference(kernel, ways):
    """Through MLX on an NVIDIA GPU, where the splits of a head race for the last ticket,
    at a ragged size with many keys, on three sets of inputs."""
    assert_gpu_split_matches(kernel, "split-keys-grid", ways, seeds=3)


def test_a_workspace_past_32_bit_indices_is_refused():
    from kir.rules import context_for

    at = _load(DECODE_WARP, {"H": 2, "S": 8})
    rule = REGISTRY["split-keys-grid"]
    huge = dataclasses.replace(context_for(at), sizes={"H": 1 << 20, "S": 8})
    refused = rule.rewrite(at.kernel, "L0", {"ways": 32}, huge)
    assert isinstance(refused, NotApplicable) and "2^31" in refused.reason, refused
    assert not isinstance(rule.rewrite(at.kernel, "L0", {"ways": 32}, context_for(at)),
                          NotApplicable)


@pytest.mark.parametrize("kernel", [DECODE_16, DECODE_WARP], ids=["16-threads", "warp"])
def test_the_search_is_hinted_both_splits_where_they_apply(kernel):
    """Recipes fire on the proved loop, not on names: both decode kernels get the split
    across blocks (128 ways) and within a block; a softmax row kernel gets neither."""
    from kir.backends import TARGETS
    from kir.rules import context_for
    from kir.search.hints import hints

    at = _load(kernel, {"H": 3, "S": 20})
    found = {h.name: [str(s) for s in h.steps]
             for h in hints(at.kernel, REGISTRY, context_for(at, TARGETS["cuda"]))}
    assert found["flash-decoding-blocks"][0] == "split-keys-grid{loop=L0,ways=128}"
    assert found["flash-decoding-block"][0] == "split-keys{loop=L0,ways=32}"
    softmax = load_decode((REPO / "examples/softmax.cu", None), {"rows": 4, "cols": 40})
    names = {h.name for h in hints(softmax.kernel, REGISTRY,
                                   context_for(softmax, TARGETS["cuda"]))}
    assert not names & {"flash-decoding-blocks", "flash-decoding-block"}
