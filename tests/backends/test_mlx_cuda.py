"""Emitted CUDA run through MLX's cuda_kernel on an NVIDIA GPU, compared with numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import (
    atomic_kernel,
    atomic_spec,
    block_sum_kernel,
    block_sum_spec,
    dynamic_shared_kernel,
    dynamic_shared_spec,
    inout_kernel,
    inout_spec,
)
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


def test_gpu_worker_jobs_check_on_the_device_and_reuse_inputs():
    """run_job with MLXRunner: a good candidate is checked on the GPU (no host copy of its
    outputs) and timed; a wrong one is caught by the device check; both reuse the MLX
    inputs made for the first; the reduction's atomic output (MLX's init value) checks too."""
    import dataclasses

    from kir import ir
    from kir.driver.load import load_kernel
    from kir.measure.gpu.jobs import GpuJob, MLXRunner, run_job

    examples = Path(__file__).resolve().parents[2] / "examples"
    loaded = load_kernel(examples / "softmax.cu", sizes={"rows": 64, "cols": 1000})
    bound = loaded.bound
    runner, cache = MLXRunner(), {}

    def job(kernel):
        return GpuJob(kernel, str(bound.spec.path.resolve()), dict(bound.sizes), "cuda",
                      warmup=1, repeat=3)

    good, fatal = run_job(job(loaded.kernel), runner, cache)
    assert good.ok and not fatal and good.details["check_s"] >= 0
    assert len(runner._arrays) == 1

    def off_by_one(n):  # the row sum starts at 1: every output is wrong
        if isinstance(n, ir.Declare) and n.name == "local_sum":
            return dataclasses.replace(n, init=ir.Const(1.0, n.init.type))
        return None
    wrong, _ = run_job(job(ir.transform(loaded.kernel, off_by_one)), runner, cache)
    assert wrong.status == "invalid" and "elements outside tolerance" in wrong.error
    assert len(runner._arrays) == 1  # the same inputs served both candidates

    reduce = load_kernel(examples / "reduce.cu", sizes={"n": 100000})
    rb = reduce.bound
    verdict, _ = run_job(GpuJob(reduce.kernel, str(rb.spec.path.resolve()), dict(rb.sizes),
                                "cuda", warmup=1, repeat=3), runner, {})
    assert verdict.ok, verdict


# (wide_counters.cu holds f64 sums: MLX keeps float64 to its CPU back end, and the H200
# run of round 29 failed on it; its i64/u16/f64 outputs are checked on the emulator.)
@pytest.mark.parametrize("name", ["paged_append_bf16", "adamw_bf16"])
def test_outputs_of_other_widths_updated_in_place(name):
    """bf16 outputs holding data, decoded from the bits MLX hands back."""
    from kir.driver.load import load_kernel
    from kir.driver.runners import check_on_target

    loaded = load_kernel(Path(__file__).parent / "data" / f"{name}.cu")
    outcome = check_on_target(loaded, "mlx-cuda")
    assert outcome.result.ok, outcome.result.describe()
