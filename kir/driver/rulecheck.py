"""Checking rules against kernels: every site, every parameter value, compared with the
original kernel on the interpreter. Used by ``kir rules test`` and by kir's own soundness tests.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from kir.driver.load import Loaded, load_kernel
from kir.driver.runners import copy_inputs, run_interp
from kir.errors import KirError
from kir.ir.verify import verify
from kir.rules import NotApplicable, Rule, RuleError, Step, apply_step, context_for, rule_sites
from kir.spec.compare import compare_outputs


@dataclass(frozen=True)
class Application:
    """One (rule, site, params) tried on one kernel at one size set."""

    kernel_file: str
    sizes: Mapping[str, int]
    step: Step
    status: str  # "same", "changed" (outputs differ), "not-applicable", "error"
    detail: str = ""


def default_examples_dir() -> Path:
    """The examples installed with kir (``kir.examples``; a checkout's ``examples/`` in an
    editable install), so ``kir rules test`` works from any folder and from a wheel."""
    from kir.driver.examples import examples_dir

    return examples_dir()


def example_files(folder: Path) -> list[Path]:
    """CUDA files in ``folder`` that have a spec beside them."""
    from kir.driver.examples import example_files as files

    return files(folder)




def steps_of(rule: Rule, kernel, registry: Mapping[str, Rule] | None = None,
             product: bool = True) -> Iterator[Step]:
    """Every (site, parameter combination) of ``rule`` on ``kernel`` (the sites listed under
    the rule limits: a RuleError when that fails). Without ``product``, every value of each
    parameter once, the other parameters at their first value."""
    names = [p.name for p in rule.params]
    if product:
        combinations = list(itertools.product(*(p.choices for p in rule.params)))
    else:
        first = tuple(p.choices[0] for p in rule.params)
        combinations = [first] + [first[:i] + (value,) + first[i + 1:]
                                  for i, p in enumerate(rule.params)
                                  for value in p.choices[1:]]
    for site in rule_sites(rule, kernel, registry):
        for values in combinations:
            yield Step(rule.name, site, tuple(zip(names, values)), rule.site_key)


def check_step(loaded: Loaded, rule: Rule, step: Step, inputs: dict,
               expected: dict, registry: Mapping[str, Rule] | None = None) -> Application:
    """Apply one step and compare the result with ``expected`` (the original's outputs). A
    failure of the rule's own code (an exception, a wrong answer, a run past the time limit)
    is an "error" naming the rule and its file, and so is a result that does not verify."""
    sizes = dict(loaded.bound.sizes)
    try:
        result = apply_step(loaded.kernel, step, registry or {rule.name: rule},
                            context_for(loaded))
        if isinstance(result, NotApplicable):
            return Application(str(loaded.path), sizes, step, "not-applicable", result.reason)
        verify(result)
        got = run_interp(dataclasses.replace(loaded, kernel=result), copy_inputs(inputs))
    except RuleError as exc:
        return Application(str(loaded.path), sizes, step, "error", str(exc))
    except KirError as exc:
        return Application(str(loaded.path), sizes, step, "error", str(exc).splitlines()[0])
    bound = loaded.bound
    outcome = compare_outputs(got, expected,
                              lambda out: bound.tolerance(bound.spec.args[out].dtype))
    if outcome.ok:
        return Application(str(loaded.path), sizes, step, "same")
    return Application(str(loaded.path), sizes, step, "changed", outcome.describe())


def sweep(rules: Iterable[Rule], files: Iterable[Path],
          size_sets: Mapping[str, list[dict[str, int]]] | None = None,
          registry: Mapping[str, Rule] | None = None) -> list[Application]:
    """Apply every rule at every site with every parameter value to every file, at each of
    the file's size sets (default: the spec's defaults and its ragged sizes). ``registry``
    (holding the rules) names their files in errors; a rule that runs past its time limit
    is not tried further (each try would cost the limit again)."""
    rules = list(rules)
    results: list[Application] = []
    for path in files:
        first = load_kernel(path)
        sets = (size_sets or {}).get(path.name)
        if sets is None:
            sets = [{}] + ([dict(first.spec.ragged)] if first.spec and first.spec.ragged else [])
        for sizes in sets:
            results += check_rules_on(load_kernel(path, sizes=sizes), rules, registry)
    return results


def check_rules_on(loaded: Loaded, rules: Iterable[Rule],
                   registry: Mapping[str, Rule] | None = None,
                   product: bool = True) -> list[Application]:
    """Every step of every rule in ``rules`` on one loaded kernel at its sizes, each compared
    with the original on the interpreter (seed 0's inputs); ``product`` as in
    :func:`steps_of`."""
    failures = getattr(registry, "failures", None)
    inputs = loaded.bound.make_inputs(0)
    expected = run_interp(loaded, copy_inputs(inputs))
    results: list[Application] = []
    for rule in rules:
        results += _rule_on(loaded, rule, inputs, expected, registry, failures, product)
    return results


def _rule_on(loaded: Loaded, rule: Rule, inputs: dict, expected: dict,
             registry: Mapping[str, Rule] | None, failures,
             product: bool = True) -> list[Application]:
    """Every step of ``rule`` on one kernel at one size set, checked."""
    sizes = dict(loaded.bound.sizes)
    where = Step(rule.name, "?", (), rule.site_key)
    if failures is not None and not failures.usable(rule.name):
        return []
    try:
        steps = list(steps_of(rule, loaded.kernel, registry, product))
    except RuleError as exc:
        return [Application(str(loaded.path), sizes, where, "error", str(exc))]
    out = []
    for step in steps:
        if failures is not None and not failures.usable(rule.name):
            break
        out.append(check_step(loaded, rule, step, inputs, expected, registry))
    return out


def report_rules_file(registry, path: Path, examples: str | None) -> int:
    """``kir rules test PATH``: sweep the rules defined in PATH over the examples."""
    from kir.driver.registry import load_rules_file

    names = {r.name for r in load_rules_file(path)}
    rules = [registry[n] for n in sorted(names)]
    files = example_files(Path(examples) if examples else default_examples_dir())
    if not files:
        raise KirError("no examples with specs found", hint="pass --examples DIR")
    results = sweep(rules, files, registry=registry)
    counts: dict[str, int] = {}
    for app in results:
        counts[app.status] = counts.get(app.status, 0) + 1
        if app.status in ("changed", "error"):
            sizes = ", ".join(f"{k}={v}" for k, v in app.sizes.items())
            print(f"{app.status.upper()}: {app.step} on {Path(app.kernel_file).name} ({sizes})")
            print("    " + app.detail.replace("\n", "\n    "))
    for name in sorted(getattr(registry.failures, "timed_out", ())):
        if name in names:
            print(f"rule {name} ran past its time limit: it was not tried further")
    applied = counts.get("same", 0) + counts.get("changed", 0)
    print(f"{len(rules)} rule(s), {len(files)} kernel(s): {applied} applications checked, "
          f"{counts.get('same', 0)} kept results, {counts.get('changed', 0)} changed results, "
          f"{counts.get('error', 0)} errors, {counts.get('not-applicable', 0)} not applicable")
    return 1 if counts.get("changed") or counts.get("error") else 0
