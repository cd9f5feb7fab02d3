"""What the search calls to judge a candidate kernel: the :class:`Evaluator` protocol.

An evaluator validates a kernel against its reference and, when it is correct, times it (on a
GPU through MLX, or with a cost model: then ``modelled`` is True). The search never imports a
backend; the CLI builds an evaluator and hands it in.

An evaluator may also offer ``evaluate_many(kernels)`` returning an iterable of evaluations in
the same order (for instance compiling and validating in a worker pool while timing one at a
time); the engine then hands it each batch of new candidates and records each result as it
arrives.

An evaluator may also offer ``submit(kernel)`` returning a :class:`concurrent.futures.Future`
of the evaluation, and ``capacity``, how many jobs it can usefully run at once (its workers):
the steady-state strategy (:mod:`kir.search.steady`) keeps that many in flight and records
each verdict as it completes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, Protocol, runtime_checkable

from kir.errors import KirError
from kir.ir import Kernel


class Status(str, Enum):
    """What became of a candidate. A ``str`` enum: it compares equal to its value and is
    stored and printed as that value (``"ok"``, ``"timeout"``, ...)."""

    OK = "ok"  # valid, and timed (or modelled)
    INVALID = "invalid"  # outputs differ from the reference
    COMPILE_ERROR = "compile_error"  # the verifier, the emitter or the compiler refused it
    CRASH = "crash"  # the run raised (out of bounds, a GPU fault, a rule's bug)
    TIMEOUT = "timeout"  # the step limit or the wall clock ran out
    NAN = "nan"  # NaN or Inf where the reference is finite
    NOT_APPLICABLE = "not_applicable"  # nothing to judge it by (e.g. specialized sizes)

    def __str__(self) -> str:
        return self.value


STATUSES = tuple(status.value for status in Status)


@dataclass(frozen=True)
class Evaluation:
    """The verdict on one candidate. ``time_ms`` is set only when ``status`` is "ok";
    ``error`` says why a candidate was rejected; ``details`` holds anything else worth
    keeping (max error, compile log excerpt, timing spread), JSON-serializable."""

    status: Status
    time_ms: float | None = None
    error: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "status", Status(self.status))
        except ValueError:
            raise KirError(f"unknown evaluation status {self.status!r}",
                           hint=f"use one of {', '.join(STATUSES)}") from None
        if self.status is Status.OK and self.time_ms is None:
            raise KirError("an 'ok' evaluation needs a time")

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def timed(cls, time_ms: float, **details: Any) -> "Evaluation":
        """A valid candidate that ran in ``time_ms``."""
        return cls(Status.OK, float(time_ms), "", details)

    @classmethod
    def rejected(cls, status: Status | str, error: str, **details: Any) -> "Evaluation":
        """A candidate rejected with ``status`` and the reason."""
        return cls(status, None, error, details)


@runtime_checkable
class Evaluator(Protocol):
    """Validates then times a kernel. ``target`` names what the time is for
    (``"metal"``, ``"cuda"``, ``"model:apple-m2"``), ``device`` the hardware
    (``"Apple M2"``, ``"NVIDIA H200"``); both go into the tuning database key. An evaluator
    may say at which sizes its times are measured or modelled (``time_sizes``, a dict), so
    they can be labelled with them."""

    target: str
    device: str
    modelled: bool

    def evaluate(self, kernel: Kernel) -> Evaluation: ...
