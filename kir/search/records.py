"""What a search is asked and what it returns: the strategies, :class:`SearchConfig`, each
evaluation's :class:`EvalRecord`, the :class:`Progress` a progress bar gets and the
:class:`SearchResult` (the engine that fills them is :mod:`kir.search.engine`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from kir.errors import KirError
from kir.ir import Kernel
from kir.rules import Step
from kir.search.phases import Phases

STRATEGIES = ("evolve", "random", "greedy", "steady")


def rule_of(step: str) -> str:
    """The rule of a step as a genome holds it: ``tile-loop{loop=L0,factor=8}`` →
    ``tile-loop``."""
    return step.split("{", 1)[0].strip()


@dataclass(frozen=True)
class SearchConfig:
    """How to search. ``budget`` bounds the evaluations in the history (fresh or from the
    tuning database); duplicates of a candidate already judged cost nothing."""

    strategy: str = "evolve"
    budget: int = 100
    time_limit_s: float | None = None
    seed: int = 0
    population: int = 16
    elite: int = 2
    tournament: int = 3
    mutation_rate: float = 0.9
    crossover_rate: float = 0.5
    max_genome_len: int = 8
    greedy_cap: int = 256  # single-step extensions tried per greedy round, at most
    patience: int = 200  # new genomes in a row that were all duplicates: the space is spent

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise KirError(f"unknown search strategy {self.strategy!r}",
                           hint=f"use one of {', '.join(STRATEGIES)}")
        checks = [("budget", self.budget >= 1), ("population", self.population >= 2),
                  ("elite", 0 <= self.elite < self.population),
                  ("tournament", self.tournament >= 1),
                  ("mutation_rate", 0.0 <= self.mutation_rate <= 1.0),
                  ("crossover_rate", 0.0 <= self.crossover_rate <= 1.0),
                  ("max_genome_len", self.max_genome_len >= 1),
                  ("greedy_cap", self.greedy_cap >= 1), ("patience", self.patience >= 1),
                  ("time_limit_s", self.time_limit_s is None or self.time_limit_s > 0)]
        for name, good in checks:
            if not good:
                raise KirError(f"bad search setting {name}={getattr(self, name)!r}")


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation in a search's history (``cached``: answered by the tuning database)."""

    index: int
    genome: tuple[str, ...]
    fingerprint: str
    status: str
    time_ms: float | None
    error: str
    best_ms: float | None  # best valid time so far, this record included
    cached: bool = False
    at_s: float | None = None  # seconds from the search's start to this verdict


@dataclass(frozen=True)
class Progress:
    """What a progress bar needs, sent after every evaluation."""

    evaluations: int
    valid: int
    invalid: int
    best_ms: float | None
    baseline_ms: float | None
    budget: int = 0
    cached: int = 0


@dataclass(frozen=True)
class SearchResult:
    """The outcome of a search. ``best_steps`` is the winner's trace (replayable with
    :func:`kir.rules.apply_trace`); with no valid candidate at all it is empty, the best
    kernel is the input and ``best_ms`` is None."""

    best_steps: tuple[Step, ...]
    best_kernel: Kernel
    best_ms: float | None
    baseline_ms: float | None
    history: tuple[EvalRecord, ...]
    counts: Mapping[str, int]
    wall_s: float
    modelled: bool
    evaluator_calls: int = 0
    cached: int = 0
    duplicates: int = 0
    # budget | time | exhausted | converged | baseline_failed | interrupted
    stopped: str = "budget"
    target: str = ""
    device: str = ""
    # Where the seconds went: the engine's phases and the evaluator's (kir.search.phases).
    phases: Phases = field(default_factory=Phases)

    @property
    def speedup(self) -> float | None:
        """Baseline time over best time, when both exist."""
        if self.best_ms and self.baseline_ms:
            return self.baseline_ms / self.best_ms
        return None
