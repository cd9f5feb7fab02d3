"""The Apple-GPU cost model as an evaluator: validate on the interpreter, then count what the
kernel does at the first case's sizes and return the model's time, always flagged modelled."""

from __future__ import annotations

from typing import Iterator, Sequence

from kir.driver.load import Loaded
from kir.ir import Kernel
from kir.measure.cases import DEFAULT_MAX_STEPS, DEFAULT_SEEDS, Validating
from kir.search.evaluator import Evaluation


class ModelEvaluator(Validating):
    """Validate on the interpreter, then the Apple-GPU cost model's time: ``modelled``."""

    modelled = True

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
        self.target = f"model:{self.profile.name}"
        self.device = f"model:{self.profile.name}"
        # The model counts the first validation case: its sizes are what every time is for.
        self.time_sizes = dict(self.context.cases[0].sizes) if self.context.cases else {}

    def evaluate(self, kernel: Kernel) -> Evaluation:
        """Judge one candidate in this process."""
        return self.check(kernel)

    def evaluate_many(self, kernels: Sequence[Kernel]) -> Iterator[Evaluation]:
        """Judge candidates in worker processes; verdicts in the order given."""
        return self.check_many(kernels)
