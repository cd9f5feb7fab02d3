"""A search that stops drops what it has in flight instead of finishing it: its validations,
under way or waiting, are cancelled (:meth:`kir.measure.cpu_pool.CheckPool.cancel`), a
candidate whose validation ends after the stop goes no further, and the GPU workers still on
a candidate are killed (:meth:`kir.measure.mlx.MLXEvaluator.quiesce`). On the H200 a 60-s
attention search left 15 candidates in flight and waited 15 s for them before timing its
finalists. Runs on the CPU emulator (no GPU here)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kir.driver.load import load_kernel
from kir.measure.cpu_pool import CheckPool
from kir.measure.gpu.jobs import EmulatorRunner
from kir.measure.mlx import STOPPED, MLXEvaluator
from kir.search.evaluator import Evaluation

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _slow_check(seconds: float, context: None) -> Evaluation:
    time.sleep(seconds)
    return Evaluation.timed(seconds)


def test_cancel_answers_every_thread_at_once_and_the_pool_goes_on():
    """Three threads each check one candidate on a one-worker pool (10 s each): the first
    runs, the other two wait. cancel() answers all three "not checked" at once, and the
    pool's next run gets a new worker and a real verdict."""
    pool = CheckPool(_slow_check, None, workers=1, timeout_s=60.0)
    verdicts: dict[int, Evaluation] = {}

    def check(i: int) -> None:
        verdicts[i] = next(iter(pool.run([10.0])))

    threads = [threading.Thread(target=check, args=(i,)) for i in range(3)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # the first is with the worker, the others queued
        started = time.monotonic()
        pool.cancel()
        for thread in threads:
            thread.join(timeout=30)
        waited = time.monotonic() - started
        after = next(iter(pool.run([0.1])))
    finally:
        pool.close()
    for i in range(3):
        assert not verdicts[i].ok and "not checked" in verdicts[i].error, verdicts[i]
    assert waited < 5.0, f"the cancelled checks waited {waited:.2f} s"
    assert after.ok and after.time_ms == 0.1


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 8, "cols": 100})


def test_quiesce_drops_the_candidates_still_waiting_and_forgets_them(loaded, monkeypatch):
    """Six candidates submitted with each validation taking 3 s on two workers: quiesce
    returns without waiting for the validations (not after all six), the dropped ones
    answer STOPPED and reach no GPU job, and a dropped candidate judged again later gets a
    real verdict (a STOPPED answer is not remembered as its source's verdict)."""
    from kir.driver.registry import load_registry
    from kir.measure import cases
    from kir.rules import apply_trace, context_for, parse_step

    check = cases.check_kernel

    def slow_check(kernel, context):  # runs in the forked validation worker
        time.sleep(3.0)
        return check(kernel, context)

    monkeypatch.setattr(cases, "check_kernel", slow_check)
    registry = load_registry()
    ctx = context_for(loaded)
    steps = ["fast-math{at=all}", "vectorize-strided{loop=L0,width=4}",
             "vectorize-strided{loop=L0,width=2}", "unroll-loop{loop=L0,factor=2}",
             "unroll-loop{loop=L0,factor=4}"]
    kernels = [loaded.kernel] + [
        apply_trace(loaded.kernel, [parse_step(step, registry)], registry, ctx).kernel
        for step in steps]
    with MLXEvaluator(loaded, "cuda", runner=EmulatorRunner(), warmup=0, repeat=1,
                      gpu_timeout_s=60.0, gpu_startup_s=120.0, workers=2,
                      gpu_workers=len(kernels)) as ev:
        assert ev.capacity == len(kernels) + 2  # a job per GPU and per validation worker
        futures = [ev.submit(kernel) for kernel in kernels]
        time.sleep(0.5)  # two validations under way, four waiting for a worker
        started = time.monotonic()
        ev.quiesce()
        waited = time.monotonic() - started
        verdicts = [f.result(timeout=0) for f in futures]
        stopped = [v is STOPPED for v in verdicts]
        assert all(stopped) and ev.stats["gpu_jobs"] == 0, verdicts
        assert ev.phases().counts["dropped at the stop"] == len(kernels)  # the time line's
        assert waited < 2.5, f"quiesce waited {waited:.1f} s"  # 9 s to finish them
        dropped = kernels[stopped.index(True)]
        again = ev.evaluate(dropped)
    assert again.ok, again.error


class SlowCompileRunner(EmulatorRunner):
    """The emulator, with a search's compile (``build_ahead``) taking 30 s: a large
    candidate's NVRTC compile took 20 s on the H200. The finalists' timing compiles through
    ``build`` (as MLX itself does) and is quick."""

    def build_ahead(self, emitted):
        time.sleep(30)
        return self.build(emitted)


def test_quiesce_kills_the_gpu_jobs_under_way_and_a_final_timing_follows(loaded):
    """Two candidates reach their GPU workers and compile for 30 s: quiesce kills those
    workers instead of waiting, both answer STOPPED, and the finalists' timing (retime)
    that follows runs on a worker of the pool and answers."""
    from kir.driver.registry import load_registry
    from kir.rules import apply_trace, context_for, parse_step

    registry = load_registry()
    ctx = context_for(loaded)
    kernels = [loaded.kernel, apply_trace(loaded.kernel, [parse_step("fast-math{at=all}",
                                                                    registry)],
                                          registry, ctx).kernel]
    with MLXEvaluator(loaded, "cuda", runner=SlowCompileRunner(), warmup=0, repeat=1,
                      gpu_timeout_s=120.0, gpu_startup_s=120.0, workers=1,
                      gpu_workers=3) as ev:
        futures = [ev.submit(kernel) for kernel in kernels]
        deadline = time.monotonic() + 120
        while len(ev.gpu._running) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # both validated (in this process) and compiling
        assert len(ev.gpu._running) == 2
        started = time.monotonic()
        ev.quiesce()
        waited = time.monotonic() - started
        assert [f.result(timeout=0) for f in futures] == [STOPPED, STOPPED]
        assert waited < 10, f"quiesce waited {waited:.1f} s for compiles it does not need"
        again = ev.retime(kernels[1], warmup=0, repeat=1)
    assert again.ok, again.error


def test_a_check_waiting_for_a_worker_is_not_timed_out_by_the_wait():
    """Four threads share a one-worker pool and each checks a candidate that takes 0.4 s
    under a 1.5-s timeout: the last waits 1.2 s for the worker first. Its clock starts when
    the pool hands it to the worker's queue (kir.measure.cpu_pool._mark_started: at most one
    task early, here 0.8 s before it ends), not when its thread submitted it: counted from
    submission it would read 1.6 s and be answered "timeout"."""
    pool = CheckPool(_slow_check, None, workers=1, timeout_s=1.5)
    verdicts: dict[int, Evaluation] = {}

    def check(i: int) -> None:
        verdicts[i] = next(iter(pool.run([0.4])))

    try:
        threads = [threading.Thread(target=check, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        pool.close()
    assert sorted(verdicts) == [0, 1, 2, 3]
    assert all(v.ok for v in verdicts.values()), {i: v.error for i, v in verdicts.items()}


def test_the_pool_outlives_the_thread_that_started_it():
    """Linux kills a check worker when the thread that forked it ends (PR_SET_PDEATHSIG):
    a pool started by a thread that has finished must still check the next thread's
    candidates (CheckPool._started forks from a thread of its own)."""
    pool = CheckPool(_slow_check, None, workers=1, timeout_s=30.0)
    first: list[Evaluation] = []
    try:
        starter = threading.Thread(target=lambda: first.extend(pool.run([0.0])))
        starter.start()
        starter.join(30)
        time.sleep(0.5)  # time for a signal sent at the thread's end to land
        later = next(iter(pool.run([0.0])))
    finally:
        pool.close()
    assert first and first[0].ok
    assert later.ok, later.error
