"""ModelEvaluator (interpreter validation + cost model), its worker pool, and MLXEvaluator."""

from __future__ import annotations

import dataclasses

import os
import pickle
import time
from pathlib import Path

import pytest
from kir.backends import TARGETS

from kir import ir
from kir.driver.load import load_kernel
from kir.ir.types import F32
from kir.measure.cases import build_cases
from kir.measure.cpu_pool import CheckPool
from kir.measure.mlx import MLXEvaluator
from kir.measure.model import ModelEvaluator
from kir.search import Evaluation, Evaluator

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"rows": 8, "cols": 100}


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


@pytest.fixture(scope="module")
def evaluator(loaded):
    ev = ModelEvaluator(loaded, max_steps=20_000)
    yield ev
    ev.close()


def edit(kernel: ir.Kernel, fn) -> ir.Kernel:
    """The kernel with ``fn`` applied bottom-up to every node (None keeps a node)."""
    return ir.transform(kernel, fn)  # type: ignore[return-value]


def broken_constant(kernel):
    """``local_sum`` starts at 1.0 instead of 0.0: a wrong result."""
    def fn(n):
        if isinstance(n, ir.Declare) and n.name == "local_sum":
            return ir.Declare(n.name, n.type, ir.Const(1.0, F32), loc=n.loc)
        return None
    return edit(kernel, fn)


def out_of_bounds(kernel):
    """The output store writes one element further: past the end on the last row."""
    def fn(n):
        if isinstance(n, ir.Store) and n.buffer == "y":
            shifted = ir.Binary("+", n.index, ir.Const(1, n.index.type), n.index.type)
            return ir.Store(n.buffer, shifted, n.value, loc=n.loc)
        return None
    return edit(kernel, fn)


def nan_output(kernel):
    def fn(n):
        if isinstance(n, ir.Declare) and n.name == "inv_sum":
            return ir.Declare(n.name, n.type, ir.Const(float("nan"), F32), loc=n.loc)
        return None
    return edit(kernel, fn)


def endless(kernel):
    """The warp-reduction loop never halves its offset."""
    def fn(n):
        if isinstance(n, ir.For) and n.label == "L1":
            return ir.For(n.label, n.var, n.type, n.init, n.cond, ir.Var(n.var, n.type),
                          n.body, loc=n.loc)
        return None
    return edit(kernel, fn)


def test_protocol_and_labels(evaluator):
    assert isinstance(evaluator, Evaluator)
    assert evaluator.device == "model:apple-m2" and evaluator.target == "model:apple-m2"
    assert evaluator.modelled is True


def test_cases_cover_two_seeds_at_default_and_one_at_ragged_sizes(loaded):
    cases, notes = build_cases(loaded)
    assert [c.sizes["cols"] for c in cases] == [100, 100, 333]
    assert all(c.sizes["rows"] == 8 for c in cases) and notes == ()
    assert not (cases[0].inputs["x"] == cases[1].inputs["x"]).all()  # different seeds
    ragged = loaded.spec.bind({**loaded.bound.sizes, "cols": 333})
    assert (cases[2].inputs["x"] == ragged.make_inputs(1)["x"]).all()  # the next seed


def test_baseline_is_ok_and_modelled(evaluator, loaded):
    result = evaluator.evaluate(loaded.kernel)
    assert result.status == "ok", result.error
    assert result.time_ms > 0
    assert result.details["modelled"] is True
    assert result.details["bound"] in ("memory", "compute", "latency", "sync")
    assert result.details["counters"]["groups"] == 8
    assert result.details["cases"] == 3


def test_wrong_constant_is_invalid_with_its_error(evaluator, loaded):
    result = evaluator.evaluate(broken_constant(loaded.kernel))
    assert result.status == "invalid"
    assert "MISMATCH" in result.error and "cols=100" in result.error
    assert result.details["max_abs_err"] > 1e-3


def test_out_of_bounds_is_a_crash_with_the_reason(evaluator, loaded):
    result = evaluator.evaluate(out_of_bounds(loaded.kernel))
    assert result.status == "crash"
    assert "out-of-bounds store" in result.error and "'y'" in result.error


def test_nan_and_timeout(evaluator, loaded):
    assert evaluator.evaluate(nan_output(loaded.kernel)).status == "nan"
    result = evaluator.evaluate(endless(loaded.kernel))
    assert result.status == "timeout" and "did not terminate" in result.error


def test_verification_failure_is_a_compile_error(evaluator, loaded):
    k = loaded.kernel
    too_big = ir.Kernel(k.name, k.params, k.body, ir.Launch(k.launch.grid, (2048, 1, 1)))
    result = evaluator.evaluate(too_big)
    assert result.status == "compile_error" and "verify" in result.error


def test_ragged_validation_catches_a_size_assumption(evaluator, loaded):
    """The last loop rounds cols down to a multiple of 4: right at cols=100 only."""
    def fn(n):
        if isinstance(n, ir.For) and n.label == "L6":
            cols = n.cond.right
            four = ir.Const(4, cols.type)
            rounded = ir.Binary("*", ir.Binary("/", cols, four, cols.type), four, cols.type)
            cond = ir.Binary(n.cond.op, n.cond.left, rounded, n.cond.type)
            return ir.For(n.label, n.var, n.type, n.init, cond, n.update, n.body, loc=n.loc)
        return None
    result = evaluator.evaluate(edit(loaded.kernel, fn))
    # The kernel leaves some of y unwritten at cols=333: its NaN poison (init = "none") or a
    # wrong value there rejects it.
    assert result.status in ("invalid", "nan") and "cols=333" in result.error


def test_a_specialized_kernel_is_validated_at_its_own_sizes(evaluator, loaded):
    """A rule that bakes cols=100 in leaves nothing to check at cols=333."""
    def fn(n):
        if isinstance(n, ir.Var) and n.name == "cols":
            return ir.Const(100, n.type)
        return None
    result = evaluator.evaluate(edit(loaded.kernel, fn))
    assert result.status == "ok" and result.details["cases"] == 2
    assert "specialized" in result.details


def test_a_kernel_that_ignores_what_it_no_longer_reads_is_validated_everywhere(evaluator,
                                                                             loaded):
    """The same baked cols=100, declared ignored (``Launch.ignores``: a rule saying the
    result does not depend on it): validated at the ragged sizes too, where it is wrong."""
    def fn(n):
        if isinstance(n, ir.Var) and n.name == "cols":
            return ir.Const(100, n.type)
        return None
    baked = edit(loaded.kernel, fn)
    baked = dataclasses.replace(baked, launch=dataclasses.replace(baked.launch,
                                                                  ignores=("cols",)))
    result = evaluator.evaluate(baked)
    assert result.status in ("invalid", "nan", "crash") and "specialized" not in result.details


def test_evaluate_many_returns_in_order(evaluator, loaded):
    good = loaded.kernel
    kernels = [good, broken_constant(good), out_of_bounds(good), nan_output(good), good]
    copies = pickle.loads(pickle.dumps(kernels))  # what the workers receive
    assert [k.fingerprint() for k in copies] == [k.fingerprint() for k in kernels]
    results = list(evaluator.evaluate_many(kernels))
    assert [r.status for r in results] == ["ok", "invalid", "crash", "nan", "ok"]
    assert results[0].time_ms == results[-1].time_ms == evaluator.evaluate(good).time_ms


def test_profiles_change_the_modelled_time(loaded):
    with ModelEvaluator(loaded, "apple-m1", seeds=(0,)) as m1:
        assert m1.device == "model:apple-m1"
        slow = m1.evaluate(loaded.kernel).time_ms
    with ModelEvaluator(loaded, "apple-m4-max", seeds=(0,)) as big:
        assert big.evaluate(loaded.kernel).time_ms < slow


# ------------------------------------------------------------------ the worker pool


def fake_check(item, context):
    """A check that sleeps, kills its worker, or answers, by the item's name."""
    if item == "die":
        os._exit(3)
    if item == "sleep":
        time.sleep(30)
    return Evaluation.timed(float(len(item)) + context)


def test_pool_replaces_dead_and_stuck_workers():
    pool = CheckPool(fake_check, 0.5, workers=2, timeout_s=1.5)
    try:
        items = ["a", "die", "bbb", "sleep", "cc"]
        start = time.monotonic()
        results = list(pool.run(items))
        assert time.monotonic() - start < 20
        assert [r.status for r in results] == ["ok", "crash", "ok", "timeout", "ok"]
        assert [r.time_ms for r in results if r.ok] == [1.5, 3.5, 2.5]
        assert "died" in results[1].error and "longer than" in results[3].error
        assert [r.time_ms for r in pool.run(["dddd"])] == [4.5]  # the pool still works
    finally:
        pool.close()


# -------------------------------------------------------------------------- MLX


def _cuda_available() -> bool:
    from kir.backends.mlx_runner import available_targets

    return "cuda" in available_targets()


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda_available(), reason="needs MLX's CUDA back end and a GPU")
def test_mlx_evaluator_times_the_baseline(loaded):
    with MLXEvaluator(loaded, "cuda", repeat=3) as ev:
        assert ev.modelled is False and ev.target == "cuda"
        results = list(ev.evaluate_many([loaded.kernel, broken_constant(loaded.kernel)]))
        assert results[0].status == "ok" and results[0].time_ms > 0
        assert results[0].details["modelled"] is False
        assert results[1].status == "invalid"


def test_check_sizes_equal_to_the_compiled_ones_still_validate_a_specialized_kernel(loaded):
    from kir.rewrites.specialize_param import RULES

    from kir.rules import apply_trace, context_for, parse_step

    registry = {rule.name: rule for rule in RULES}
    step = parse_step("specialize-param{param=cols}", registry)
    special = apply_trace(loaded.kernel, [step], registry, context_for(loaded, TARGETS["metal"]),
                          strict=True).kernel
    with ModelEvaluator(loaded, max_steps=20_000, check_sizes=dict(SIZES)) as same:
        verdict = same.evaluate(special)
        assert verdict.ok and verdict.details["specialized"], verdict
    # Check sizes away from the compiled ones: the model cannot count it there, and says so
    # (a verdict, never an exception from the evaluator).
    with ModelEvaluator(loaded, max_steps=20_000, check_sizes={"rows": 4}) as moved:
        verdict = moved.evaluate(special)
        assert verdict.status == "not_applicable" and "specialized" in verdict.error


def test_nvidia_gpu_name_comes_from_the_driver_tool(tmp_path, monkeypatch):
    """This machine has no NVIDIA GPU, so a stand-in ``nvidia-smi`` on PATH prints what the
    real one prints for two GPUs; the name follows CUDA_VISIBLE_DEVICES."""
    from kir.measure.mlx import nvidia_gpu_name

    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\nprintf 'NVIDIA H200\\nNVIDIA A100-SXM4-80GB\\n'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvidia_gpu_name() == "NVIDIA H200"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert nvidia_gpu_name() == "NVIDIA A100-SXM4-80GB"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    assert nvidia_gpu_name() is None
    tool.write_text("#!/bin/sh\nexit 9\n")
    assert nvidia_gpu_name() is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert nvidia_gpu_name() is None


def test_specialize_then_coarsen_is_validated_at_its_own_sizes():
    """specialize-param bakes n in; coarsen-threads then reads n again for its run-time
    guard, so "stopped reading n" no longer shows the specialization — the launch's
    ``specialized`` mark does, and the ragged size (n=12345, where the baked value reads out
    of bounds) is not tried."""
    from kir.driver.registry import load_registry
    from kir.rules import apply_trace, context_for, parse_step

    reduce = load_kernel(EXAMPLES / "reduce.cu", sizes={"n": 100000})
    registry = load_registry()
    steps = [parse_step(s, registry) for s in ("specialize-param{param=n}",
                                                "coarsen-threads{dim=x,factor=4}")]
    kernel = apply_trace(reduce.kernel, steps, registry, context_for(reduce, TARGETS["metal"]),
                         strict=True).kernel
    assert kernel.launch.specialized
    with ModelEvaluator(reduce, workers=1) as evaluator:
        verdict = evaluator.evaluate(kernel)
    assert verdict.ok, verdict
    assert verdict.details["specialized"] and verdict.details["cases"] == 2
