"""Steady-state evolution: keep every worker busy.

The generational :func:`~kir.search.strategies.evolve` hands the evaluator a generation at a
time and reads the verdicts in order, so with many remote workers the slowest candidate of a
generation holds the others idle (head-of-line blocking), and a generation of 16 caps the
workers that can be used. Here the evaluator's ``submit(kernel)`` (a
:class:`concurrent.futures.Future` of the :class:`Evaluation`) is kept ``capacity`` jobs
deep: each verdict is recorded the moment it completes, joins the population (the
``population`` best candidates, by :func:`~kir.search.strategies.rank_key`), and the next
child is bred from the population as it is then and submitted at once.

Budget and time: a job counts against ``budget`` from the moment it is submitted (the history
plus the jobs in flight never exceed it), and at the time limit nothing more is submitted and
the jobs in flight are cancelled rather than waited for. Verdicts arrive in the order the
workers finish, so a steady search is not reproducible from its seed alone: the generational
strategies stay the default. An evaluator without ``submit`` is run one candidate at a time.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, wait

from kir.ir import Kernel
from kir.search.engine import Candidate, Session, StopSearch, _describe
from kir.search.evaluator import Evaluation, Status
from kir.search.genome import Genome
from kir.search.strategies import _random_genomes, _unique, breed, rank_key


class _Inline:
    """``submit`` for an evaluator that only has ``evaluate``: the future is done at once."""

    capacity = 1

    def __init__(self, evaluator) -> None:
        self.evaluator = evaluator

    def submit(self, kernel: Kernel) -> Future:
        future: Future = Future()
        try:
            future.set_result(self.evaluator.evaluate(kernel))
        except Exception as exc:  # noqa: BLE001 - read as a crash by _verdict
            future.set_exception(exc)
        return future


def _verdict(future: Future) -> Evaluation:
    """A finished job's verdict; an exception rejects this candidate only."""
    try:
        result = future.result()
    except Exception as exc:  # noqa: BLE001 - as in Session._call
        return Evaluation.rejected(Status.CRASH, _describe(exc, "evaluating"))
    if not isinstance(result, Evaluation):
        return Evaluation.rejected(Status.CRASH, f"evaluator returned {type(result).__name__}")
    return result


def _join(population: list[Candidate], cand: Candidate, size: int) -> list[Candidate]:
    return _unique(sorted(population + [cand], key=rank_key))[:size]


def _child(session: Session, population: list[Candidate]) -> Genome:
    """A short random genome until the population is full, then a bred child."""
    if len(population) < session.config.population:
        return _random_genomes(session, 1, 4)[0]
    return breed(session, population, {cand.genome for cand in population})


def steady(session: Session, seeds: list[Candidate]) -> str:
    """Steady-state evolution (see the module text). Returns "exhausted" when ``patience``
    genomes in a row were all known; raises :class:`StopSearch` at the budget or time."""
    cfg = session.config
    evaluator = session.evaluator
    submitter = evaluator if callable(getattr(evaluator, "submit", None)) else _Inline(evaluator)
    depth = max(1, int(getattr(submitter, "capacity", 1) or 1))
    population = _unique(sorted(seeds, key=rank_key))[:cfg.population]
    in_flight: dict[Future, tuple[int, Candidate]] = {}
    pending: dict[str, Candidate] = {}  # submitted, by fingerprint: duplicates wait for them
    submitted = stale = 0
    stop: str | None = None
    try:
        while True:
            while stop is None and len(in_flight) < depth and stale < cfg.patience:
                stop = session._stop_reason(len(in_flight))
                if stop:
                    break
                cand, new, needs = session.admit(_child(session, population), pending)
                stale = 0 if new else stale + 1
                if needs:
                    in_flight[submitter.submit(cand.kernel)] = (submitted, cand)
                    submitted += 1
                elif new:
                    population = _join(population, cand, cfg.population)
            if not in_flight:
                if stop:
                    raise StopSearch(stop)
                return "exhausted"
            done, _ = wait(list(in_flight), timeout=_time_left(session),
                           return_when=FIRST_COMPLETED)
            if not done:  # the time limit: what is still running is not waited for
                raise StopSearch("time")
            for future in sorted(done, key=lambda f: in_flight[f][0]):
                _, cand = in_flight.pop(future)
                pending.pop(cand.fingerprint, None)
                session.complete(cand, _verdict(future))
                population = _join(population, cand, cfg.population)
    finally:
        for future in in_flight:
            future.cancel()


def _time_left(session: Session) -> float | None:
    limit = session.config.time_limit_s
    if limit is None:
        return None
    return max(0.0, limit - (time.monotonic() - session._start))
