"""Errors a user can act on: every one names file:line:col and shows the offending line.

All user-facing failures in kir raise :class:`KirError` (or a subclass). The CLI prints
``str(error)`` and exits with code 2; anything else escaping is a bug in kir.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Loc:
    """A position in a user's source file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class KirError(Exception):
    """A problem in the user's input (source, IR text, spec, rule) or with a target's limits.

    ``loc`` points at the construct; ``source_line`` (if known) is shown with a caret under
    ``loc.col``; ``hint`` says what the user can do about it.
    """

    def __init__(
        self,
        message: str,
        loc: Loc | None = None,
        *,
        source_line: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.source_line = source_line
        self.hint = hint

    def __str__(self) -> str:
        head = f"{self.loc}: error: {self.message}" if self.loc else f"error: {self.message}"
        lines = [head]
        if self.source_line is not None and self.loc is not None:
            text = self.source_line.rstrip("\n").expandtabs(1)
            lines.append("    " + text)
            lines.append("    " + " " * max(self.loc.col - 1, 0) + "^")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)


class UnsupportedError(KirError):
    """Valid CUDA that lies outside the subset kir understands."""


class ValidationError(KirError):
    """A kernel ran but its outputs do not match the reference."""


class BarrierError(KirError):
    """A barrier was reached by part of a block (divergent barrier)."""


class RaceError(KirError):
    """Two threads of a block touch one shared element with no barrier between them
    (found by the interpreter: kir.interp.races)."""


class LimitError(KirError):
    """A kernel exceeds a target limit (threads per group, threadgroup memory, ...)."""


class StepLimitError(KirError):
    """A run went past its step limit: the kernel (or a candidate) probably never ends."""


class AnalysisLimitError(KirError):
    """An analysis would do more work than its bound allows (the dependence test of a deep
    loop nest, say): a rule that needs it refuses the site with this reason."""


def frame_place(frame) -> tuple[Loc | None, str | None]:
    """The Loc and line of a ``traceback.FrameSummary`` (a user's reference or rule, where it
    raised or was stopped): the column is the line's first non-blank character."""
    import linecache

    if frame is None or not frame.lineno:
        return None, None
    line = linecache.getline(frame.filename, frame.lineno).rstrip("\n") or frame.line or ""
    col = len(line) - len(line.lstrip()) + 1
    return Loc(frame.filename, frame.lineno, col), (line or None)


def source_line_of(text: str, line: int) -> str | None:
    """The 1-based ``line`` of ``text``, or None when out of range."""
    lines = text.splitlines()
    if 1 <= line <= len(lines):
        return lines[line - 1]
    return None
