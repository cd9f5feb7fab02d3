"""Search strategies: evolve (genetic), random, greedy; steady (steady-state evolution over
an asynchronous evaluator) lives in :mod:`kir.search.steady`.

A strategy proposes genomes and hands them to :meth:`Session.judge_many`; the session does
the applying, deduplicating, caching, evaluating and bookkeeping, and raises
:class:`StopSearch` at the budget or time limit. Each strategy returns why it stopped on its
own ("exhausted": nothing new to propose; "converged": greedy found no improving step).
"""

from __future__ import annotations

import itertools
from typing import Sequence

from kir.rules import Step
from kir.search.engine import Candidate, Session
from kir.search.evaluator import Status
from kir.search.genome import Genome, all_steps, crossover, kernels_before, mutate, random_genome


def rank_key(cand: Candidate) -> tuple[float, int, str]:
    """Sort order for candidates: faster first, then shorter genomes, then a stable tiebreak
    (so equal times never depend on dict or set order)."""
    return (cand.fitness, len(cand.genome), cand.fingerprint)


# Verdicts on the unrewritten kernel that end a search at once: its own outputs are wrong (or
# it does not build or run), so no candidate can be judged against it.
BASELINE_FAILURES = (Status.INVALID, Status.NAN, Status.CRASH, Status.COMPILE_ERROR)


def run_strategy(session: Session, hints: Sequence[Genome]) -> str:
    """Evaluate the baseline, then the hints, then run the configured strategy. Returns why
    it stopped; "baseline_failed" when the unrewritten kernel itself is rejected."""
    baseline, _ = session.judge(())
    if baseline.evaluation.status in BASELINE_FAILURES:
        return "baseline_failed"
    seeds = [baseline]
    if hints:
        seeds += [cand for cand, _ in session.judge_many(list(hints))]
    from kir.search.steady import steady

    strategy = {"evolve": evolve, "random": random_search, "greedy": greedy, "steady": steady}
    return strategy[session.config.strategy](session, _unique(seeds))


def _unique(cands: Sequence[Candidate]) -> list[Candidate]:
    """Candidates with a kernel, first of each fingerprint, order kept."""
    seen: set[str] = set()
    out = []
    for cand in cands:
        if cand.kernel is not None and cand.fingerprint not in seen:
            seen.add(cand.fingerprint)
            out.append(cand)
    return out


def _random_genomes(session: Session, count: int, max_length: int) -> list[Genome]:
    rng, cfg = session.rng, session.config
    top = max(1, min(max_length, cfg.max_genome_len))
    return [random_genome(session.base, session.registry, session.ctx, rng, rng.randint(1, top))
            for _ in range(count)]


def random_search(session: Session, seeds: list[Candidate]) -> str:
    """Random genomes (1 to max_genome_len steps), a population-sized batch at a time."""
    cfg = session.config
    stale = 0
    while stale < cfg.patience:
        batch = _random_genomes(session, cfg.population, cfg.max_genome_len)
        judged = session.judge_many(batch)
        stale = 0 if any(new for _, new in judged) else stale + len(batch)
    return "exhausted"


def _tournament(session: Session, population: list[Candidate]) -> Candidate:
    rng, size = session.rng, session.config.tournament
    entrants = rng.sample(population, size) if size <= len(population) else \
        [rng.choice(population) for _ in range(size)]
    return min(entrants, key=rank_key)


def evolve(session: Session, seeds: list[Candidate]) -> str:
    """A generational genetic algorithm: the first population is the baseline, the hints
    and short random genomes; each generation keeps the ``elite`` best and breeds the rest
    by tournament selection, one-point crossover and mutation."""
    cfg = session.config
    population = list(seeds)
    stale = 0
    while len(population) < cfg.population and stale < cfg.patience:
        batch = _random_genomes(session, cfg.population - len(population), 4)
        judged = session.judge_many(batch)
        population = _unique(population + [cand for cand, _ in judged])
        stale = 0 if any(new for _, new in judged) else stale + len(batch)
    while stale < cfg.patience:
        ranked = sorted(population, key=rank_key)
        current = {cand.genome for cand in population}
        children = [breed(session, population, current)
                    for _ in range(cfg.population - cfg.elite)]
        judged = session.judge_many(children)
        stale = 0 if any(new for _, new in judged) else stale + len(children)
        offspring = _unique([cand for cand, _ in judged])
        population = _unique(ranked[:cfg.elite] + offspring + ranked[cfg.elite:])
        population = population[:cfg.population]
    return "exhausted"


def breed(session: Session, population: list[Candidate], current: set[Genome]) -> Genome:
    """One child of ``population``: tournament selection, one-point crossover (at the
    crossover rate) and mutation (at the mutation rate, and always when the child is already
    in the population, whose genomes are ``current``)."""
    cfg, rng = session.config, session.rng
    if len(population) >= 2 and rng.random() < cfg.crossover_rate:
        first, second = _tournament(session, population), _tournament(session, population)
        child = crossover(first.genome, second.genome, rng, cfg.max_genome_len)
    else:
        child = _tournament(session, population).genome
    if child in current or rng.random() < cfg.mutation_rate:
        try:
            applied = session.apply(child)
        except Exception:  # noqa: BLE001 - judging the child records the rule's crash
            applied = None
        if applied is not None:
            child, _ = mutate(applied.applied, kernels_before(session.base, applied),
                              session.registry, rng, cfg.max_genome_len, session.ctx)
    return child


def greedy(session: Session, seeds: list[Candidate]) -> str:
    """Beam search of width 1: from the best so far, try every single-step extension (all
    rules x sites x parameter values, sampled down to ``greedy_cap``), keep the best, repeat
    until no extension is faster."""
    cfg, rng = session.config, session.rng
    current = min(seeds, key=rank_key)
    while len(current.genome) < cfg.max_genome_len:
        assert current.kernel is not None
        # Enumerate lazily, a bounded number, so a rule with huge parameter spaces cannot
        # stall the search before the first evaluation.
        steps: list[Step] = list(itertools.islice(
            all_steps(current.kernel, session.registry, session.ctx), cfg.greedy_cap * 64))
        if len(steps) > cfg.greedy_cap:
            steps = rng.sample(steps, cfg.greedy_cap)
        if not steps:
            return "converged"
        judged = session.judge_many([current.genome + (step,) for step in steps])
        options = [cand for cand, _ in judged if cand.kernel is not None]
        if not options:
            return "converged"
        best = min(options, key=rank_key)
        if best.fitness >= current.fitness:
            return "converged"
        current = best
    return "converged"
