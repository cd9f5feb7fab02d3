"""The GPU worker's warm-up: a candidate is compiled by a run at small validated sizes that
holds no GPU lock, so timings in other workers do not wait for its compile.

Run in this process on the CPU emulator (no GPU here): a recording runner notes, for every
run, the sizes it ran at and whether this process held the GPU lock then (a non-blocking
exclusive ``flock`` on a fresh descriptor fails while any descriptor holds it shared)."""

from __future__ import annotations

import dataclasses
import fcntl
import os
from pathlib import Path

import pytest

from kir.backends import TARGETS, emit
from kir.backends.mlx_runner import source_hash
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.measure.gpu.worker import EmulatorRunner, GpuJob, run_job
from kir.measure.mlx import MLXEvaluator
from kir.rules import apply_step, context_for, parse_step

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"rows": 8, "cols": 100}


class RecordingRunner(EmulatorRunner):
    """The emulator, noting (sizes, lock held) for each run."""

    def __init__(self, lock_path: str) -> None:
        self.lock_path = lock_path
        self.runs: list[tuple[dict, bool]] = []

    def run(self, built, case):
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            held = False
        except BlockingIOError:
            held = True
        finally:
            os.close(fd)
        self.runs.append((dict(case.sizes), held))
        return super().run(built, case)


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


def test_warm_up_runs_at_the_small_sizes_before_the_lock(loaded, tmp_path):
    lock = str(tmp_path / "gpu.lock")
    small = loaded.spec.bind({"rows": 2, "cols": 33})
    job = GpuJob(loaded.kernel, str(loaded.bound.spec.path.resolve()), dict(SIZES), "cuda",
                 warmup=0, repeat=1, lock_path=lock, warm_sizes=dict(small.sizes),
                 warm_emitted=emit(loaded.kernel, small, "cuda"))
    runner = RecordingRunner(lock)
    verdict, fatal = run_job(job, runner, {})
    assert verdict.ok and not fatal, verdict
    assert runner.runs[0] == ({"rows": 2, "cols": 33}, False)  # compiled, unlocked
    assert runner.runs[1] == (SIZES, True)  # the check at the compiled sizes, locked
    assert 0 < verdict.details["warm_s"] <= verdict.details["build_s"]


def test_without_a_warm_up_the_first_run_is_the_locked_check(loaded, tmp_path):
    lock = str(tmp_path / "gpu.lock")
    job = GpuJob(loaded.kernel, str(loaded.bound.spec.path.resolve()), dict(SIZES), "cuda",
                 warmup=0, repeat=1, lock_path=lock)
    runner = RecordingRunner(lock)
    verdict = run_job(job, runner, {})[0]
    assert verdict.ok
    assert runner.runs == [(SIZES, True)]
    assert "warm_s" not in verdict.details


@pytest.fixture(scope="module")
def evaluator(loaded):
    ev = MLXEvaluator(loaded, "cuda", runner=EmulatorRunner(), workers=1)
    yield ev
    ev.close()


def test_the_evaluator_warms_at_the_smallest_validated_sizes(evaluator, loaded):
    emitted, _ = evaluator.emitted_call(loaded.kernel)
    job = evaluator.gpu_job(loaded.kernel, emitted)
    # The spec validates at rows=8, cols=100 (compiled) and ragged cols=333: the only other
    # size set is the ragged one.
    assert job.warm_sizes == {"rows": 8, "cols": 333}
    assert source_hash(job.warm_emitted) == source_hash(emitted)
    assert job.warm_emitted.scalar_values != emitted.scalar_values  # really other sizes


def test_no_warm_up_for_a_kernel_specialized_to_the_compiled_sizes(evaluator, loaded):
    registry = load_registry()
    ctx = context_for(loaded, TARGETS["cuda"])
    special = apply_step(loaded.kernel, parse_step("specialize-param{param=cols}", registry),
                         registry, ctx)
    assert special.launch.specialized
    job = evaluator.gpu_job(special, evaluator.emitted_call(special)[0])
    assert job.warm_emitted is None and job.warm_sizes is None


def test_no_warm_up_for_a_kernel_that_baked_a_size_in_unmarked(evaluator, loaded):
    """A kernel that no longer reads a size parameter is judged at the compiled sizes only
    (kir.measure.cases.judged_cases), flag or no flag: it gets no run at other sizes."""
    registry = load_registry()
    ctx = context_for(loaded, TARGETS["cuda"])
    special = apply_step(loaded.kernel, parse_step("specialize-param{param=cols}", registry),
                         registry, ctx)
    unmarked = dataclasses.replace(special, launch=dataclasses.replace(special.launch,
                                                                       specialized=False))
    assert evaluator.warm_call(unmarked, evaluator.emitted_call(unmarked)[0]) is None


def test_no_warm_up_when_the_small_call_builds_another_kernel(evaluator, loaded):
    emitted, _ = evaluator.emitted_call(loaded.kernel)
    other = dataclasses.replace(emitted, source=emitted.source + "\n// other")
    assert evaluator.warm_call(loaded.kernel, other) is None
    assert evaluator.warm_call(loaded.kernel, emitted) is not None


class AheadRunner(RecordingRunner):
    """Compiles ahead (as MLXRunner does for CUDA, kir.backends.mlx_precompiled): its
    callables say so, and it counts the builds of each kind."""

    def __init__(self, lock_path: str) -> None:
        super().__init__(lock_path)
        self.builds: list[str] = []

    def build(self, emitted):
        self.builds.append("first run")
        return super().build(emitted)

    def compiles_ahead(self, target):
        return True

    def build_ahead(self, emitted):
        self.builds.append("ahead")
        built = super().build(emitted)
        built.compiled_ahead = True
        return built


def _warm_job(loaded, lock: str, **changes) -> GpuJob:
    small = loaded.spec.bind({"rows": 2, "cols": 33})
    job = GpuJob(loaded.kernel, str(loaded.bound.spec.path.resolve()), dict(SIZES), "cuda",
                 warmup=0, repeat=1, lock_path=lock, warm_sizes=dict(small.sizes),
                 warm_emitted=emit(loaded.kernel, small, "cuda"))
    return dataclasses.replace(job, **changes)


def test_a_kernel_compiled_ahead_needs_no_warm_up(loaded, tmp_path):
    lock = str(tmp_path / "gpu.lock")
    runner = AheadRunner(lock)
    verdict, _ = run_job(_warm_job(loaded, lock), runner, {})
    assert verdict.ok, verdict
    assert runner.builds == ["ahead"]
    assert runner.runs == [(SIZES, True)]  # only the locked check: compiled already
    assert verdict.details["compiled_ahead"] is True and "warm_s" not in verdict.details


def test_a_final_timing_goes_through_the_first_run_compile(loaded, tmp_path):
    """``compile_ahead=False`` (the evaluator's retime of a result): the runner's plain
    build, as the user's module will run, and the warm-up back where it applies."""
    lock = str(tmp_path / "gpu.lock")
    runner = AheadRunner(lock)
    verdict, _ = run_job(_warm_job(loaded, lock, compile_ahead=False), runner, {})
    assert verdict.ok, verdict
    assert runner.builds == ["first run", "first run"]  # the candidate, then its warm-up
    assert runner.runs[0] == ({"rows": 2, "cols": 33}, False)
    assert "compiled_ahead" not in verdict.details


def test_the_evaluator_retimes_without_compiling_ahead(evaluator, loaded):
    sent = []
    real_run = evaluator.gpu.run

    def run(job):
        sent.append(job)
        return real_run(job)

    evaluator.gpu.run = run
    try:
        verdict = evaluator.retime(loaded.kernel, warmup=0, repeat=1)
    finally:
        evaluator.gpu.run = real_run
    assert verdict.ok
    assert [job.compile_ahead for job in sent] == [False]
    assert evaluator.gpu_job(loaded.kernel).compile_ahead  # a search's candidates do


def test_no_warm_up_is_emitted_for_a_runner_that_compiles_ahead(loaded, tmp_path):
    """The evaluator does not emit the candidate a second time, at the warm-up's sizes, for
    a runner that compiles it before its first run (MLX's on CUDA)."""
    ahead = MLXEvaluator(loaded, "cuda", runner=AheadRunner(str(tmp_path / "gpu.lock")),
                         workers=1)
    try:
        emitted, _ = ahead.emitted_call(loaded.kernel)
        job = ahead.gpu_job(loaded.kernel, emitted)
        assert job.warm_emitted is None and job.warm_sizes is None
    finally:
        ahead.close()
