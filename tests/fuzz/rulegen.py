"""User-rule fuzzing: generated rule modules that raise, loop, or answer garbage, run the way
``kir apply``, ``kir rules test`` and the search run a user's rule.

Each input is numbered by a seed (:func:`rule_source`): a Python module defining one rule,
in the current protocol (``candidates`` / ``plan`` / ``apply``) or the first one (``sites`` /
``apply(kernel, site, params, ctx)``), each method either sound or misbehaving: raising
(any exception class, ``SystemExit`` and ``GeneratorExit`` included, an exception whose
``str`` raises, runaway recursion), looping (spinning, sleeping, swallowing the interruption
in a retry loop), or returning garbage (``None``, numbers, strings, a kernel with nonsense in
its fields, a refusal without a reason, sites that are not strings), with odd names and
parameter spaces.

:func:`rule_outcome` is the oracle: loading the module gives rules or a :class:`KirError`;
listing sites, applying steps (through :func:`kir.rules.apply_step`, under the rule limits)
and checking a result (verify, print, fingerprint, a run on the interpreter) give kernels,
refusals or KirErrors (a :class:`~kir.rules.RuleError` naming the rule). Anything else
raises :class:`~fuzz.cudagen.FuzzFailure`. Code that never returns from one C call
(``sum(range(10**12))``) is not generated: no limit in the search's process can stop it
(docs/RELIABILITY.md).
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

from fuzz.cudagen import EXAMPLES, FuzzFailure

from kir.errors import KirError

KERNELS = {"reduce": {}, "softmax": {"rows": 4, "cols": 64}}

HEADER = '''"""A generated rule (kir's user-rule fuzzer)."""
import dataclasses
import time

from kir.ir import Block, Const, For, Kernel, Var
from kir.ir.types import I32
from kir.rules import BaseRule, Match, NotApplicable, ParamSpace, choice


class BadStr(Exception):
    def __str__(self):
        raise RuntimeError("str of this exception raises")


def recurse(n):
    return recurse(n + 1) + 1
'''

RAISES = ["raise ValueError('rule bug')", "raise KeyError(5)", "return 1 // 0",
          "raise RecursionError('deep')", "return recurse(0)", "raise MemoryError()",
          "raise SystemExit(3)", "raise GeneratorExit()", "raise StopIteration()",
          "raise BadStr()", "assert False, 'nope'", "raise BaseException('base')",
          "import kir.errors\n        raise kir.errors.KirError('the rule refuses by raising')",
          "return kernel.no_such_field", "raise TypeError(None)", "raise OSError(2, 'gone')"]
LOOPS = ["while True:\n            pass",
         "while True:\n            try:\n                pass\n            except Exception:\n"
         "                pass",
         "time.sleep(1000)",
         "while True:\n            try:\n                time.sleep(1000)\n"
         "            except BaseException:\n                pass",
         "n = 0\n        while n >= 0:\n            n += 1"]
KERNEL_GARBAGE = ["return None", "return 42", "return 'a string'", "return []",
                  "return kernel.body", "return dataclasses.replace(kernel, body=None)",
                  "return dataclasses.replace(kernel, body=Block((5,)))",
                  "return dataclasses.replace(kernel, params=None)",
                  "return dataclasses.replace(kernel, name=5)",
                  "return dataclasses.replace(kernel, launch=None)",
                  "return dataclasses.replace(kernel, body=Block((Const('x', I32),)))",
                  "return dataclasses.replace(kernel, body=Block(kernel.body.stmts * 2))",
                  "return NotApplicable(None)", "return NotApplicable(5)",
                  "return (k for k in [kernel])", "return Kernel",
                  "return dataclasses.replace(kernel, body=Block((Var('nope', I32),)))",
                  "return dataclasses.replace(kernel, params=kernel.params[:1])"]
SITE_GARBAGE = ["return None", "return 5", "return [1, 2]", "return 'L0'", "return {'a': 1}",
                "return [None]", "return (s for s in ['L0', 1])", "return ['L0'] * 100000",
                "return ['L' + str(i) for i in range(50)]"]
GOOD_SITES = "return [n.label for n in kernel.body.walk() if isinstance(n, For)] or ['L0']"
GOOD_APPLY = ["return kernel", "return NotApplicable('not here')",
              "return dataclasses.replace(kernel, name=kernel.name)"]
NAMES = ["fuzz-rule", "fuzz-rule", "fuzz-rule", 5, "", "has space", "tile-loop", "UPPER",
         None, "x" * 500]
PARAMS = ["", "", "params = ()", "params = (ParamSpace('f', ()),)",
          "params = (ParamSpace('f', (1, 2)),)", "params = 5", "params = None",
          "params = [ParamSpace('f', ('a', None))]"]


def _body(rng: random.Random, good: list[str] | str, garbage: list[str]) -> str:
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(RAISES)
    if roll < 0.25:
        return rng.choice(LOOPS)
    if roll < 0.5:
        return rng.choice(garbage)
    return good if isinstance(good, str) else rng.choice(good)


def rule_source(seed: int) -> str:
    """The Python source of one generated rule module for ``seed``."""
    rng = random.Random(seed)
    name = rng.choice(NAMES)
    legacy = rng.random() < 0.3
    lines = [HEADER, "", "class Fuzzed(BaseRule):", '    """A generated rule."""', "",
             f"    name = {name!r}", "    site_key = 'loop'"]
    if legacy or rng.random() < 0.2:
        params = rng.choice(PARAMS)
        if params:
            lines.append(f"    {params}")
    else:
        lines += ["", "    @dataclasses.dataclass(frozen=True)", "    class Params:",
                  f"        factor: int = choice({rng.choice(['2, 4', '8', '0, -1'])})"]
    if legacy:
        lines += ["", "    def sites(self, kernel):",
                  f"        {_body(rng, GOOD_SITES, SITE_GARBAGE)}",
                  "", "    def apply(self, kernel, site, params, ctx):",
                  f"        {_body(rng, GOOD_APPLY, KERNEL_GARBAGE)}"]
    else:
        lines += ["", "    def candidates(self, kernel):",
                  f"        {_body(rng, GOOD_SITES, SITE_GARBAGE)}",
                  "", "    def plan(self, kernel, site):",
                  f"        {_body(rng, 'return None', ['return NotApplicable(None)', 'return 7'])}",
                  "", "    def apply(self, kernel, match, params, ctx):",
                  f"        {_body(rng, GOOD_APPLY, KERNEL_GARBAGE)}"]
        if rng.random() < 0.1:
            lines += ["", "    def make_params(self, values):",
                      f"        {_body(rng, 'return self.Params(**values)', ['return None'])}"]
    rules = rng.choice(["[Fuzzed()]"] * 8 + ["Fuzzed()", "[Fuzzed(), Fuzzed()]", "[5]",
                                             "None", "[Fuzzed]"])
    lines += ["", "", f"RULES = {rules}", ""]
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def setting(name: str):
    from kir.driver.load import load_kernel
    from kir.rules import context_for

    loaded = load_kernel(EXAMPLES / f"{name}.cu", sizes=KERNELS[name])
    inputs = loaded.bound.make_inputs(0)
    from kir.driver.runners import copy_inputs, run_interp

    return loaded, context_for(loaded), inputs, run_interp(loaded, copy_inputs(inputs))


def rule_outcome(source: str, folder: Path, seed: int = 0) -> str:
    """"applied" (some step built a kernel that passed every check), "refused", "error"
    (a KirError somewhere, a RuleError most often); raises FuzzFailure otherwise."""
    path = folder / f"fuzz_rule_{seed}.py"
    path.write_text(source)
    try:
        return _exercise(path, random.Random(seed))
    except FuzzFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - what the fuzzer hunts
        raise FuzzFailure(f"{type(exc).__name__}: {exc}", source) from exc


def _exercise(path: Path, rng: random.Random) -> str:
    from kir.driver.registry import Registry, load_rules_file
    from kir.driver.rulecheck import check_step
    from kir.ir.printer import print_kernel
    from kir.ir.verify import verify
    from kir.rules import NotApplicable, RuleError, Step, apply_step
    from kir.search.genome import safe_sites

    try:
        registry = Registry()
        for rule in load_rules_file(path):
            registry.add(rule, str(path))
    except KirError:
        return "error"
    loaded, ctx, inputs, expected = setting(rng.choice(sorted(KERNELS)))
    outcome = "refused"
    for name in sorted(registry):
        rule = registry[name]
        sites = safe_sites(rule, loaded.kernel, registry)[:3]
        if registry.failures.counts:
            outcome = "error"
        for site in sites:
            if not registry.failures.usable(name):
                break
            params = tuple((p.name, p.choices[0]) for p in rule.params if p.choices)
            step = Step(name, site, params, rule.site_key)
            try:
                result = apply_step(loaded.kernel, step, registry, ctx)
            except RuleError:
                outcome = "error"
                continue
            if isinstance(result, NotApplicable):
                continue
            print_kernel(result)
            result.fingerprint()
            try:
                verify(result)
            except KirError:
                outcome = "error"
                continue
            check_step(loaded, rule, step, inputs, expected, registry)
            outcome = "applied" if outcome == "refused" else outcome
    return outcome
