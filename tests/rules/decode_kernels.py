"""The two decode-attention kernels the key-split rules (split-keys, split-keys-grid) are
tested on, and the checks both rules' tests make of a split."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from kir.backends import TARGETS, emit
from kir.backends.emulated_runner import EmulatedKernel
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.driver.runners import copy_inputs, run_interp
from kir.rules import apply_trace, context_for, parse_step

REPO = Path(__file__).resolve().parents[2]
REGISTRY = load_registry(plugins=False)
# (file, spec or None): a 16-thread group a head with float4 helpers and a struct (the
# corpus's inference-engine style), and a warp a head with scalar outputs.
DECODE_16 = (REPO / "tests/corpus/attention_decode.cu",
             REPO / "tests/corpus/attention_decode.online.kir.toml")
DECODE_WARP = (REPO / "tests/rules/data/decode_warp_head.cu", None)


def load_decode(kernel: tuple, sizes: dict):
    path, spec = kernel
    return load_kernel(path, spec_path=spec, sizes=sizes)


def split(loaded, rule: str, ways: int, target: str = "cuda"):
    """``loaded``'s kernel after ``rule{loop=L0,ways=...}`` (strict: it must apply)."""
    step = parse_step(f"{rule}{{loop=L0,ways={ways}}}", REGISTRY)
    return apply_trace(loaded.kernel, [step], REGISTRY, context_for(loaded, TARGETS[target]),
                       strict=True).kernel


def assert_emulated_split_matches(kernel: tuple, rule: str, target: str) -> None:
    """The split (8 ways) emitted for ``target`` computes on the CPU emulator what the
    original does on the interpreter, at a ragged size and at fewer keys than splits."""
    for sizes in ({"H": 2, "S": 33}, {"H": 1, "S": 3}):
        at = load_decode(kernel, sizes)
        inputs = at.bound.make_inputs(2)
        want = run_interp(at, copy_inputs(inputs))["out"]
        got = EmulatedKernel(emit(split(at, rule, 8, target), at.bound, target))(
            copy_inputs(inputs))["out"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(sizes))


def assert_gpu_split_matches(kernel: tuple, rule: str, ways: int, seeds: int = 1) -> None:
    """The split through MLX on an NVIDIA GPU matches the reference at a ragged size with
    many keys, on ``seeds`` sets of inputs (skipped without MLX's CUDA back end)."""
    from kir.backends.mlx_runner import MLXKernel, available_targets
    from kir.driver.runners import reference_outputs
    from kir.spec.compare import compare_outputs

    if "cuda" not in available_targets():
        pytest.skip("needs MLX's CUDA back end on an NVIDIA GPU")
    at = load_decode(kernel, {"H": 7, "S": 1001})
    run = MLXKernel(emit(split(at, rule, ways), at.bound, "cuda"))
    for seed in range(seeds):
        inputs = at.bound.make_inputs(4 + seed)
        want, _ = reference_outputs(at, copy_inputs(inputs))
        result = compare_outputs(run(copy_inputs(inputs)), want, lambda o: at.bound.tolerance(
            at.bound.spec.args[o].dtype))
        assert result.ok, (seed, result.describe())


def assert_interpreted_split_matches(kernel: tuple, rule: str, ways: int) -> None:
    """The split computes on the interpreter what the original does, at the spec's sizes,
    ragged ones, fewer keys than splits, and one key."""
    for sizes in ({"H": 3, "S": 20}, {"H": 2, "S": 33}, {"H": 2, "S": 3}, {"H": 1, "S": 1}):
        at = load_decode(kernel, sizes)
        inputs = at.bound.make_inputs(1)
        want = run_interp(at, copy_inputs(inputs))["out"]
        got = run_interp(dataclasses.replace(at, kernel=split(at, rule, ways)),
                         copy_inputs(inputs))["out"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(sizes))
