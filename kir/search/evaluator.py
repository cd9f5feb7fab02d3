"""What the search calls to judge a candidate kernel: the :class:`Evaluator` protocol.

An evaluator validates a kernel against its reference and, when it is correct, times it (on a
GPU through MLX, or with a cost model: then ``modelled`` is True). The search never imports a
backend; the CLI builds an evaluator and hands it in.

An evaluator may also offer ``evaluate_many(kernels)`` returning an iterable of evaluations in
the same order (for instance compiling and validating in a worker pool while timing one at a
time); the engine then hands it each batch of new candidates and records each result as it
arrives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

from kir.errors import KirError
from kir.ir import Kernel

STATUSES = ("ok", "invalid", "compile_error", "crash", "timeout", "nan", "not_applicable")


@dataclass(frozen=True)
class Evaluation:
    """The verdict on one candidate. ``time_ms`` is set only when ``status`` is "ok";
    ``error`` says why a candidate was rejected; ``details`` holds anything else worth
    keeping (max error, compile log excerpt, timing spread), JSON-serializable."""

    status: str
    time_ms: float | None = None
    error: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise KirError(f"unknown evaluation status {self.status!r}",
                           hint=f"use one of {', '.join(STATUSES)}")
        if self.status == "ok" and self.time_ms is None:
            raise KirError("an 'ok' evaluation needs a time")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def timed(cls, time_ms: float, **details: Any) -> "Evaluation":
        """A valid candidate that ran in ``time_ms``."""
        return cls("ok", float(time_ms), "", details)

    @classmethod
    def rejected(cls, status: str, error: str, **details: Any) -> "Evaluation":
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


class FunctionEvaluator:
    """An evaluator from a plain function, for tests and quick experiments.

    ``fn(kernel)`` returns an :class:`Evaluation`, a time in ms (a valid candidate), or None
    (an invalid one). ``calls`` counts invocations, so tests can see what the engine spent.
    """

    def __init__(self, fn: Callable[[Kernel], "Evaluation | float | None"], *,
                 target: str = "test", device: str = "cpu", modelled: bool = True) -> None:
        self.fn = fn
        self.target = target
        self.device = device
        self.modelled = modelled
        self.calls = 0
        self.batches: list[int] = []

    def evaluate(self, kernel: Kernel) -> Evaluation:
        """Call the function and turn its answer into an :class:`Evaluation`."""
        self.calls += 1
        result = self.fn(kernel)
        if isinstance(result, Evaluation):
            return result
        if result is None:
            return Evaluation.rejected("invalid", "the function rejected the kernel")
        return Evaluation.timed(float(result))


class BatchFunctionEvaluator(FunctionEvaluator):
    """A :class:`FunctionEvaluator` that also offers ``evaluate_many``; it records batch
    sizes in ``batches`` (tests use it to check the engine batches a generation)."""

    def evaluate_many(self, kernels: Sequence[Kernel]) -> Iterable[Evaluation]:
        """Evaluate ``kernels`` in order, yielding each verdict as it is ready."""
        self.batches.append(len(kernels))
        for kernel in kernels:
            yield self.evaluate(kernel)
