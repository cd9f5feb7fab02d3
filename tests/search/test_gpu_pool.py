"""Parallel GPU workers: the readers-writer lock keeps timings alone on the GPU while
candidates compile and check side by side; the pool returns verdicts in order and keeps each
worker's isolation. Runs on the CPU emulator (no GPU here); the lock is real (flock)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from kir.driver.load import load_kernel
from kir.measure.gpu.jobs import EmulatorRunner, GpuJob
from kir.measure.gpu.lock import GpuLock
from kir.measure.gpu.pool import GpuPool
from kir.measure.mlx import MLXEvaluator
from kir.rules import RuleContext, parse_step
from kir.search import SearchConfig, search

from .test_gpu_worker import PlantedRunner, PlantFault

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"rows": 8, "cols": 100}


def _hold(path: str, mode: str, hold_s: float, log: str, delay_s: float) -> None:
    time.sleep(delay_s)
    lock = GpuLock(path)
    with getattr(lock, mode)():
        start = time.monotonic()
        time.sleep(hold_s)
        end = time.monotonic()
    with open(log, "a") as f:
        f.write(json.dumps([mode, start, end]) + "\n")


def test_exclusive_waits_for_shared_and_new_shared_waits_behind_it(tmp_path):
    path, log = str(tmp_path / "gpu.lock"), str(tmp_path / "log")
    ctx = multiprocessing.get_context("fork")
    # Generous gaps (0.5 s) so a loaded machine still starts them in this order.
    procs = [ctx.Process(target=_hold, args=(path, "shared", 1.5, log, 0.0)),
             ctx.Process(target=_hold, args=(path, "exclusive", 0.3, log, 0.5)),
             ctx.Process(target=_hold, args=(path, "shared", 0.1, log, 1.0))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(10)
    rows = [json.loads(line) for line in open(log)]
    held = {(mode, round(start, 3)): (start, end) for mode, start, end in rows}
    (ex_start, ex_end), = [v for (m, _), v in held.items() if m == "exclusive"]
    shared = sorted(v for (m, _), v in held.items() if m == "shared")
    first, late = shared
    assert ex_start >= first[1]  # the timer waited for the running check to end
    assert late[0] >= ex_end  # the check that came while it waited went after it


class LoggingRunner(EmulatorRunner):
    """The emulator, logging when each process runs a kernel ("run" at the compiled sizes,
    "warm" for the unlocked warm-up at small sizes: kir.measure.gpu.jobs._warm_up) and when
    it times one."""

    def __init__(self, log: str) -> None:
        self.log = log

    def _note(self, what, start):
        with open(self.log, "a") as f:
            f.write(json.dumps([what, os.getpid(), start, time.monotonic()]) + "\n")

    def run(self, built, case):
        start = time.monotonic()
        time.sleep(0.05)  # a compile's worth of overlap to catch
        out = super().run(built, case)
        self._note("run" if case.sizes == SIZES else "warm", start)
        return out

    def time(self, built, inputs, warmup, repeat, give_up_ms=None):
        start = time.monotonic()
        timing = super().time(built, inputs, warmup, repeat, give_up_ms)
        self._note("time", start)
        return timing


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


def test_pool_runs_in_order_and_no_timing_overlaps_another_run(tmp_path, loaded):
    log = str(tmp_path / "log")
    bound = loaded.bound
    job = GpuJob(loaded.kernel, str(bound.spec.path.resolve()), dict(bound.sizes), "cuda",
                 warmup=1, repeat=3)
    with GpuPool(LoggingRunner(log), workers=3, timeout_s=30.0, startup_s=60.0) as pool:
        verdicts = list(pool.run_many([job] * 9))
        assert pool.started == 3
    assert all(v.ok for v in verdicts)
    rows = [json.loads(line) for line in open(log)]
    timings = [r for r in rows if r[0] == "time"]
    runs = [r for r in rows if r[0] == "run"]
    assert len(timings) == 9 and len(runs) == 9 and len({r[1] for r in rows}) == 3
    for _, pid, t0, t1 in timings:
        for what, other, r0, r1 in rows:
            if other != pid:
                assert r1 <= t0 or r0 >= t1, f"{what} of {other} overlapped a timing"


def test_search_through_a_pool_survives_crashes(loaded):
    registry = {"plant-fault": PlantFault()}
    hints = [[parse_step(f"plant-fault{{kernel=k,fault={f}}}", registry)]
             for f in ("abort", "wrong", "none")]
    with MLXEvaluator(loaded, "cuda", runner=PlantedRunner(), warmup=0, repeat=2,
                      gpu_timeout_s=10.0, gpu_startup_s=60.0, workers=1,
                      gpu_workers=2) as ev:
        result = search(loaded.kernel, registry, ev, RuleContext(sizes=dict(SIZES)),
                        SearchConfig(strategy="random", budget=4, seed=1), hints=hints)
        assert ev.stats["gpu_jobs"] == 4
    statuses = {r.genome: r.status for r in result.history}
    assert statuses[()] == "ok"
    assert statuses[("plant-fault{kernel=k,fault=abort}",)] == "crash"
    assert statuses[("plant-fault{kernel=k,fault=wrong}",)] == "invalid"
    assert statuses[("plant-fault{kernel=k,fault=none}",)] == "ok"


class SlowLoggingRunner(LoggingRunner):
    """LoggingRunner whose run takes long enough (0.4 s) that parallel runs must overlap."""

    def run(self, built, case):
        time.sleep(0.35)
        return super().run(built, case)


def test_submitted_candidates_run_side_by_side(tmp_path, loaded):
    """MLXEvaluator.submit (what the steady-state search keeps capacity-deep) hands each
    candidate to the pool as soon as it is validated: three submitted at once run on more
    than one GPU worker (judged one at a time they would all reuse the first), each verdict
    is what evaluate() gives, and no timing overlapped another worker's run at the compiled
    sizes (each candidate's warm-up at small sizes holds no lock: it may)."""
    from kir.driver.registry import load_registry
    from kir.rules import apply_trace, context_for

    log = str(tmp_path / "log")
    registry = load_registry()
    ctx = context_for(loaded)
    kernels = [loaded.kernel] + [
        apply_trace(loaded.kernel, [parse_step(step, registry)], registry, ctx).kernel
        for step in ("fast-math{at=all}", "vectorize-strided{loop=L0,width=4}")]
    with MLXEvaluator(loaded, "cuda", runner=SlowLoggingRunner(log), warmup=0, repeat=2,
                      gpu_timeout_s=60.0, gpu_startup_s=120.0, workers=1,
                      gpu_workers=3) as ev:
        assert ev.capacity == 4
        futures = [ev.submit(kernel) for kernel in kernels]
        verdicts = [future.result(timeout=300) for future in futures]
        assert ev.stats["gpu_jobs"] == 3
    assert all(v.ok for v in verdicts), [v.reason for v in verdicts]
    rows = [json.loads(line) for line in open(log)]
    runs = [r for r in rows if r[0] == "run"]
    assert len(runs) == 3 and len({r[1] for r in runs}) >= 2, runs
    assert len([r for r in rows if r[0] == "warm"]) == 3
    for _, pid, t0, t1 in (r for r in rows if r[0] == "time"):
        for what, other, r0, r1 in rows:
            if other != pid and what != "warm":
                assert r1 <= t0 or r0 >= t1, f"{what} of {other} overlapped a timing"


def test_wait_idle_waits_for_every_submitted_job(loaded):
    """GpuPool.wait_idle returns once every job submitted has finished (False while they
    still run and its timeout passes first)."""
    bound = loaded.bound
    job = GpuJob(loaded.kernel, str(bound.spec.path.resolve()), dict(bound.sizes), "cuda",
                 warmup=0, repeat=1)
    with GpuPool(SlowLoggingRunner(os.devnull), workers=2, timeout_s=60.0,
                 startup_s=120.0) as pool:
        futures = [pool.submit(job) for _ in range(3)]
        assert not pool.wait_idle(0.01)  # 0.35 s runs: none has finished yet
        assert pool.wait_idle(300)
        assert all(f.done() for f in futures)
        assert all(f.result().ok for f in futures)


def test_a_final_timing_waits_for_the_candidates_still_in_flight(loaded):
    """A search stopped by its time limit leaves submitted candidates running; the
    finalists' timing alone (MLXEvaluator.retime) starts only once they are done or
    stopped, so it does not share the host and the GPU with their compiles and checks."""
    from kir.driver.registry import load_registry
    from kir.rules import apply_trace, context_for

    registry = load_registry()
    ctx = context_for(loaded)
    kernels = [loaded.kernel] + [
        apply_trace(loaded.kernel, [parse_step(step, registry)], registry, ctx).kernel
        for step in ("fast-math{at=all}", "vectorize-strided{loop=L0,width=4}")]
    with MLXEvaluator(loaded, "cuda", runner=SlowLoggingRunner(os.devnull), warmup=0,
                      repeat=1, gpu_timeout_s=60.0, gpu_startup_s=120.0, workers=1,
                      gpu_workers=3) as ev:
        futures = [ev.submit(kernel) for kernel in kernels]
        real_run, seen = ev.gpu.run, []

        def run(job):
            if not job.compile_ahead:  # the retime's job
                seen.append([f.done() for f in futures])
            return real_run(job)

        ev.gpu.run = run
        assert ev.retime(loaded.kernel, warmup=0, repeat=1).ok
    assert seen == [[True, True, True]]


def test_submitted_candidates_are_validated_in_worker_processes_side_by_side(
        tmp_path, loaded, monkeypatch):
    """submit() validates in the interpreter's worker processes, two candidates at once with
    two workers: validated one at a time in the search's own process, a steady attention
    search on the H200 spent 47 of its 60 s validating (0.4 candidates/s)."""
    from kir.driver.registry import load_registry
    from kir.measure import cases
    from kir.rules import apply_trace, context_for

    log = tmp_path / "validations"
    check = cases.check_kernel

    def logged_check(kernel, context):  # runs in a forked worker: logs to a file
        start = time.monotonic()
        verdict = check(kernel, context)
        time.sleep(0.5)
        with open(log, "a") as f:
            f.write(json.dumps([os.getpid(), start, time.monotonic()]) + "\n")
        return verdict

    monkeypatch.setattr(cases, "check_kernel", logged_check)
    registry = load_registry()
    ctx = context_for(loaded)
    kernels = [apply_trace(loaded.kernel, [parse_step(step, registry)], registry, ctx).kernel
               for step in ("fast-math{at=all}", "vectorize-strided{loop=L0,width=4}")]
    with MLXEvaluator(loaded, "cuda", runner=EmulatorRunner(), warmup=0, repeat=1,
                      gpu_timeout_s=60.0, gpu_startup_s=120.0, workers=2,
                      gpu_workers=2) as ev:
        verdicts = [f.result(timeout=300) for f in [ev.submit(k) for k in kernels]]
    assert all(v.ok for v in verdicts), [v.reason for v in verdicts]
    rows = [json.loads(line) for line in open(log)]
    assert len(rows) == 2 and os.getpid() not in {pid for pid, _, _ in rows}
    (_, a0, a1), (_, b0, b1) = rows
    assert a0 < b1 and b0 < a1, "the two validations ran one after the other"


def test_steady_search_through_a_pool(loaded):
    """The steady-state search with a local pool runs to its budget on submit's verdicts."""
    from kir.driver.registry import load_registry

    with MLXEvaluator(loaded, "cuda", runner=PlantedRunner(), warmup=0, repeat=2,
                      gpu_timeout_s=30.0, gpu_startup_s=120.0, workers=1,
                      gpu_workers=2) as ev:
        result = search(loaded.kernel, load_registry(), ev, RuleContext(sizes=dict(SIZES)),
                        SearchConfig(strategy="steady", budget=6, seed=2))
    assert len(result.history) == 6
    assert any(r.status == "ok" and r.genome for r in result.history)


class StartupLoggingRunner(LoggingRunner):
    """LoggingRunner that notes each device probe (``health``) and, in a process that has
    run no kernel yet (a worker on its preparation job), makes the probe take ``startup_s``:
    a slow start-up (MLX, the GPU context) to be overlapped or cut."""

    def __init__(self, log: str, startup_s: float) -> None:
        super().__init__(log)
        self.startup_s = startup_s

    def run(self, built, case):
        self.ran = True
        return super().run(built, case)

    def health(self):
        start = time.monotonic()
        if not getattr(self, "ran", False):
            time.sleep(self.startup_s)
        self._note("health", start)
        return None


def _job(loaded):
    bound = loaded.bound
    return GpuJob(loaded.kernel, str(bound.spec.path.resolve()), dict(bound.sizes), "cuda",
                  warmup=1, repeat=2)


def _wait_for_probes(log: str, count: int, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while sum(1 for line in open(log) if '"health"' in line) < count \
            and time.monotonic() < deadline:
        time.sleep(0.1)


def test_first_job_starts_every_worker_and_the_next_find_them_ready(tmp_path, loaded):
    """The pool's first job also starts the other workers on a preparation job (case built,
    device probed, no kernel run); the jobs after it run on those workers without starting
    any more."""
    log = str(tmp_path / "log")
    with GpuPool(StartupLoggingRunner(log, 1.0), workers=3, timeout_s=30.0,
                 startup_s=60.0) as pool:
        first = pool.run(_job(loaded))
        assert first.ok, first.reason
        assert pool.started == 3  # started with the first job, before any other was sent
        _wait_for_probes(log, 3)  # the two others finish preparing
        later = list(pool.run_many([_job(loaded)] * 4))
        assert all(v.ok for v in later) and pool.started == 3
    rows = [json.loads(line) for line in open(log)]
    first_seen = {}
    for what, pid, start, end in sorted(rows, key=lambda r: r[2]):
        first_seen.setdefault(pid, (what, end - start))
    prepared = [pid for pid, (what, took) in first_seen.items()
                if what == "health" and took >= 0.9]
    assert len(first_seen) == 3 and len(prepared) == 2, rows  # two started unasked, slowly
    assert {pid for what, pid, *_ in rows if what == "run"} <= set(first_seen)


def test_neither_the_first_job_nor_closing_waits_for_workers_still_starting(loaded):
    """The first candidate's timing does not wait for the other workers' start-up (it holds
    no GPU lock), and a search shorter than that start-up (one candidate, then close) kills
    the workers still preparing instead of waiting for them."""
    with GpuPool(StartupLoggingRunner(os.devnull, 60.0), workers=3, timeout_s=30.0,
                 startup_s=120.0) as pool:
        began = time.monotonic()
        assert pool.run(_job(loaded)).ok
        assert time.monotonic() - began < 30.0
        began = time.monotonic()
    assert time.monotonic() - began < 15.0


def test_prepare_starts_every_worker_before_any_job(tmp_path, loaded):
    """pool.prepare (what a search calls before building its hints) starts all workers at
    once, once; the jobs that follow start no more and run no preparation again."""
    log = str(tmp_path / "log")
    open(log, "w").close()
    with GpuPool(StartupLoggingRunner(log, 0.5), workers=3, timeout_s=30.0,
                 startup_s=60.0) as pool:
        pool.prepare(_job(loaded))
        pool.prepare(_job(loaded))  # once a pool
        _wait_for_probes(log, 3)
        assert pool.started == 3
        verdicts = list(pool.run_many([_job(loaded)] * 4))
        assert all(v.ok for v in verdicts) and pool.started == 3
    rows = [json.loads(line) for line in open(log)]
    first_seen = {}
    for what, pid, start, end in sorted(rows, key=lambda r: r[2]):
        first_seen.setdefault(pid, what)
    assert list(first_seen.values()) == ["health"] * 3, rows
    assert len([r for r in rows if r[0] == "run"]) == 4


def test_the_evaluator_starts_its_workers_before_the_first_candidate(tmp_path, loaded):
    """MLXEvaluator.start: the GPU workers start on the unrewritten kernel's case."""
    log = str(tmp_path / "log")
    open(log, "w").close()
    with MLXEvaluator(loaded, "cuda", runner=StartupLoggingRunner(log, 0.2), warmup=0,
                      repeat=2, gpu_timeout_s=30.0, gpu_startup_s=60.0, workers=1,
                      gpu_workers=2) as ev:
        ev.start()
        _wait_for_probes(log, 2)
        assert ev.gpu.started == 2 and ev.stats["gpu_jobs"] == 0
        assert ev.evaluate(loaded.kernel).ok
        assert ev.gpu.started == 2
