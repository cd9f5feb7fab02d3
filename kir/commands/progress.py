"""The search's live progress line on stderr: a redrawn bar on a terminal, plain lines when
stderr is a file or a pipe, so logs stay readable.

The bar fills with the budget spent or the time limit used, whichever is further along, and
shows the elapsed time and an estimate of what is left; on a terminal the line is cut to its
width (a wrapped line cannot be redrawn in place). In a log a line is written every tenth of
the budget or of the time limit, and at least every ``LOG_EVERY_S`` seconds.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Callable, TextIO

from kir.search.engine import Progress

UNBOUNDED = 10**9  # the budget a --time-only search runs with: show no fraction for it
LOG_EVERY_S = 30.0


def clock(seconds: float) -> str:
    """``75.2`` → ``1:15``; ``3725`` → ``1:02:05``."""
    seconds = int(max(0.0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressBar:
    """Call with each :class:`Progress`; :meth:`close` ends the line."""

    def __init__(self, *, modelled: bool, stream: TextIO | None = None, width: int = 16,
                 tty: bool | None = None, time_limit_s: float | None = None,
                 now: Callable[[], float] = time.monotonic, columns: int | None = None) -> None:
        self.stream = stream or sys.stderr
        self.modelled = modelled
        self.width = width
        self.tty = self.stream.isatty() if tty is None else tty
        self.time_limit_s = time_limit_s
        self.now = now
        self.columns = columns
        self.start = now()
        self._last_line = 0
        self._last_time = self.start
        self._drawn = False

    def fraction(self, p: Progress) -> float | None:
        """How far along the search is (0 to 1), by budget or time; None when unbounded."""
        parts = []
        if 0 < p.budget < UNBOUNDED:
            parts.append(p.evaluations / p.budget)
        if self.time_limit_s:
            parts.append((self.now() - self.start) / self.time_limit_s)
        return min(1.0, max(parts)) if parts else None

    def text(self, p: Progress) -> str:
        """The progress line for ``p`` (without the bar)."""
        bounded = 0 < p.budget < UNBOUNDED
        budget = f"/{p.budget}" if bounded else ""
        unit = " (modelled)" if self.modelled else ""
        best = f"best {p.best_ms:.4g} ms{unit}" if p.best_ms is not None else "best —"
        speed = ""
        if p.best_ms and p.baseline_ms:
            speed = f" x{p.baseline_ms / p.best_ms:.3g}"
        cached = f" ({p.cached} from db)" if p.cached else ""
        elapsed = self.now() - self.start
        timing = clock(elapsed)
        done = self.fraction(p)
        if done and 0 < done < 1:
            timing += f" ~{clock(elapsed / done - elapsed)} left"
        return (f"{timing}  {p.evaluations}{budget} evals{cached}  ok {p.valid}  "
                f"rejected {p.invalid}  {best}{speed}")

    def __call__(self, p: Progress) -> None:
        if self.tty:
            done = self.fraction(p) or 0.0
            filled = int(done * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            line = f"[{bar}] {self.text(p)}"
            columns = self.columns or shutil.get_terminal_size((80, 24)).columns
            self.stream.write("\r\x1b[K" + line[:max(10, columns - 1)])
            self._drawn = True
        elif self._log_due(p):
            self.stream.write(f"search: {self.text(p)}\n")
            self._last_line = p.evaluations
            self._last_time = self.now()
        self.stream.flush()

    def _log_due(self, p: Progress) -> bool:
        if p.evaluations == p.budget or p.evaluations == 1:
            return True
        if 0 < p.budget < UNBOUNDED and p.evaluations - self._last_line >= max(1, p.budget // 10):
            return True
        since = self.now() - self._last_time
        every = min(LOG_EVERY_S, self.time_limit_s / 10) if self.time_limit_s else LOG_EVERY_S
        return since >= every

    def close(self) -> None:
        """Finish the bar's line (a terminal keeps the last state visible)."""
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
