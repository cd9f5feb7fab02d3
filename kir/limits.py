"""The bounds kir puts on every piece a user hands it, and the clock that enforces them.

A user's reference function, a user's rule, a kernel on the interpreter, a candidate in the
search, a size expression and a rewritten IR can each run (or grow) without end. Each runs
under a limit; past it, the work stops with a :class:`~kir.errors.KirError` that names what
ran over and where (or, inside a search, with that candidate's verdict), never a hang.
docs/RELIABILITY.md lists them with what each produces.

:class:`Limits` holds the adjustable ones. The CLI sets them for one command
(``kir run X.cu --limit reference_s=300``) with :func:`configured`; library code reads
:func:`current`. They are a dynamic scope (as numpy's ``errstate`` is) rather than a
parameter because the guarded calls sit deep in every path (a spec's reference runs under
``kir run``, ``kir compile`` and the search; a rule under ``kir apply``, ``kir rules test``
and the search), and the limits are the same for all of them within one command.

:class:`time_limit` is the clock: a block that runs past its seconds gets an exception raised
inside it, which its ``with`` statement turns into the caller's error.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import re
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Callable, Iterator

from kir.errors import KirError


@dataclass(frozen=True)
class Limits:
    """The adjustable limits (``--limit NAME=VALUE`` on every command)."""

    reference_s: float = 60.0  # one call of a spec's reference function (and its import)
    rule_s: float = 10.0  # one rule application: its legality analysis at a site and apply
    interp_s: float = 120.0  # one kernel run on the interpreter (kir run, kir compile)
    candidate_s: float = 120.0  # checking one search candidate in a worker process
    ir_nodes: int = 100_000  # nodes of a kernel a rule step may produce
    memory_fraction: float = 0.8  # of the available memory the inputs of one run may need


DESCRIPTIONS = {
    "reference_s": "seconds one call of the spec's reference function may take",
    "rule_s": "seconds one rule application (analysis at a site and apply) may take",
    "interp_s": "seconds one kernel run on the interpreter may take",
    "candidate_s": "seconds checking one search candidate may take",
    "ir_nodes": "IR nodes a rule step may produce",
    "memory_fraction": "share of the available memory one run's buffers may need",
}

_current = Limits()


def current() -> Limits:
    """The limits in force (the defaults unless a caller :func:`configured` others)."""
    return _current


@contextmanager
def configured(limits: Limits) -> Iterator[Limits]:
    """Make ``limits`` the ones in force inside the block."""
    global _current
    before, _current = _current, limits
    try:
        yield limits
    finally:
        _current = before


def parse_duration(text: str, what: str = "duration") -> float:
    """``"90"``, ``"30s"``, ``"5m"``, ``"1h"`` (also ``"1m30s"``) → seconds; ``what`` names
    the option in the error (``"--time"``)."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*"
                         r"(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or not match or not any(match.groups()):
        raise KirError(f"bad {what} {text!r}",
                       hint="write seconds or a duration: 90, 30s, 5m, 1h")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise KirError(f"bad {what} {text!r}: it must be more than zero")
    return total


def parse_limits(items: list[str] | None, base: Limits | None = None) -> Limits:
    """``["reference_s=300", "ir_nodes=500000"]`` applied to ``base`` (the defaults)."""
    limits = base or Limits()
    known = {f.name: f for f in dataclasses.fields(Limits)}
    for item in items or []:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            listed = "; ".join(f"{n} ({DESCRIPTIONS[n]})" for n in known)
            raise KirError(f"bad --limit {item!r}", hint=f"write NAME=VALUE; names: {listed}")
        try:
            if name.endswith("_s"):
                value: float | int = parse_duration(text)
            elif name == "ir_nodes":
                value = int(text)
            else:
                value = float(text)
        except (KirError, ValueError):
            raise KirError(f"bad --limit {item!r}: {text!r} is not a "
                           f"{'duration' if name.endswith('_s') else 'number'}") from None
        if not value > 0 or (name == "memory_fraction" and value > 1):
            raise KirError(f"bad --limit {item!r}: it must be more than zero"
                           + (" and at most 1" if name == "memory_fraction" else ""))
        limits = dataclasses.replace(limits, **{name: value})
    return limits


def limit_hint(name: str, value: float | int) -> str:
    """How to raise limit ``name`` (for an error's hint)."""
    raised = value * 10 if isinstance(value, int) else f"{value * 5:g}"
    return f"if it needs longer, raise the limit: --limit {name}={raised}"


def available_memory() -> int | None:
    """Bytes this process can still allocate, as far as the system says: Linux's
    MemAvailable (else the physical memory), capped by an address-space limit
    (``ulimit -v``); None when it cannot tell."""
    found: int | None = None
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    found = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if found is None:
        try:
            found = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            found = None
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            found = soft if found is None else min(found, soft)
    except (ImportError, ValueError, OSError):
        pass
    return found


# ------------------------------------------------------------------------------- the clock


class TimeLimitExceeded(BaseException):
    """Raised inside a block that ran past its :class:`time_limit`. A BaseException, as
    KeyboardInterrupt is, so a user's ``except Exception:`` does not swallow it; the
    ``time_limit`` turns it into its owner's error when it leaves the block."""

    def __init__(self, owner: "time_limit | None" = None) -> None:
        super().__init__("time limit exceeded")
        self.owner = owner


REPEAT_S = 0.25  # after the limit: raised again this often, while the block goes on
WALL_FACTOR = 6  # a CPU-time limit's wall-clock backstop, for code that sleeps or blocks


@dataclass(frozen=True)
class Overrun:
    """What a :class:`time_limit` tells its error: the stack the block was running when the
    limit ran out (outermost first; :func:`frame_in` picks the user's own line), the limit,
    and its clock."""

    where: list[traceback.FrameSummary]
    seconds: float
    cpu: bool

    @property
    def limit_text(self) -> str:
        """``10 s of CPU time`` or ``60 s``."""
        return f"{self.seconds:g} s" + (" of CPU time" if self.cpu else "")


class time_limit:
    """``with time_limit(seconds, error):`` runs the block under a time limit: wall-clock
    time, or with ``cpu=True`` the process's CPU time (which a busy machine does not eat
    into, so a loaded machine refuses nothing an idle one accepts; a block that sleeps or
    blocks spends none: give it a wall-clock limit too, see :func:`cpu_limit`).

    Past the limit, :class:`TimeLimitExceeded` is raised inside the block wherever it is
    (between two bytecodes: one long C call, a numpy operation say, finishes first), again
    every ``REPEAT_S`` while the block goes on (code that swallows it gets it again), and
    the ``with`` statement raises ``error(Overrun(...))`` instead. A block that swallowed
    every interruption and then finished still ends in ``error``: its answer came too late.
    ``seconds=None``: no limit.

    In the main thread the clock is a signal (SIGALRM on ``ITIMER_REAL``, SIGPROF on
    ``ITIMER_PROF`` for CPU time), which also interrupts a sleep or a blocking read; limits
    nest, and a timer someone else had set is put back afterwards. Code that catches the
    exception and carries on (``except BaseException:`` in a loop) is traced from the second
    interruption on: the exception is raised again at its next line, inside its own handler,
    which it cannot catch there. In another thread (or without those signals) a watchdog
    thread raises the exception asynchronously on the wall clock (a blocking call then
    finishes first; no tracing).
    """

    def __init__(self, seconds: float | None, error: Callable[[Overrun], BaseException], *,
                 cpu: bool = False) -> None:
        self.seconds = seconds
        self.error = error
        self.cpu = cpu
        self.clock: _SignalClock | None = None
        self.deadline = 0.0
        self.active = False
        self.fired = False
        self.last_fire = 0.0
        self.where: list[traceback.FrameSummary] = []
        self._watchdog: _Watchdog | None = None
        self._entry_frame: FrameType | None = None
        self._saved_trace: object = _UNSET

    def now(self) -> float:
        return self.clock.now() if self.clock is not None else time.monotonic()

    def next_fire(self) -> float:
        return self.last_fire + REPEAT_S if self.fired else self.deadline

    def note_fire(self, frame: FrameType | None) -> None:
        self.fired = True
        self.last_fire = self.now()
        if not self.where and frame is not None:
            self.where = list(traceback.extract_stack(frame, limit=64))

    def __enter__(self) -> "time_limit":
        if self.seconds is None:
            return self
        self.clock = _clock(self.cpu)
        self.deadline = self.now() + float(self.seconds)
        self.active = True
        self._entry_frame = sys._getframe(1)
        if self.clock is not None:
            self.clock.push(self)
        else:
            self.cpu = False  # the watchdog keeps wall-clock time only
            self._watchdog = _Watchdog(self)
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if not self.active:
            return False
        self.active = False
        if self._watchdog is not None:
            try:
                self._watchdog.stop()
                _delivery_point()
            except TimeLimitExceeded:
                pass  # raised by the watchdog just before it stopped: the block has ended
        elif self.clock is not None:
            self.clock.pop(self)
        if self._saved_trace is not _UNSET:
            sys.settrace(self._saved_trace)  # type: ignore[arg-type]
        self._entry_frame = None
        if not self.fired:
            return False
        if isinstance(exc, TimeLimitExceeded) and exc.owner not in (None, self) \
                and exc.owner.active:
            return False  # an enclosing limit ran out too: its owner reports it
        raise self.error(Overrun(self.where, float(self.seconds or 0), self.cpu)) from None

    def trace_until_stopped(self, frame: FrameType | None) -> None:
        """Raise TimeLimitExceeded again at a line of the block's own frames (those from
        ``frame`` up to the one that entered the limit, and any they call): the first line
        a frame runs after an exception passed through it is skipped (it is the ``except``
        clause matching it, where a raise would be caught again), the next raises, from
        inside the handler that swallowed the last one. An exception out of a trace function
        turns tracing off: the next interruption traces again."""
        caught: set[int] = set()  # frames an exception is passing through

        def tracer(frame: FrameType, event: str, arg: object):  # noqa: ARG001
            if not self.active or frame.f_code.co_filename == __file__:
                return None  # the clock's own frames (raising the exception) run on
            if event == "exception":
                caught.add(id(frame))
            elif event == "line" and id(frame) in caught:
                caught.discard(id(frame))
            elif event == "line":
                raise TimeLimitExceeded(self)
            return tracer

        while frame is not None and frame is not self._entry_frame:
            frame.f_trace = tracer
            frame.f_trace_lines = True
            frame = frame.f_back
        if self._saved_trace is _UNSET:
            self._saved_trace = sys.gettrace()
        sys.settrace(tracer)


_UNSET = object()


@contextmanager
def cpu_limit(seconds: float | None,
              error: Callable[[Overrun], BaseException]) -> Iterator[None]:
    """``seconds`` of CPU time, and ``WALL_FACTOR`` times as many on the wall clock for code
    that sleeps or blocks instead of computing: the limit for a user's reference or rule."""
    if seconds is None:
        yield
        return
    with time_limit(seconds * WALL_FACTOR, error), time_limit(seconds, error, cpu=True):
        yield


def frame_in(stack: list[traceback.FrameSummary],
             file: str | None = None) -> traceback.FrameSummary | None:
    """The innermost frame of ``stack`` in ``file`` (a user's reference or rule module),
    else the innermost frame; None for an empty stack."""
    from pathlib import Path

    if file:
        own = [f for f in stack if Path(f.filename) == Path(file)]
        if own:
            return own[-1]
    return stack[-1] if stack else None


class _SignalClock:
    """The main thread's active limits on one interval timer (outermost first)."""

    def __init__(self, signum: int, which: int, now: Callable[[], float]) -> None:
        self.signum = signum
        self.which = which
        self.now = now
        self.active: list[time_limit] = []
        self.saved_handler: object = None
        self.saved_timer: tuple[float, float] = (0.0, 0.0)
        self.saved_at = 0.0

    def push(self, limit: time_limit) -> None:
        if not self.active:
            self.saved_handler = signal.signal(self.signum, self.on_signal)
            self.saved_timer = signal.setitimer(self.which, 0)
            self.saved_at = self.now()
        self.active.append(limit)
        self.rearm()

    def pop(self, limit: time_limit) -> None:
        if limit in self.active:
            self.active.remove(limit)
        if self.active:
            self.rearm()
            return
        signal.setitimer(self.which, 0)
        signal.signal(self.signum, self.saved_handler or signal.SIG_DFL)  # type: ignore
        remaining, interval = self.saved_timer
        if remaining > 0:  # someone else's timer (pytest-timeout, say): put it back
            left = remaining - (self.now() - self.saved_at)
            signal.setitimer(self.which, max(left, 0.001), interval)

    def rearm(self, at_least: float = 0.001) -> None:
        wake = min(limit.next_fire() for limit in self.active)
        signal.setitimer(self.which, max(wake - self.now(), at_least))

    def on_signal(self, signum: int, frame: FrameType | None) -> None:  # noqa: ARG002
        global _HANDLING
        if _HANDLING or (frame is not None and frame.f_code.co_filename in _MACHINERY):
            # A handler (this clock's or the other's) is running, or the limits' own code is
            # (a limit being left, an exception already unwinding through a context
            # manager): look again a little later. Not sooner: a timer due again before a
            # handler can finish would interrupt every handler at its first line, for ever.
            if self.active:
                self.rearm(DEFER_S)
            return
        _HANDLING = True
        try:
            now = self.now()
            due = [limit for limit in self.active
                   if limit.active and now >= limit.next_fire()]
            if not due:
                if self.active:
                    self.rearm()
                return
            owner = due[0]  # the outermost: its exception unwinds through the inner ones
            swallowed = owner.fired  # it was raised before, and the block went on
            owner.note_fire(frame)
            self.rearm()
            if swallowed:
                owner.trace_until_stopped(frame)
        finally:
            _HANDLING = False
        raise TimeLimitExceeded(owner)


_MACHINERY = {__file__, contextlib.__file__}
_HANDLING = False  # a signal handler of either clock is running
DEFER_S = 0.01  # how much later a clock looks again when it cannot raise now
_CLOCKS: dict[bool, _SignalClock] = {}


def _clock(cpu: bool) -> _SignalClock | None:
    """The signal clock for wall (``cpu=False``) or CPU time, or None where signals cannot
    serve (another thread than the main one, or no interval timers on this platform)."""
    if threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        return None
    if cpu not in _CLOCKS:
        if cpu and hasattr(signal, "SIGPROF"):
            _CLOCKS[cpu] = _SignalClock(signal.SIGPROF, signal.ITIMER_PROF, time.process_time)
        elif not cpu:
            _CLOCKS[cpu] = _SignalClock(signal.SIGALRM, signal.ITIMER_REAL, time.monotonic)
        else:
            return None
    return _CLOCKS[cpu]


class _Watchdog:
    """Off the main thread: a thread that raises TimeLimitExceeded in the limited one."""

    def __init__(self, limit: time_limit) -> None:
        self.limit = limit
        self.target = threading.get_ident()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch, name="kir-time-limit", daemon=True)
        self.thread.start()

    def watch(self) -> None:
        while not self.done.wait(max(self.limit.next_fire() - self.limit.now(), 0.0)):
            with self.lock:
                if not self.limit.active:
                    return
                self.limit.note_fire(sys._current_frames().get(self.target))
                _async_raise(self.target, TimeLimitExceeded)

    def stop(self) -> None:
        """No raise after this returns. One raised just before is delivered in the calling
        thread at its next function call (:func:`_delivery_point`), where the caller catches
        it. Not cleared with ``PyThreadState_SetAsyncExc(id, NULL)``: on CPython 3.11 that
        leaves the interpreter's "asynchronous exception pending" flag set for good, and with
        it every later signal handler is interrupted at its first line, for ever."""
        with self.lock:
            self.done.set()


def _delivery_point() -> None:
    """A function call: the interpreter delivers a pending asynchronous exception when a
    call starts, so one raised by a watchdog before it stopped arrives here."""


def _async_raise(thread_id: int, exc: type) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))
