"""A final timing in turns (kir.measure.gpu.jobs._time_in_turns): the finalists of a search
and its input are built and checked in one GPU worker, then timed round by round, each kernel
once a round, and each is reported by its median over the rounds; a rival that fails its
check is reported by its error and not timed. Run in this process on the CPU emulator with
scripted timings (no GPU here): what is tested is the order and bookkeeping, not the clock."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kir.backends.mlx_runner import Timing
from kir.driver.load import load_kernel
from kir.measure.gpu.worker import EmulatorRunner, GpuJob, run_job

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"rows": 8, "cols": 100}


class TurnsRunner(EmulatorRunner):
    """The emulator; a kernel named ..._wrong computes wrong outputs; each timing returns
    the next of its kernel's scripted medians and is logged by kernel name."""

    def __init__(self, medians: dict[str, list[float]]) -> None:
        self.medians = {name: list(times) for name, times in medians.items()}
        self.log: list[str] = []

    def build(self, emitted):
        built = super().build(emitted)
        if emitted.kernel_name.endswith("_wrong"):
            def wrong(inputs):
                return {k: v + 1.0 for k, v in built(inputs).items()}
            wrong.emitted = emitted
            return wrong
        return built

    def time(self, built, inputs, warmup, repeat, give_up_ms=None):
        name = built.emitted.kernel_name.rsplit("_", 1)[-1]
        self.log.append(name)
        median = self.medians[name].pop(0)
        return Timing(median, median, median, 0.0, repeat)


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


def named(kernel, suffix):
    return dataclasses.replace(kernel, name=f"{kernel.name}_{suffix}")


def test_kernels_are_timed_round_by_round_and_reported_by_their_median(loaded, tmp_path):
    runner = TurnsRunner({"a": [5.0, 1.0, 1.2], "b": [0.9, 0.95, 3.0], "c": [2.0, 2.0, 2.0]})
    job = GpuJob(named(loaded.kernel, "a"), str(loaded.bound.spec.path.resolve()),
                 dict(SIZES), "cuda", warmup=0, repeat=2, lock_path=str(tmp_path / "gpu.lock"),
                 rivals=(named(loaded.kernel, "b"), named(loaded.kernel, "wrong"),
                         named(loaded.kernel, "c")), rounds=3)
    verdict, fatal = run_job(job, runner, {})
    assert verdict.ok and not fatal, verdict
    assert runner.log == ["a", "b", "c"] * 3  # in turns; the wrong rival never timed
    turns = verdict.details["turns_ms"]
    assert turns[0] == [5.0, 1.0, 1.2] and turns[1] == [0.9, 0.95, 3.0]
    assert turns[2].startswith("on the GPU:") and turns[3] == [2.0, 2.0, 2.0]
    assert verdict.time_ms == 1.2  # the median of its rounds, not the first (5.0) alone


def test_without_rivals_a_kernel_is_timed_once(loaded, tmp_path):
    runner = TurnsRunner({"a": [0.5]})
    job = GpuJob(named(loaded.kernel, "a"), str(loaded.bound.spec.path.resolve()),
                 dict(SIZES), "cuda", warmup=0, repeat=2, lock_path=str(tmp_path / "gpu.lock"),
                 rounds=3)
    verdict = run_job(job, runner, {})[0]
    assert verdict.time_ms == 0.5 and runner.log == ["a"]
    assert "turns_ms" not in verdict.details
