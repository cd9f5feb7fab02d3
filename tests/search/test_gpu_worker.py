"""GPU candidate isolation without a GPU: the worker runs emitted kernels on the CPU emulator,
and planted runners abort, hang, raise a CUDA-style fault, or return wrong outputs for kernels
whose name carries a marker. Each fault costs that candidate only; the next job works."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from kir.driver.load import load_kernel
from kir.measure.gpu.worker import EmulatorRunner, GpuJob, GpuWorker, is_fatal_gpu_error, run_job
from kir.measure.mlx import MLXEvaluator
from kir.rules import BaseRule, NotApplicable, ParamSpace, RuleContext, parse_step
from kir.search import SearchConfig, search

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"rows": 8, "cols": 100}
FAULTS = ("none", "abort", "hang", "wrong", "cudafault", "badsource", "poison")
_POISONED: list[str] = []  # in the worker: a planted fault broke "the context"


class PlantedRunner(EmulatorRunner):
    """The emulator, with a fault for each marker in the kernel's name (module-level: the
    worker process unpickles it by importing this module)."""

    def build(self, emitted):
        name = emitted.kernel_name
        if name.endswith("_abort"):
            os.abort()
        if name.endswith("_hang"):
            time.sleep(10_000)
        if name.endswith("_cudafault"):
            raise RuntimeError("[cudaMallocManaged] failed: an illegal memory access was "
                               "encountered")
        if name.endswith("_badsource"):
            raise RuntimeError("nvrtc: error: identifier \"oops\" is undefined")
        if name.endswith("_poison"):
            _POISONED.append(name)  # no error now: it shows only in later calls
        built = super().build(emitted)
        if name.endswith("_wrong"):
            return lambda inputs: {k: v + 1.0 for k, v in built(inputs).items()}
        return built

    def health(self):
        return "cudaMallocAsync failed: operation not supported" if _POISONED else None


def planted(kernel, fault):
    return dataclasses.replace(kernel, name=f"{kernel.name}_{fault}")


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


def job(loaded, kernel=None, **kw):
    bound = loaded.bound
    kw = {"warmup": 0, "repeat": 2, **kw}
    return GpuJob(kernel or loaded.kernel, str(bound.spec.path.resolve()), dict(bound.sizes),
                  "cuda", **kw)


@pytest.fixture
def worker():
    with GpuWorker(PlantedRunner(), timeout_s=3.0, startup_s=30.0) as w:
        yield w


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_fatal_patterns():
    assert is_fatal_gpu_error(RuntimeError("cudaMallocManaged: an illegal memory access was "
                                           "encountered"))
    assert is_fatal_gpu_error(RuntimeError("Command buffer execution failed: GPU Address Fault"))
    assert not is_fatal_gpu_error(RuntimeError("nvrtc: error: expected a ';'"))
    assert not is_fatal_gpu_error(ValueError("shape mismatch"))


def test_good_candidate_is_checked_and_timed(worker, loaded):
    verdict = worker.run(job(loaded))
    assert verdict.ok, verdict
    assert verdict.time_ms > 0 and verdict.details["max_abs_err"] < 1e-5
    assert verdict.details["modelled"] is False
    again = worker.run(job(loaded))
    assert again.ok and worker.started == 1  # one persistent worker


def test_abort_is_a_crash_and_the_next_job_gets_a_new_worker(worker, loaded):
    assert worker.run(job(loaded)).ok
    first = worker.pid
    verdict = worker.run(job(loaded, planted(loaded.kernel, "abort")))
    assert verdict.status == "crash"
    assert "SIGABRT" in verdict.error
    assert "Aborted" in verdict.details["trace"] and "build" in verdict.details["trace"]
    assert worker.pid is None and not alive(first)
    assert worker.run(job(loaded)).ok
    assert worker.started == 2 and worker.pid != first


def test_hang_is_a_timeout_killed_and_replaced(worker, loaded):
    assert worker.run(job(loaded)).ok  # past the start-up allowance
    first = worker.pid
    start = time.monotonic()
    verdict = worker.run(job(loaded, planted(loaded.kernel, "hang")))
    assert time.monotonic() - start < 10
    assert verdict.status == "timeout" and "3 s" in verdict.error
    assert "sleep" in verdict.details["trace"] or "build" in verdict.details["trace"]
    assert not alive(first)
    assert worker.run(job(loaded)).ok and worker.started == 2


def test_gpu_fault_answers_crash_then_the_worker_exits(worker, loaded):
    assert worker.run(job(loaded)).ok
    first = worker.pid
    verdict = worker.run(job(loaded, planted(loaded.kernel, "cudafault")))
    assert verdict.status == "crash" and "illegal memory access" in verdict.error
    assert "RuntimeError" in verdict.details["trace"]
    assert not alive(first)  # it exited on its own: its context would poison later jobs
    assert worker.run(job(loaded)).ok and worker.started == 2


def test_a_fault_seen_only_by_the_health_probe_blames_this_candidate(worker, loaded):
    assert worker.run(job(loaded)).ok
    first = worker.pid
    verdict = worker.run(job(loaded, planted(loaded.kernel, "poison")))
    assert verdict.status == "crash" and "unusable after this candidate" in verdict.error
    assert not alive(first)
    assert worker.run(job(loaded)).ok and worker.started == 2


def test_compile_error_and_wrong_outputs_keep_the_worker(worker, loaded):
    bad = worker.run(job(loaded, planted(loaded.kernel, "badsource")))
    assert bad.status == "compile_error" and "nvrtc" in bad.error
    wrong = worker.run(job(loaded, planted(loaded.kernel, "wrong")))
    assert wrong.status == "invalid" and wrong.error.startswith("on the GPU:")
    assert "GPU at sizes rows=8, cols=100" in wrong.error
    assert worker.started == 1 and worker.run(job(loaded)).ok


def test_without_reference_the_baseline_gives_expected_outputs(tmp_path, loaded):
    # A spec without a reference: expected outputs come from the unrewritten kernel, run in
    # the worker (never in this process).
    example = EXAMPLES
    (tmp_path / "softmax.cu").write_text((example / "softmax.cu").read_text())
    spec = (example / "softmax.kir.toml").read_text()
    (tmp_path / "softmax.kir.toml").write_text(
        "\n".join(line for line in spec.splitlines() if not line.startswith("reference")))
    bare = load_kernel(tmp_path / "softmax.cu", sizes=SIZES)
    assert bare.spec.reference is None
    with GpuWorker(PlantedRunner(), timeout_s=5.0, startup_s=30.0) as worker:
        missing = worker.run(job(bare))
        assert missing.status == "crash" and "no reference" in missing.error
        assert worker.run(job(bare, baseline=bare.kernel)).ok
        wrong = worker.run(job(bare, planted(bare.kernel, "wrong"), baseline=bare.kernel))
        assert wrong.status == "invalid"


def test_run_job_in_process(loaded):
    cache = {}
    verdict, fatal = run_job(job(loaded), EmulatorRunner(), cache)
    assert verdict.ok and not fatal and len(cache) == 1


class PlantFault(BaseRule):
    """Rename the kernel so the planted runner faults (test only)."""

    name = "plant-fault"
    site_key = "kernel"
    params = (ParamSpace("fault", ("none", "abort", "hang", "wrong")),)

    def sites(self, kernel):
        return [] if any(kernel.name.endswith(f) for f in FAULTS) else ["k"]

    def apply(self, kernel, site, params, ctx):
        if site != "k":
            return NotApplicable("no such site")
        return planted(kernel, params["fault"])


def test_search_completes_its_budget_through_crashes_and_hangs(loaded):
    registry = {"plant-fault": PlantFault()}
    hints = [[parse_step(f"plant-fault{{kernel=k,fault={f}}}", registry)]
             for f in ("abort", "wrong", "hang", "none")]  # the hang hits a warm worker
    with MLXEvaluator(loaded, "cuda", runner=PlantedRunner(), warmup=0, repeat=2,
                      gpu_timeout_s=3.0, gpu_startup_s=30.0, workers=1) as ev:
        assert ev.device == "PlantedRunner:cuda"
        result = search(loaded.kernel, registry, ev, RuleContext(sizes=dict(SIZES)),
                        SearchConfig(strategy="random", budget=5, seed=1), hints=hints)
        started = ev.gpu.started
    assert result.phases.counts["timed out"] == 1  # the time line says a worker was killed
    by_genome = {r.genome: r for r in result.history}
    assert len(result.history) == 5
    assert by_genome[()].status == "ok"
    assert by_genome[("plant-fault{kernel=k,fault=abort}",)].status == "crash"
    assert "SIGABRT" in by_genome[("plant-fault{kernel=k,fault=abort}",)].error
    assert by_genome[("plant-fault{kernel=k,fault=hang}",)].status == "timeout"
    assert by_genome[("plant-fault{kernel=k,fault=wrong}",)].status == "invalid"
    assert by_genome[("plant-fault{kernel=k,fault=none}",)].status == "ok"
    assert result.counts["crash"] == 1 and result.counts["timeout"] == 1
    assert result.best_ms is not None
    assert started == 3  # the first worker, and one after each of the crash and the hang


class SlowRunner(EmulatorRunner):
    """The emulator, 250 ms slower per call for kernels whose name ends in ``_slow`` (far
    slower than any emulated run of the small softmax, even on a loaded machine)."""

    def build(self, emitted):
        built = super().build(emitted)
        if not emitted.kernel_name.endswith("_slow"):
            return built

        def slow(inputs):
            time.sleep(0.25)
            return built(inputs)
        return slow


def test_timing_gives_up_after_one_run_slower_than_the_limit(loaded):
    cache = {}
    slow = planted(loaded.kernel, "slow")
    cut, _ = run_job(job(loaded, slow, give_up_ms=10.0, warmup=2, repeat=5), SlowRunner(),
                     cache)
    assert cut.ok and cut.details["cut_short"] and cut.details["runs"] == 1
    assert cut.time_ms >= 250.0
    full, _ = run_job(job(loaded, slow, warmup=2, repeat=5), SlowRunner(), cache)
    assert full.ok and full.details["runs"] == 5 and "cut_short" not in full.details
    # where the seconds went is kept with the verdict
    assert full.details["build_s"] > 0 and full.details["time_s"] >= 0.25 * 7


def test_search_tells_the_gpu_evaluator_its_best_and_slow_candidates_are_cut(loaded):
    registry = {"plant-fault": PlantFault()}
    # "none" renames to an ordinary kernel; the baseline is timed in full first
    with MLXEvaluator(loaded, "cuda", runner=SlowRunner(), warmup=2, repeat=3,
                      workers=1, give_up_factor=3.0) as ev:
        job_before = ev.gpu_job(loaded.kernel)
        assert job_before.give_up_ms is None  # nothing to compare with yet
        verdicts = [ev.time(loaded.kernel)]
        ev.note_best(verdicts[0].time_ms)
        slow_job = ev.gpu_job(planted(loaded.kernel, "slow"))
        assert slow_job.give_up_ms == pytest.approx(3.0 * verdicts[0].time_ms)
        slow = ev.gpu.run(slow_job)
        assert slow.ok and slow.details.get("cut_short") and slow.details["runs"] == 1
    noted = []

    class Noting(MLXEvaluator):
        def note_best(self, best_ms, kernel=None):
            noted.append(best_ms)
            super().note_best(best_ms, kernel)

    with Noting(loaded, "cuda", runner=SlowRunner(), warmup=0, repeat=2, workers=1) as ev:
        result = search(loaded.kernel, registry, ev, RuleContext(sizes=dict(SIZES)),
                        SearchConfig(strategy="random", budget=2, seed=1))
    assert noted and noted[0] == result.history[0].time_ms  # the baseline, first
