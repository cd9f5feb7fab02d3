"""``kir rules``: list the loaded rules, show one, or test a user's rule over the examples."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

from kir.driver.registry import load_registry
from kir.errors import KirError


def register(sub) -> None:
    p = sub.add_parser("rules", help="list, show or test rewrite rules",
                       description="Without arguments: every loaded rule with its one-line "
                                   "description and parameters. `show NAME [FILE]`: its full "
                                   "doc and the sites it matches in FILE. `test PATH`: apply "
                                   "the rules in PATH (.rules or .py) at every site of every "
                                   "example and report where results changed; `test CASES.kir`: "
                                   "run a file of rule test cases (RUN / CHECK / REFUSE, see "
                                   "docs/ADDING_RULES.md).")
    p.add_argument("action", nargs="?", choices=["list", "show", "test"], default="list")
    p.add_argument("target", nargs="?",
                   help="rule NAME for show; rules PATH or a CASES.kir file for test")
    p.add_argument("file", nargs="?", help="kernel file whose sites `show` lists")
    p.add_argument("--rules", action="append", default=[], metavar="PATH",
                   help="also load rules from PATH (.rules or .py); repeatable")
    p.add_argument("--examples", default=None,
                   help="folder of kernels for `test` (default: the examples installed with kir)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    extra = list(args.rules)
    if args.action == "test":
        if not args.target:
            raise KirError("`kir rules test` needs the PATH of the rules to test")
        if Path(args.target).suffix == ".kir":
            return run_cases(load_registry(extra), Path(args.target))
        extra.append(args.target)
    registry = load_registry(extra)
    if args.action == "list":
        return list_rules(registry)
    if args.action == "show":
        return show_rule(registry, args.target, args.file)
    from kir.driver.rulecheck import report_rules_file

    return report_rules_file(registry, Path(args.target), args.examples)


def run_cases(registry, path: Path) -> int:
    """``kir rules test CASES.kir``: every case of the file, one line each."""
    from kir.driver.rulecases import run_case_file

    outcomes = run_case_file(path, registry)
    for outcome in outcomes:
        print(outcome)
    failed = sum(not o.ok for o in outcomes)
    print(f"{len(outcomes)} case(s): {len(outcomes) - failed} passed, {failed} failed")
    return 1 if failed else 0


def list_rules(registry) -> int:
    width = max((len(name) for name in registry), default=10)
    for name in sorted(registry):
        rule = registry[name]
        params = ", ".join(f"{p.name}∈{{{','.join(str(c) for c in p.choices)}}}"
                           for p in rule.params)
        site = f"{rule.site_key}=SITE"
        line = f"{name:<{width}}  {rule.summary}"
        print(line if len(line) <= 110 else line[:107] + "...")
        print(f"{'':<{width}}  step: {name}{{{site}{', ' + params if params else ''}}}"
              f"   [{registry.origins[name]}]")
    print(f"\n{len(registry)} rules loaded")
    return 0


def show_rule(registry, name: str | None, file: str | None) -> int:
    if not name:
        raise KirError("`kir rules show` needs a rule NAME", hint="`kir rules` lists them")
    rule = registry.get(name)
    if rule is None:
        close = [n for n in registry if name in n or n in name]
        raise KirError(f"no rule named {name!r}",
                       hint=f"did you mean {', '.join(close)}?" if close
                       else "`kir rules` lists them")
    doc = getattr(rule, "doc", None) or type(rule).__doc__ or rule.summary
    print(f"{rule.name}  ({registry.origins[name]})\n")
    print(inspect.cleandoc(doc))
    for p in rule.params:
        print(f"\nparameter {p.name}: one of {', '.join(str(c) for c in p.choices)}")
    if file:
        from kir.driver.load import load_kernel

        from kir.rules import context_for

        loaded = load_kernel(file)
        sites = rule.sites(loaded.kernel, context_for(loaded))
        print(f"\nsites in {file}: " + (", ".join(f"{rule.site_key}={s}" for s in sites)
                                       if sites else "none"))
    return 0
