"""Small CUDA outputs are allocated padded (kir.backends.allocation): the policy itself, the
generated module's launch (MLX's cuda_kernel replaced by a fake that records the call — no
GPU here), and the emulated CUDA run of a reduction ending in one atomicAdd per block."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from kir.backends import emit
from kir.backends.allocation import allocated_shape, module_source, unpad_output
from kir.backends.module import write_module
from kir.driver.load import load_kernel

ROOT = Path(__file__).resolve().parents[2]


def test_policy_pads_only_small_cuda_outputs():
    assert allocated_shape("cuda", (1,), 4) == (64,)          # one float: the small pool
    assert allocated_shape("cuda", (2,), 4) == (64,)          # 8 bytes: still the pool
    assert allocated_shape("cuda", (1, 1), 8) == (32,)
    assert allocated_shape("cuda", (3,), 4) == (3,)           # 12 bytes: the ordinary pool
    assert allocated_shape("cuda", (4, 5), 4) == (4, 5)
    assert allocated_shape("metal", (1,), 4) == (1,)          # Metal has no such pool
    padded = np.arange(64, dtype=np.float32)
    assert unpad_output(padded, (1, 1)).tolist() == [[0.0]]
    same = np.zeros((4, 5))
    assert unpad_output(same, (4, 5)) is same


def test_scalars_are_padded_on_cuda_only():
    from kir.backends.mlx_runner import _padded_scalar

    value = np.asarray(np.int32(7))
    padded = _padded_scalar("cuda", value)
    assert padded.shape == (64,) and padded.dtype == np.int32 and padded[0] == 7
    assert _padded_scalar("metal", value) is value            # Metal keeps the 0-d scalar


def test_module_carries_the_same_policy():
    namespace = {"math": math}  # the generated module imports math
    exec(module_source(), namespace)
    for target, shape, size in (("cuda", (1,), 4), ("cuda", (2,), 2), ("cuda", (3,), 4),
                                ("metal", (1,), 4)):
        assert namespace["allocated_shape"](target, shape, size) == \
            allocated_shape(target, shape, size)


class RecordingKernel:
    """Stands in for the kernel mx.fast.cuda_kernel builds: fills each output as MLX's
    init_value does, writes the sum into element 0 and a marker after it (which the caller
    must cut away), and records the call."""

    def __init__(self, calls):
        self.calls = calls

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        data = np.array(kwargs["inputs"][0])
        out = np.full(kwargs["output_shapes"][0], kwargs["init_value"], np.float32)
        out.reshape(-1)[0] += data.sum(dtype=np.float64)
        out.reshape(-1)[1:] = 7.0
        return [mx.array(out)]


def test_module_pads_a_one_float_output_and_returns_its_shape(tmp_path, monkeypatch):
    loaded = load_kernel(ROOT / "examples" / "reduce.cu")
    emitted = emit(loaded.kernel, loaded.bound, "cuda")
    calls = []
    monkeypatch.setattr(mx.fast, "cuda_kernel", lambda **build: RecordingKernel(calls))
    monkeypatch.setattr(mx.cuda, "is_available", lambda: True)
    path = write_module(emitted, tmp_path / "reduce_mod.py", loaded.bound.spec)
    spec = importlib.util.spec_from_file_location("reduce_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.linspace(-1, 2, 1000, dtype=np.float32)
    result = module.reduce_sum(mx.array(x))
    out = result[0] if isinstance(result, (list, tuple)) else result
    assert calls[0]["output_shapes"] == [(64,)]
    n = calls[0]["inputs"][1]                                 # the scalar n, padded too
    assert n.shape == (64,) and int(n[0]) == 1000
    assert out.shape == (1,)
    np.testing.assert_allclose(np.array(out), [x.sum(dtype=np.float64)], rtol=1e-6)


def test_emulated_cuda_reduction_runs_on_the_padded_buffer(monkeypatch):
    from kir.backends.emulate import emulator_available
    from kir.backends.emulated_runner import EmulatedKernel

    ok, why = emulator_available()
    if not ok:
        pytest.skip(f"the CPU emulator needs a C++ compiler: {why}")
    loaded = load_kernel(ROOT / "examples" / "reduce.cu", sizes={"n": 3000})
    runner = EmulatedKernel(emit(loaded.kernel, loaded.bound, "cuda"))
    seen = []
    real = runner.kernel

    def recording(**kwargs):
        seen.append(kwargs["output_shapes"])
        return real(**kwargs)

    monkeypatch.setattr(runner, "kernel", recording)
    inputs = loaded.bound.make_inputs(0)
    out = runner(inputs)["out"]
    assert seen == [[(64,)]]
    assert out.shape == (1,)
    np.testing.assert_allclose(out, [inputs["in"].sum(dtype=np.float64)], rtol=1e-4, atol=1e-3)
