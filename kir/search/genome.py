"""Genomes: sequences of rule steps, and the random moves the search makes on them.

A genome is a tuple of :class:`~kir.rules.Step` s, applied in order with
:func:`~kir.rules.apply_trace`. Every function here takes an explicit ``random.Random``; none
touches Python's global random state, so a seed makes a search reproducible.

The search keeps genomes *normalized* (only the steps that applied), so the kernel before step
``i`` is ``kernels_before(...)[i]`` and a move can ask which sites exist at that point.
"""

from __future__ import annotations

import itertools
import random
from typing import Iterator, Mapping, Sequence

from kir.ir import Kernel
from kir.rules import Applied, Rule, RuleContext, RuleError, Step, apply_trace, rule_sites

Genome = tuple[Step, ...]

MUTATIONS = ("insert", "delete", "swap", "retune", "site")


def genome_text(genome: Sequence[Step]) -> tuple[str, ...]:
    """The printable form of a genome: one step string per step."""
    return tuple(str(step) for step in genome)


def safe_sites(rule: Rule, kernel: Kernel, ctx: RuleContext | None = None,
               registry: Mapping[str, Rule] | None = None) -> list[str]:
    """A rule's sites in ``kernel`` (under ``ctx``), listed under the rule limits (:func:`kir.rules.rule_sites`);
    a rule whose ``sites`` fails offers none (a buggy rule must not stop a search that has
    other rules to try; the registry's failure log, when it keeps one, counts it), and so
    does one that ran past its time limit before."""
    failures = getattr(registry, "failures", None)
    if failures is not None and not failures.usable(rule.name):
        return []
    try:
        return rule_sites(rule, kernel, registry, ctx)
    except RuleError:
        return []


def rules_with_sites(kernel: Kernel, registry: Mapping[str, Rule],
                     ctx: RuleContext | None = None) -> list[tuple[Rule, list[str]]]:
    """Every rule that has at least one site in ``kernel``, sorted by name (a stable order
    whatever order the registry was filled in)."""
    found = []
    for name in sorted(registry):
        sites = safe_sites(registry[name], kernel, ctx, registry)
        if sites:
            found.append((registry[name], sites))
    return found


def random_params(rule: Rule, rng: random.Random) -> tuple[tuple[str, int | str | bool], ...]:
    """One value from each of the rule's parameter spaces."""
    return tuple((space.name, rng.choice(space.choices)) for space in rule.params)


def random_step(kernel: Kernel, registry: Mapping[str, Rule], rng: random.Random,
                ctx: RuleContext | None = None) -> Step | None:
    """A random step that names a site ``kernel`` has: a rule with sites (each equally
    likely), one of its sites, and a value from each parameter space. None when no rule has
    a site. The rules are tried in a random order and the first with a site is taken, which
    picks as uniformly as listing every rule's sites first and costs a few rules' listings,
    not all of them (listing sites was a sixth of the search loop's time on attention)."""
    order = sorted(registry)
    rng.shuffle(order)
    for name in order:
        sites = safe_sites(registry[name], kernel, ctx, registry)
        if sites:
            rule = registry[name]
            return Step(rule.name, rng.choice(sites), random_params(rule, rng), rule.site_key)
    return None


def random_genome(kernel: Kernel, registry: Mapping[str, Rule], ctx: RuleContext,
                  rng: random.Random, length: int) -> Genome:
    """Up to ``length`` random steps, each drawn against the kernel the previous ones made
    (steps that do not apply are dropped, so the result is normalized; a step whose rule
    raises ends the genome, so the engine can record the crash)."""
    steps: list[Step] = []
    for _ in range(length):
        step = random_step(kernel, registry, rng, ctx)
        if step is None:
            break
        try:
            applied = apply_trace(kernel, [step], registry, ctx)
        except Exception:  # noqa: BLE001 - keep the step: the engine records the crash
            steps.append(step)
            break
        if applied.applied:
            steps.append(step)
            kernel = applied.kernel
    return tuple(steps)


def all_steps(kernel: Kernel, registry: Mapping[str, Rule],
              ctx: RuleContext | None = None) -> Iterator[Step]:
    """Every single step at ``kernel``: all rules x sites x parameter combinations, in a
    stable order (lazily: a rule with large parameter spaces is not expanded up front)."""
    for rule, sites in rules_with_sites(kernel, registry, ctx):
        names = [space.name for space in rule.params]
        for site in sites:
            for values in itertools.product(*(space.choices for space in rule.params)):
                yield Step(rule.name, site, tuple(zip(names, values)), rule.site_key)


def canonical(genome: Sequence[Step], registry: Mapping[str, Rule]) -> Genome:
    """``genome`` without the repeats its rules declare pointless: a later step of a rule
    marked ``once_per_site`` at a site an earlier step of it already used (the same padding
    three times over, a transpose undone). Evaluating such a genome would spend a GPU compile
    on a kernel the search either has or could reach with one step."""
    seen: set[tuple[str, str]] = set()
    kept: list[Step] = []
    for step in genome:
        rule = registry.get(step.rule)
        if getattr(rule, "once_per_site", False):
            if (step.rule, step.site) in seen:
                continue
            seen.add((step.rule, step.site))
        kept.append(step)
    return tuple(kept)


def kernels_before(kernel: Kernel, applied: Applied) -> list[Kernel]:
    """For a normalized genome's :class:`Applied`: the kernel before each step, then the
    final kernel (``len(genome) + 1`` kernels)."""
    return [kernel, *applied.kernels]


# ------------------------------------------------------------------------------ mutations


def _retunable(step: Step, registry: Mapping[str, Rule]) -> list[str]:
    rule = registry.get(step.rule)
    if rule is None:
        return []
    return [space.name for space in rule.params if len(space.choices) > 1]


def mutate(genome: Genome, kernels: Sequence[Kernel], registry: Mapping[str, Rule],
           rng: random.Random, max_len: int,
           ctx: RuleContext | None = None) -> tuple[Genome, str]:
    """Apply one random mutation operator to a normalized ``genome`` whose intermediate
    kernels are ``kernels`` (see :func:`kernels_before`). Returns the new genome and the
    operator used ("insert", "delete", "swap", "retune", "site"; "none" if nothing could
    change). The result may contain steps that no longer apply; the engine normalizes it."""
    n = len(genome)
    options: list[str] = []
    if n < max_len:
        options.append("insert")
    if n:
        options.append("delete")
    if n >= 2:
        options.append("swap")
    retune = [i for i, step in enumerate(genome) if _retunable(step, registry)]
    if retune:
        options.append("retune")
    resite = [i for i, step in enumerate(genome)
              if step.rule in registry
              and len(safe_sites(registry[step.rule], kernels[i], ctx, registry)) > 1]
    if resite:
        options.append("site")
    if not options:
        return genome, "none"
    op = rng.choice(options)
    steps = list(genome)
    if op == "insert":
        # Try each position from a random start: some kernels along the way may offer no site.
        start = rng.randint(0, n)
        for pos in [*range(start, n + 1), *range(0, start)]:
            step = random_step(kernels[pos], registry, rng, ctx)
            if step is not None:
                steps.insert(pos, step)
                break
        else:
            return genome, "none"
    elif op == "delete":
        del steps[rng.randrange(n)]
    elif op == "swap":
        i, j = sorted(rng.sample(range(n), 2))
        steps[i], steps[j] = steps[j], steps[i]
    elif op == "retune":
        i = rng.choice(retune)
        step = steps[i]
        name = rng.choice(_retunable(step, registry))
        space = next(s for s in registry[step.rule].params if s.name == name)
        current = step.param_dict.get(name)
        value = rng.choice([c for c in space.choices if c != current] or list(space.choices))
        params = tuple((k, value if k == name else v) for k, v in step.params)
        if name not in step.param_dict:
            params = (*params, (name, value))
        steps[i] = Step(step.rule, step.site, params, step.site_key)
    else:  # site
        i = rng.choice(resite)
        step = steps[i]
        others = [s for s in safe_sites(registry[step.rule], kernels[i], ctx, registry)
                  if s != step.site]
        steps[i] = Step(step.rule, rng.choice(others), step.params, step.site_key)
    return tuple(steps), op


def crossover(first: Genome, second: Genome, rng: random.Random, max_len: int) -> Genome:
    """One-point crossover of two variable-length genomes: a prefix of ``first`` followed by
    a suffix of ``second`` (cut points chosen independently), truncated to ``max_len``."""
    cut_a = rng.randint(0, len(first))
    cut_b = rng.randint(0, len(second))
    return tuple(first[:cut_a] + second[cut_b:])[:max_len]
