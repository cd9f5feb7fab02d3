"""Emitted CUDA run through MLX's cuda_kernel on an NVIDIA GPU, compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (atomic_kernel, atomic_spec, block_sum_kernel, block_sum_spec,
                      dynamic_shared_kernel, dynamic_shared_spec, inout_kernel, inout_spec)

from kir.backends import emit
from kir.backends.mlx_runner import MLXKernel, available_targets, time_kernel

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif("cuda" not in available_targets(),
                                 reason="needs MLX's CUDA back end on an NVIDIA GPU")]


def _run(kernel, spec, seed=0):
    bound = spec.bind()
    inputs = bound.make_inputs(seed)
    outputs = MLXKernel(emit(kernel, bound, "cuda"))(inputs)
    return inputs, outputs


def test_block_sum():
    inputs, out = _run(block_sum_kernel(), block_sum_spec())
    x = np.pad(inputs["x"], (0, 1024 - 1000)).reshape(4, 256)
    # The kernel's xor shuffle adds each lane's partner before the tree sum, so every value
    # is counted twice (the interpreter and the emulator agree).
    np.testing.assert_allclose(out["out"], 2 * x.sum(axis=1), rtol=1e-4, atol=1e-5)


def test_inout_encodings():
    inputs, out = _run(inout_kernel(), inout_spec())
    x = inputs["x"]
    np.testing.assert_allclose(out["out"], 2 * x)
    np.testing.assert_array_equal(out["m"], x)
    np.testing.assert_allclose(out["acc"], inputs["acc"] + np.exp(x), rtol=1e-5, atol=1e-6)


def test_atomic_and_dynamic_shared():
    inputs, out = _run(atomic_kernel(), atomic_spec())
    np.testing.assert_allclose(out["total"], [inputs["x"].sum()], rtol=1e-4)
    inputs, out = _run(dynamic_shared_kernel(), dynamic_shared_spec())
    expected = inputs["x"].reshape(3, 256)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(out["y"], expected)


def test_timing():
    bound = block_sum_spec().bind()
    k = MLXKernel(emit(block_sum_kernel(), bound, "cuda"))
    t = time_kernel(k, bound.make_inputs(0), warmup=1, repeat=5)
    assert 0 < t.min_ms <= t.median_ms <= t.max_ms and t.spread >= 0
