"""The search's live progress line on stderr: a redrawn bar on a terminal, plain lines (one
per tenth of the budget) when stderr is a file or a pipe, so logs stay readable."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from kir.search.engine import Progress

UNBOUNDED = 10**9  # the budget a --time-only search runs with: show no fraction for it


class ProgressBar:
    """Call with each :class:`Progress`; :meth:`close` ends the line."""

    def __init__(self, *, modelled: bool, stream: TextIO | None = None, width: int = 24,
                 tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.modelled = modelled
        self.width = width
        self.tty = self.stream.isatty() if tty is None else tty
        self.start = time.monotonic()
        self._last_line = 0
        self._drawn = False

    def text(self, p: Progress) -> str:
        """The progress line for ``p`` (without the bar)."""
        bounded = 0 < p.budget < UNBOUNDED
        budget = f"/{p.budget}" if bounded else ""
        unit = " (modelled)" if self.modelled else ""
        best = f"best {p.best_ms:.4g} ms{unit}" if p.best_ms is not None else "best —"
        speed = ""
        if p.best_ms and p.baseline_ms:
            speed = f"  x{p.baseline_ms / p.best_ms:.3g} over the unrewritten kernel"
        cached = f"  ({p.cached} from db)" if p.cached else ""
        return (f"{p.evaluations}{budget} evaluations{cached}  valid {p.valid}  "
                f"invalid {p.invalid}  {best}{speed}")

    def __call__(self, p: Progress) -> None:
        if self.tty:
            done = min(1.0, p.evaluations / p.budget) if 0 < p.budget < UNBOUNDED else 0.0
            filled = int(done * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r\x1b[K[{bar}] {self.text(p)}")
            self._drawn = True
        else:
            step = max(1, p.budget // 10) if 0 < p.budget < UNBOUNDED else 10
            if p.evaluations - self._last_line >= step or p.evaluations == p.budget:
                self.stream.write(f"search: {self.text(p)}\n")
                self._last_line = p.evaluations
        self.stream.flush()

    def close(self) -> None:
        """Finish the bar's line (a terminal keeps the last state visible)."""
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
