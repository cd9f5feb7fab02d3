"""split-keys on decode attention written two ways: the result computes what the original
does at the spec's sizes, ragged ones and fewer keys than groups, on the interpreter and as
emitted CUDA and Metal on the CPU emulator; the search finds it on the cost model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from kir.backends import TARGETS, emit
from kir.backends.emulate import emulator_available
from kir.backends.emulated_runner import EmulatedKernel
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import copy_inputs, run_interp
from kir.rules import NotApplicable, apply_trace, context_for, parse_step

REPO = Path(__file__).resolve().parents[2]
REGISTRY = load_registry(plugins=False)
# (file, spec or None, kernel): a 16-thread group a head with float4 helpers and a struct
# (the corpus's inference-engine style), and a warp a head with scalar outputs.
DECODE_16 = (REPO / "tests/corpus/attention_decode.cu",
             REPO / "tests/corpus/attention_decode.online.kir.toml")
DECODE_WARP = (REPO / "tests/rules/data/decode_warp_head.cu", None)


def _load(kernel: tuple, sizes: dict):
    path, spec = kernel
    return load_kernel(path, spec_path=spec, sizes=sizes)


def _split(loaded, ways: int, target: str = "cuda"):
    step = parse_step(f"split-keys{{loop=L0,ways={ways}}}", REGISTRY)
    return apply_trace(loaded.kernel, [step], REGISTRY, context_for(loaded, TARGETS[target]),
                       strict=True).kernel


@pytest.mark.parametrize("kernel", [DECODE_16, DECODE_WARP], ids=["16-threads", "warp"])
@pytest.mark.parametrize("ways", [2, 8, 32])
def test_the_split_computes_what_the_original_does(kernel, ways):
    for sizes in ({"H": 3, "S": 20}, {"H": 2, "S": 33}, {"H": 2, "S": 3}, {"H": 1, "S": 1}):
        at = _load(kernel, sizes)
        split = _split(at, ways)
        inputs = at.bound.make_inputs(1)
        want = run_interp(at, copy_inputs(inputs))["out"]
        got = run_interp(dataclasses.replace(at, kernel=split), copy_inputs(inputs))["out"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(sizes))


def test_a_group_narrower_than_a_warp_gets_a_warp_of_copies():
    """A 16-thread head becomes a whole warp a group (two copies computing alike), so its
    width-16 shuffles find every lane of their warp at them whatever the trip counts of the
    other groups; group 0's first copy alone stores."""
    split = _split(_load(DECODE_16, {"H": 2, "S": 33}), 8)
    assert split.launch.block == (32 * 8, 1, 1)
    from kir.ir.printer import print_kernel

    text = print_kernel(split, locations=False)
    assert "let copy: i32 = i32(thread.x) % 32 / 16" in text
    assert "if group == 0 && copy == 0 {" in text


@pytest.mark.skipif(not emulator_available()[0], reason="no C++ compiler for the emulator")
@pytest.mark.parametrize("kernel,target", [(DECODE_16, "cuda"), (DECODE_WARP, "cuda"),
                                           (DECODE_WARP, "metal")],
                         ids=["16-threads-cuda", "warp-cuda", "warp-metal"])
def test_the_emitted_split_runs_on_the_emulator(kernel, target):
    """(The 16-thread kernel has no Metal form: its width-16 shuffle with a loop-variable
    mask is refused by the Metal back end, split or not.)"""
    for sizes in ({"H": 2, "S": 33}, {"H": 1, "S": 3}):
        at = _load(kernel, sizes)
        split = _split(at, 8, target)
        inputs = at.bound.make_inputs(2)
        want = run_interp(at, copy_inputs(inputs))["out"]
        got = EmulatedKernel(emit(split, at.bound, target))(copy_inputs(inputs))["out"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(sizes))


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
    4096 keys finds the split: 32 blocks of one warp leave an Apple GPU idle."""
    from kir.api import load

    kernel = load(DECODE_WARP[0], sizes={"H": 32, "S": 4096})
    searched = kernel.search(target="model", budget=40, seed=1, db=tmp_path / "tuning.db")
    assert any(s.startswith("split-keys{") for s in searched.steps), searched.steps
    assert searched.best_ms < 0.8 * searched.baseline_ms


@pytest.mark.cuda
@pytest.mark.parametrize("kernel", [DECODE_16, DECODE_WARP], ids=["16-threads", "warp"])
def test_on_the_gpu_matches_the_reference(kernel):
    """The split through MLX on an NVIDIA GPU, at a ragged size with many keys."""
    from kir.backends.mlx_runner import MLXKernel, available_targets
    from kir.driver.runners import reference_outputs
    from kir.spec.compare import compare_outputs

    if "cuda" not in available_targets():
        pytest.skip("needs MLX's CUDA back end on an NVIDIA GPU")
    at = _load(kernel, {"H": 7, "S": 1001})
    inputs = at.bound.make_inputs(4)
    want, _ = reference_outputs(at, copy_inputs(inputs))
    got = MLXKernel(emit(_split(at, 16), at.bound, "cuda"))(copy_inputs(inputs))
    result = compare_outputs(got, want, lambda o: at.bound.tolerance(
        at.bound.spec.args[o].dtype))
    assert result.ok, result.describe()
