"""Candidate isolation: a candidate that hangs or crashes its checker is recorded as "timeout"
or "crash", its worker is killed and replaced, and the other candidates get their verdicts.

Covers the search's worker pool (:class:`kir.measure.cpu_pool.CheckPool`, what ModelEvaluator and
MLXEvaluator validate through) and the C++ emulator's worker process.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import time

import numpy as np
import pytest

from kir.measure.cpu_pool import CheckPool
from kir.search.evaluator import Evaluation


def _check(candidate: str, context: float) -> Evaluation:
    """A checker whose candidate says what to do: hang, die, raise, or pass (time = pid)."""
    if candidate == "hang":
        while True:
            time.sleep(0.05)
    if candidate == "segfault":
        faulthandler.disable()  # the death is the point: no dump of the worker's stack
        os.kill(os.getpid(), signal.SIGSEGV)
    if candidate == "exit":
        os._exit(7)
    if candidate == "raise":
        raise ValueError("broken rule output")
    if candidate == "slow":
        time.sleep(0.8)
    return Evaluation.timed(float(os.getpid()) + context)


def _verdict(evaluation: Evaluation) -> str:
    return evaluation.status


@pytest.mark.parametrize("workers", [1, 2])
def test_hang_crash_and_exception_are_recorded_and_the_rest_complete(workers):
    pool = CheckPool(_check, 0.0, workers=workers, timeout_s=1.5)
    batch = ["ok", "hang", "ok", "segfault", "ok", "raise", "exit", "ok"]
    try:
        started = time.monotonic()
        verdicts = [_verdict(e) for e in pool.run(batch)]
        elapsed = time.monotonic() - started
        # The pool still works after all that: a fresh worker answers.
        again = [_verdict(e) for e in pool.run(["ok", "ok"])]
    finally:
        pool.close()
    assert verdicts == ["ok", "timeout", "ok", "crash", "ok", "crash", "crash", "ok"]
    assert again == ["ok", "ok"]
    assert elapsed < 30, f"isolation cost {elapsed:.1f} s"


def test_a_hung_worker_is_killed_not_left_running():
    pool = CheckPool(_check, 0.0, workers=1, timeout_s=1.0)
    try:
        first = next(iter(pool.run(["ok"])))
        hung_pid = int(first.time_ms)  # the worker that will hang next
        assert [_verdict(e) for e in pool.run(["hang"])] == ["timeout"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(hung_pid):
            time.sleep(0.1)
        assert not _alive(hung_pid), "the hung worker process was left running"
        after = next(iter(pool.run(["ok"])))
        assert int(after.time_ms) != hung_pid  # replaced
    finally:
        pool.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (the pool reaps it when it next looks).
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


def test_model_evaluator_records_a_spinning_candidate_and_continues(tmp_path):
    """End to end: a rewritten kernel that never ends is a 'timeout' verdict in the search's
    evaluator, and the unrewritten kernel in the same batch still validates."""
    from kir.driver.load import load_kernel
    from kir.ir import Block, Const, For, Kernel, Var
    from kir.ir.types import BOOL, I32
    from kir.measure.model import ModelEvaluator

    loaded = load_kernel("examples/softmax.cu", sizes={"rows": 2, "cols": 64})
    base = loaded.kernel
    # `for (i = 0; true; i = i)` at the top of the body: runs forever on the interpreter.
    spin = For("L99", "spin_i", I32, Const(0, I32), Const(True, BOOL), Var("spin_i", I32),
               Block(()))
    hung = Kernel(base.name, base.params, Block((spin,) + base.body.stmts), base.launch)
    evaluator = ModelEvaluator(loaded, profile="apple-m2", workers=2, timeout_s=3.0,
                               max_steps=10**12)
    try:
        verdicts = [_verdict(e) for e in evaluator.check_many([base, hung, base])]
    finally:
        evaluator.close()
    assert verdicts == ["ok", "timeout", "ok"]


def test_emulator_hang_and_crash_leave_the_next_launch_working():
    from kir.backends.emulate import emulator_available, metal_kernel
    from kir.backends.emulate.toolchain import EmulatorError

    ok, why = emulator_available()
    if not ok:
        pytest.skip(f"no C++ emulator here: {why}")
    f32 = np.float32
    spin = metal_kernel("rel_spin", ["x"], ["out"], """
        uint i = thread_position_in_grid.x;
        volatile float v = x[i];
        while (v == v) { }
        out[i] = v;
    """)
    crash = metal_kernel("rel_crash", ["x"], ["out"], """
        uint i = thread_position_in_grid.x;
        device float* bad = (device float*)(uintptr_t)16;
        out[i] = bad[i * 4096];
    """)
    fine = metal_kernel("rel_fine", ["x"], ["out"], """
        uint i = thread_position_in_grid.x;
        out[i] = x[i] * 2.0f;
    """)
    launch = dict(inputs=[np.arange(4, dtype=f32)], grid=(4, 1, 1), threadgroup=(4, 1, 1),
                  output_shapes=[(4,)], output_dtypes=[f32])
    with pytest.raises(EmulatorError) as hang:
        spin(**launch, timeout=1.0)
    assert hang.value.kind == "timeout"
    with pytest.raises(EmulatorError) as dead:
        crash(**launch)
    assert dead.value.kind == "crash"
    (out,) = fine(**launch)
    np.testing.assert_array_equal(out, np.arange(4, dtype=f32) * 2)


def _niceness(candidate: str, context: None) -> Evaluation:
    return Evaluation.timed(float(os.nice(0)))


def test_checking_workers_run_at_a_lower_priority_than_the_search():
    """The search's own process breeds the candidates its workers check: on a busy host it
    must not wait for a core behind them (kir.measure.cpu_pool.CHECK_NICENESS)."""
    from kir.measure.cpu_pool import CHECK_NICENESS

    pool = CheckPool(_niceness, None, workers=1, timeout_s=30.0)
    try:
        verdict = next(iter(pool.run(["ok"])))
    finally:
        pool.close()
    assert verdict.time_ms == min(os.nice(0) + CHECK_NICENESS, 19)


def test_a_timeout_in_one_thread_does_not_reject_the_others_candidates():
    """Threads of a steady search share a pool: when one thread's candidate hangs and the
    pool is replaced, the candidates other threads were running or had waiting are checked
    again on the new workers. Before, those waiting were answered "crash: checking raised
    CancelledError" and those running timed out with the hang. A loaded CI machine once saw
    one answered "the worker process died": the new pool's workers had been forked by a
    thread that then finished, and Linux killed them with it (PR_SET_PDEATHSIG); the pool
    now forks from a thread of its own (CheckPool._started)."""
    import threading

    pool = CheckPool(_check, 0.0, workers=2, timeout_s=3.0)
    verdicts: dict[str, Evaluation] = {}

    def check(name: str, candidate: str) -> None:
        verdicts[name] = next(iter(pool.run([candidate])))

    threads = [threading.Thread(target=check, args=("hang", "hang"))]
    # The slow ones take turns on the other worker: when the hang's 3 s are up, one runs,
    # one waits with the worker and one in the pool's queue; each finished one ended well
    # inside its own 3 s.
    threads += [threading.Thread(target=check, args=(f"slow{i}", "slow")) for i in range(6)]
    try:
        threads[0].start()
        time.sleep(0.3)  # the hang holds one worker; the others take turns on the other
        for thread in threads[1:]:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        pool.close()
    assert _verdict(verdicts.pop("hang")) == "timeout"
    assert len(verdicts) == 6
    for name, verdict in verdicts.items():
        assert verdict.ok, (name, verdict)
