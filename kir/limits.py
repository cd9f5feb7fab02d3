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


class time_limit:
    """``with time_limit(seconds, error):`` runs the block under a wall-clock limit.

    Past the limit, :class:`TimeLimitExceeded` is raised inside the block wherever it is
    (between two bytecodes: one long C call, a numpy operation say, finishes first), again
    every ``REPEAT_S`` while the block goes on (code that swallows it gets it again), and
    the ``with`` statement raises ``error(where)`` instead: ``where`` is the frame the block
    was in when the limit ran out (a ``traceback.FrameSummary``: the user's own line, for a
    reference or a rule that spins), or None. A block that swallowed every interruption and
    then finished still ends in ``error``: its answer came too late. ``seconds=None``: no
    limit.

    In the main thread the clock is SIGALRM (``ITIMER_REAL``), which also interrupts a
    sleep or a blocking read; limits nest, and a timer someone else had set is put back
    afterwards. Code that catches the exception and carries on (``except BaseException:`` in
    a loop) is traced from the second interruption on: the exception is raised again at its
    next line, inside its own handler, which it cannot catch there. In another thread a
    watchdog thread raises the exception asynchronously (a blocking call then finishes
    first; no tracing).
    """

    def __init__(self, seconds: float | None,
                 error: Callable[["traceback.FrameSummary | None"], BaseException]) -> None:
        self.seconds = seconds
        self.error = error
        self.deadline = 0.0
        self.active = False
        self.fired = False
        self.last_fire = 0.0
        self.where: traceback.FrameSummary | None = None
        self._watchdog: _Watchdog | None = None
        self._entry_frame: FrameType | None = None
        self._saved_trace: object = _UNSET

    def next_fire(self) -> float:
        return self.last_fire + REPEAT_S if self.fired else self.deadline

    def note_fire(self, frame: FrameType | None) -> None:
        self.fired = True
        self.last_fire = time.monotonic()
        if self.where is None and frame is not None:
            self.where = traceback.extract_stack(frame, limit=1)[-1]

    def __enter__(self) -> "time_limit":
        if self.seconds is None:
            return self
        self.deadline = time.monotonic() + float(self.seconds)
        self.active = True
        self._entry_frame = sys._getframe(1)
        if _signal_clock_usable():
            _SignalClock.push(self)
        else:
            self._watchdog = _Watchdog(self)
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if not self.active:
            return False
        self.active = False
        if self._watchdog is not None:
            self._watchdog.stop()
        else:
            _SignalClock.pop(self)
        if self._saved_trace is not _UNSET:
            sys.settrace(self._saved_trace)  # type: ignore[arg-type]
        self._entry_frame = None
        if not self.fired:
            return False
        if isinstance(exc, TimeLimitExceeded) and exc.owner not in (None, self) \
                and exc.owner.active:
            return False  # an enclosing limit ran out too: its owner reports it
        raise self.error(self.where) from None

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


def _signal_clock_usable() -> bool:
    return hasattr(signal, "setitimer") and \
        threading.current_thread() is threading.main_thread()


class _SignalClock:
    """The main thread's active limits (outermost first) on one ITIMER_REAL."""

    active: list[time_limit] = []
    saved_handler: object = None
    saved_timer: tuple[float, float] = (0.0, 0.0)
    saved_at = 0.0

    @classmethod
    def push(cls, limit: time_limit) -> None:
        if not cls.active:
            cls.saved_handler = signal.signal(signal.SIGALRM, cls.on_alarm)
            cls.saved_timer = signal.setitimer(signal.ITIMER_REAL, 0)
            cls.saved_at = time.monotonic()
        cls.active.append(limit)
        cls.rearm()

    @classmethod
    def pop(cls, limit: time_limit) -> None:
        if limit in cls.active:
            cls.active.remove(limit)
        if cls.active:
            cls.rearm()
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, cls.saved_handler or signal.SIG_DFL)  # type: ignore
        remaining, interval = cls.saved_timer
        if remaining > 0:  # someone else's timer (pytest-timeout, say): put it back
            left = remaining - (time.monotonic() - cls.saved_at)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), interval)

    @classmethod
    def rearm(cls) -> None:
        wake = min(limit.next_fire() for limit in cls.active)
        signal.setitimer(signal.ITIMER_REAL, max(wake - time.monotonic(), 0.001))

    @classmethod
    def on_alarm(cls, signum: int, frame: FrameType | None) -> None:  # noqa: ARG003
        now = time.monotonic()
        due = [limit for limit in cls.active if limit.active and now >= limit.next_fire()]
        if not due:
            if cls.active:
                cls.rearm()
            return
        owner = due[0]  # the outermost: its exception unwinds through the inner ones
        swallowed = owner.fired  # it was raised before, and the block went on
        owner.note_fire(frame)
        cls.rearm()
        if swallowed:
            owner.trace_until_stopped(frame)
        raise TimeLimitExceeded(owner)


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
        while not self.done.wait(max(self.limit.next_fire() - time.monotonic(), 0.0)):
            with self.lock:
                if not self.limit.active:
                    return
                self.limit.note_fire(sys._current_frames().get(self.target))
                _async_raise(self.target, TimeLimitExceeded)

    def stop(self) -> None:
        with self.lock:
            self.done.set()
            _async_raise(self.target, None)  # drop one raised but not yet delivered


def _async_raise(thread_id: int, exc: type | None) -> None:
    set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_async(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None)
