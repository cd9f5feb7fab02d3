"""split-keys on decode attention written two ways: the result computes what the original
does at the spec's sizes, ragged ones and fewer keys than groups, on the interpreter and as
emitted CUDA and Metal on the CPU emulator; the search finds it on the cost model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from decode_kernels import (
    DECODE_16,
    DECODE_WARP,
    REGISTRY,
    assert_emulated_split_matches,
    assert_gpu_split_matches,
    assert_interpreted_split_matches,
    load_decode,
    split,
)

from kir.backends import TARGETS
from kir.backends.emulate import emulator_available
from kir.driver.load import load_kernel
from kir.rules import NotApplicable, context_for

REPO = Path(__file__).resolve().parents[2]


def _load(kernel: tuple, sizes: dict):
    return load_decode(kernel, sizes)


def _split(loaded, ways: int, target: str = "cuda"):
    return split(loaded, "split-keys", ways, target)


@pytest.mark.parametrize("kernel", [DECODE_16, DECODE_WARP], ids=["16-threads", "warp"])
@pytest.mark.parametrize("ways", [2, 8, 32])
def test_the_split_computes_what_the_original_does(kernel, ways):
    assert_interpreted_split_matches(kernel, "split-keys", ways)


def test_a_group_narrower_than_a_warp_gets_a_warp_of_copies():
    """A 16-thread head becomes a whole warp a group (two copies computing alike), so its
    width-16 shuffles find every lane of their warp at them whatever the trip counts of the
    other groups; group 0's first copy alone stores."""
    result = _split(_load(DECODE_16, {"H": 2, "S": 33}), 8)
    assert result.launch.block == (32 * 8, 1, 1)
    from kir.ir.printer import print_kernel

    text = print_kernel(result, locations=False)
    assert "let copy: i32 = i32(thread.x) % 32 / 16" in text
    assert "if group == 0 && copy == 0 {" in text


@pytest.mark.skipif(not emulator_available()[0], reason="no C++ compiler for the emulator")
@pytest.mark.parametrize("kernel,target", [(DECODE_16, "cuda"), (DECODE_WARP, "cuda"),
                                           (DECODE_WARP, "metal")],
                         ids=["16-threads-cuda", "warp-cuda", "warp-metal"])
def test_the_emitted_split_runs_on_the_emulator(kernel, target):
    """(The 16-thread kernel has no Metal form: its width-16 shuffle with a loop-variable
    mask is refused by the Metal back end, split or not.)"""
    assert_emulated_split_matches(kernel, "split-keys", target)


def test_a_loop_that_stores_is_refused():
    """The two-pass decode kernel writes its scores inside the key loop."""
    at = load_kernel(REPO / "tests/corpus/attention_decode.cu",
                     spec_path=REPO / "tests/corpus/attention_decode.two_pass.kir.toml")
    rule = REGISTRY["split-keys"]
    plans = [rule.plan(at.kernel, site) for site in rule.candidates(at.kernel)]
    assert plans and all(isinstance(p, NotApplicable) for p in plans)


def test_more_threads_than_a_block_may_have_are_refused():
    at = _load(DECODE_WARP, {"H": 2, "S": 8})
    ctx = dataclasses.replace(context_for(at, TARGETS["cuda"]),
                              target=dataclasses.replace(TARGETS["cuda"], max_threads=512))
    refused = REGISTRY["split-keys"].rewrite(at.kernel, "L0", {"ways": 32}, ctx)
    assert isinstance(refused, NotApplicable) and "512" in refused.reason, refused
    assert not isinstance(REGISTRY["split-keys"].rewrite(at.kernel, "L0", {"ways": 16}, ctx),
                          NotApplicable)


def test_the_modelled_search_splits_a_decode_kernel(tmp_path):
    """On the cost model (no GPU here), a search of the warp-a-head kernel at 32 heads and
    4096 keys finds the split: 32 blocks of one warp leave an Apple GPU idle. (The keys may
    also be split across blocks, split-keys-grid; its own file used to run this search
    again.)"""
    from kir.api import load

    kernel = load(DECODE_WARP[0], sizes={"H": 32, "S": 4096})
    searched = kernel.search(target="model", budget=40, seed=1, db=tmp_path / "tuning.db")
    assert any(s.startswith("split-keys{") for s in searched.steps), searched.steps
    assert searched.best_ms < 0.8 * searched.baseline_ms


@pytest.mark.cuda
@pytest.mark.parametrize("kernel", [DECODE_16, DECODE_WARP], ids=["16-threads", "warp"])
def test_on_the_gpu_matches_the_reference(kernel):
    """The split through MLX on an NVIDIA GPU, at a ragged size with many keys."""
    assert_gpu_split_matches(kernel, "split-keys", 16)
