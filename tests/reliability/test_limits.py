"""kir.limits: the clock every guarded call runs under, and the --limit option."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from kir.commands.main import main
from kir.errors import KirError
from kir.limits import Limits, cpu_limit, parse_limits, time_limit

from .cli import EXAMPLES


class Late(Exception):
    pass


def _late(overrun):
    return Late(overrun)


def spin() -> None:
    while True:
        pass


@pytest.mark.parametrize("cpu", [False, True])
def test_a_spinning_block_is_stopped_with_the_place_it_spun(cpu):
    start = time.monotonic()
    with pytest.raises(Late) as info:
        with time_limit(0.3, _late, cpu=cpu):
            spin()
    assert time.monotonic() - start < 10
    overrun = info.value.args[0]
    assert overrun.cpu is cpu and overrun.seconds == 0.3
    assert overrun.where[-1].name == "spin"  # the user's own frame, innermost
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_a_block_in_time_leaves_no_timer_and_no_handler():
    before = signal.getsignal(signal.SIGALRM)
    with cpu_limit(5, _late):
        total = sum(range(1000))
    assert total == 499500
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_block_that_swallows_every_interruption_is_still_stopped():
    def stubborn() -> None:
        while True:
            try:
                time.sleep(100)
            except BaseException:  # noqa: BLE001 - the point of the test
                pass

    start = time.monotonic()
    with pytest.raises(Late):
        with time_limit(0.3, _late):
            stubborn()
    assert time.monotonic() - start < 10


def test_limits_nest_and_each_reports_its_own():
    with pytest.raises(Late) as outer:
        with time_limit(0.3, lambda o: Late("outer")):
            with time_limit(30, lambda o: Late("inner")):
                spin()
    assert outer.value.args == ("outer",)
    with pytest.raises(ValueError, match="inner"):
        with time_limit(30, lambda o: Late("outer")):
            with time_limit(0.3, lambda o: ValueError("inner")):
                spin()


def test_someone_elses_timer_is_put_back():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with time_limit(5, _late):
            pass
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining <= 1.0
        time.sleep(1.2)
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_a_watchdog_stops_the_block():
    outcome = []

    def worker() -> None:
        try:
            with time_limit(0.3, _late):
                spin()
        except Late:
            outcome.append("stopped")

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    thread.join(20)
    assert outcome == ["stopped"]


# A limit left off the main thread, then a block that sleeps and swallows every interruption
# under cpu_limit on the main thread (both clocks): before the fix, the watchdog's clean-up
# left CPython's "asynchronous exception pending" flag set and the second part never ended.
AFTER_A_WATCHDOG = """
import threading, time
from kir.limits import cpu_limit, time_limit

def worker():
    with time_limit(5, ValueError):
        pass

thread = threading.Thread(target=worker)
thread.start()
thread.join()
start = time.monotonic()
try:
    with cpu_limit(0.05, lambda overrun: ValueError("late")):
        while True:
            try:
                time.sleep(1000)
            except BaseException:
                pass
except ValueError:
    print(f"stopped in {time.monotonic() - start:.2f} s")
"""


def test_main_thread_limits_still_stop_after_a_watchdog_ran():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", AFTER_A_WATCHDOG], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "stopped in" in done.stdout, done.stdout + done.stderr


def test_parse_limits():
    limits = parse_limits(["reference_s=5m", "ir_nodes=500", "memory_fraction=0.5"])
    assert limits == Limits(reference_s=300.0, ir_nodes=500, memory_fraction=0.5)
    for bad in ("nope=3", "rule_s", "rule_s=soon", "ir_nodes=-1", "memory_fraction=2"):
        with pytest.raises(KirError):
            parse_limits([bad])


def test_a_bad_limit_on_the_command_line_is_exit_2(capsys):
    assert main(["parse", str(EXAMPLES / "reduce.cu"), "--limit", "rule_seconds=3"]) == 2
    err = capsys.readouterr().err
    assert "bad --limit" in err and "rule_s" in err
