"""The Apple-GPU cost model as an evaluator: validate on the interpreter, then count what the
kernel does at the first case's sizes (carried to the compiled sizes when those differ) and
return the model's time, always flagged modelled."""

from __future__ import annotations

from typing import Iterator, Sequence

from kir.driver.load import Loaded
from kir.ir import Kernel
from kir.measure.cases import (
    DEFAULT_MAX_STEPS,
    DEFAULT_SEEDS,
    NOT_MODELLABLE,
    SPECIALIZED_NOTE,
    CheckContext,
    Validating,
    judged_cases,
    model_time,
)
from kir.measure.device import describe_model
from kir.measure.model_sizes import model_counts, with_model_sizes
from kir.search.evaluator import Evaluation, Status


class ModelEvaluator(Validating):
    """Validate on the interpreter, then the Apple-GPU cost model's time: ``modelled``."""

    modelled = True
    # Validation and the model's counting are one interpreter run per case: one phase.
    validate_phase = "validate + model (interpreter)"

    def __init__(self, loaded: Loaded, profile: str = "apple-m2", *,
                 validate_sizes: Sequence[dict[str, int]] | None = None,
                 seeds: Sequence[int] = DEFAULT_SEEDS, max_steps: int = DEFAULT_MAX_STEPS,
                 workers: int = 2, timeout_s: float = 120.0,
                 check_sizes: dict[str, int] | None = None) -> None:
        from kir.cost import get_profile

        self.profile = get_profile(profile)
        super().__init__(loaded, self.profile.name, validate_sizes=validate_sizes,
                         seeds=seeds, max_steps=max_steps, workers=workers,
                         timeout_s=timeout_s, check_sizes=check_sizes)
        self.descriptor = describe_model(self.profile.name)
        self.target = self.descriptor.target
        self.device = self.descriptor.device
        # The model counts the first validation case and, when that is not at the compiled
        # sizes, extrapolates the counts there: those sizes are what every time is for.
        self.context, self.model_note = with_model_sizes(self.context, loaded, seeds[0])
        self.time_sizes = dict(self.context.model_sizes or (
            self.context.cases[0].sizes if self.context.cases else {}))

    def evaluate(self, kernel: Kernel) -> Evaluation:
        """Judge one candidate in this process."""
        return self.check(kernel)

    def evaluate_many(self, kernels: Sequence[Kernel]) -> Iterator[Evaluation]:
        """Judge candidates in worker processes; verdicts in the order given."""
        return self.check_many(kernels)


def model_validated(kernel: Kernel, ctx: CheckContext, validated: Evaluation,
                    profile: str) -> Evaluation:
    """The verdict :func:`~kir.measure.cases.check_kernel` gives ``kernel`` with ``profile``,
    from its verdict without one (``validated``, e.g. from a CPU task elsewhere): the kernel is
    run again with counters (:func:`~kir.measure.model_sizes.model_counts`) and the model
    prices the counts. This is what a modelled
    device does with a candidate validated elsewhere (:mod:`kir.measure.portable`)."""
    if not validated.ok:
        return validated
    cases, specialized = judged_cases(kernel, ctx)
    if not cases:
        return Evaluation.rejected(Status.NOT_APPLICABLE, NOT_MODELLABLE)
    verdict, counters = model_counts(kernel, ctx, cases[0])
    if verdict is not None:
        return verdict
    return model_time(counters, profile, float(validated.details.get("max_abs_err", 0.0)),
                      len(cases), SPECIALIZED_NOTE if specialized else {})
