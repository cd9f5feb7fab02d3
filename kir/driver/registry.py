"""Finding rules: the built-in catalog, installed plug-ins and a user's own files.

* every module in :mod:`kir.rewrites` that defines ``RULES`` (a list of rule objects),
* every ``*.rules`` file shipped in :mod:`kir.rewrites` (declarative rules),
* entry points in the group ``kir.rules`` (each loads to a list of rules, a rule, or a
  module with ``RULES``),
* ``--rules PATH``: a Python file with ``RULES`` or a ``.rules`` file.

Names must be unique; a clash is an error that names both origins.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import re
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Iterable

from kir.errors import KirError
from kir.rules import FailureLog, LegacyRule, ParamSpace, Rule, as_rule

ENTRY_POINT_GROUP = "kir.rules"


class Registry(dict):
    """``name -> rule`` with the origin of each rule kept for messages, the names of kir's
    own rules (``builtin``: :func:`kir.rules.guard.ships_with_kir`), and a log of the rules'
    failures while it is used (:class:`kir.rules.FailureLog`)."""

    def __init__(self) -> None:
        super().__init__()
        self.origins: dict[str, str] = {}
        self.builtin: set[str] = set()
        self.failures = FailureLog()

    def add(self, rule: Rule, origin: str) -> None:
        try:
            adapted = as_rule(rule)
        except Exception as exc:  # noqa: BLE001 - adapting reads the rule's own attributes
            raise KirError(f"{origin}: {_shown(rule)} is not a usable rule: reading it raised "
                           f"{type(exc).__name__}: {exc}",
                           hint="see docs/ADDING_RULES.md for what a rule provides") from None
        if adapted is None:
            raise KirError(f"{origin}: {_shown(rule)} is not a rule",
                           hint="a rule has a name, match() or sites(), and apply(); "
                                "see docs/ADDING_RULES.md")
        rule = adapted
        check_rule_shape(rule, origin)
        if rule.name in self:
            raise KirError(f"rule {rule.name!r} from {origin} clashes with the one from "
                           f"{self.origins[rule.name]}", hint="rename one of them")
        self[rule.name] = rule
        self.origins[rule.name] = origin

    def add_all(self, rules: Iterable[Rule], origin: str) -> None:
        for rule in rules:
            self.add(rule, origin)

    def fingerprint(self) -> str:
        """A hash of every rule's name and source (its module's file, or a declarative
        rule's text): a changed rule, built in or the user's, changes it."""
        digest = hashlib.sha256()
        for name in sorted(self):
            digest.update(f"\0{name}\0".encode() + rule_source(self[name]))
        return digest.hexdigest()[:16]


_RULE_NAME = re.compile(r"[a-z][a-z0-9-]*")


def check_rule_shape(rule: Rule, origin: str) -> None:
    """A KirError naming ``origin`` unless the rule's name is a kebab-case string (steps
    are written ``name{...}``), its site key a name, and its parameters ParamSpaces that
    each offer at least one value: what every caller reads before running the rule."""
    name = getattr(rule, "name", None)
    if not isinstance(name, str) or not _RULE_NAME.fullmatch(name):
        raise KirError(f"{origin}: rule name {_shown(name)} is not a kebab-case name",
                       hint="name rules like tile-loop: lower-case letters, digits and '-'")
    site_key = getattr(rule, "site_key", None)
    if not isinstance(site_key, str) or not site_key.isidentifier():
        raise KirError(f"{origin}: rule {name}: site_key {_shown(site_key)} is not a name",
                       hint="e.g. site_key = \"loop\"")
    try:
        params = rule.params
        spaces = list(params) if isinstance(params, (list, tuple)) else None
    except Exception as exc:  # noqa: BLE001 - the rule's own code (a Params property)
        raise KirError(f"{origin}: rule {name}: reading its parameters raised "
                       f"{type(exc).__name__}: {exc}") from None
    if spaces is None or not all(isinstance(p, ParamSpace) and isinstance(p.choices, tuple)
                                 and p.choices for p in spaces):
        raise KirError(f"{origin}: rule {name}: parameters {_shown(params)} are not "
                       "parameter spaces that each offer a value",
                       hint="declare a Params dataclass of choice(...) fields (see "
                            "docs/ADDING_RULES.md)")


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a user object whose repr raises
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def rule_source(rule: Rule) -> bytes:
    """The source a rule's behaviour comes from, as bytes: a declarative rule's own text, or
    the file of the module that defines a Python rule's class (its representation when the
    file cannot be read)."""
    if isinstance(rule, LegacyRule):
        rule = rule.rule  # the adapter's source says nothing about the rule it adapts
    text = getattr(rule, "text", None)
    if isinstance(text, str):
        return text.encode()
    module = sys.modules.get(type(rule).__module__)
    file = getattr(module, "__file__", None)
    if file:
        try:
            return Path(file).read_bytes()
        except OSError:
            pass
    return repr(rule).encode()


def _rules_of(obj: object, origin: str) -> list[Rule]:
    if isinstance(obj, (list, tuple)):
        return list(obj)
    if _one_rule(obj):
        return [obj]  # type: ignore[list-item]
    if hasattr(obj, "RULES"):
        rules = obj.RULES  # type: ignore[attr-defined]
        if isinstance(rules, (list, tuple)):
            return list(rules)
        if _one_rule(rules):
            return [rules]
        raise KirError(f"{origin}: RULES is {_shown(rules)}, not a list of rules",
                       hint="write RULES = [MyRule()]")
    raise KirError(f"{origin} provides no rules (expected a rule, a list, or a module with RULES)")


def _one_rule(obj: object) -> bool:
    """Whether ``obj`` is a rule object (not a class, list or module): Registry.add checks
    the rest."""
    return not isinstance(obj, type) and hasattr(obj, "name") and hasattr(obj, "apply")


def load_rules_file(path: Path) -> list[Rule]:
    """Rules from a user's file: ``.rules`` (declarative) or ``.py`` (a module with RULES)."""
    if not path.exists():
        raise KirError(f"no such rules file: {path}")
    if path.is_dir():
        raise KirError(f"{path} is a folder, not a rules file",
                       hint="name a .rules file or a .py module defining RULES")
    if path.suffix == ".rules":
        from kir.rules.pattern import parse_rules

        try:
            text = path.read_text(encoding="utf-8-sig")  # a byte order mark is fine
        except UnicodeDecodeError as exc:
            raise KirError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                           hint="a .rules file is text; save it as UTF-8") from None
        except OSError as exc:
            raise KirError(f"cannot read {path}: {exc.strerror}") from None
        return parse_rules(text, str(path))
    if path.suffix == ".py":
        spec = importlib.util.spec_from_file_location(f"kir_user_rules_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise KirError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except KirError:
            raise
        except Exception as exc:
            raise KirError(f"{path}: importing the rule module failed: "
                           f"{type(exc).__name__}: {exc}") from None
        return _rules_of(module, str(path))
    raise KirError(f"don't know how to load rules from {path.name}",
                   hint="use a .rules file or a .py module defining RULES")


def builtin_rules() -> list[tuple[Rule, str]]:
    """The catalog shipped in kir.rewrites, in a stable (sorted) order."""
    import kir.rewrites as package

    found: list[tuple[Rule, str]] = []
    # Rule families are subpackages (rewrites/vectorize/, ...): walk them too. Modules whose
    # name starts with "_" and family helpers (no RULES) contribute nothing.
    modules = pkgutil.walk_packages(package.__path__, prefix="kir.rewrites.")
    for info in sorted(modules, key=lambda m: m.name):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(info.name)
        for rule in getattr(module, "RULES", []):
            found.append((rule, info.name))
    files = resources.files("kir.rewrites")
    for entry in sorted(files.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".rules"):
            from kir.rules.pattern import parse_rules

            for rule in parse_rules(entry.read_text(), f"rewrites/{entry.name}"):
                found.append((rule, f"rewrites/{entry.name}"))
    return found


def plugin_rules() -> list[tuple[Rule, str]]:
    found: list[tuple[Rule, str]] = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        origin = f"entry point {ep.name} ({ep.value})"
        try:
            obj = ep.load()
        except Exception as exc:
            raise KirError(f"{origin} failed to load: {type(exc).__name__}: {exc}") from None
        found.extend((rule, origin) for rule in _rules_of(obj, origin))
    return found


def load_registry(extra_paths: Iterable[str | Path] = (), *, plugins: bool = True) -> Registry:
    """All rules: built-in, plug-ins (unless ``plugins`` is False) and ``extra_paths``."""
    registry = Registry()
    for rule, origin in builtin_rules():
        registry.add(rule, origin)
        registry.builtin.add(rule.name)
    if plugins:
        for rule, origin in plugin_rules():
            registry.add(rule, origin)
    for path in extra_paths:
        registry.add_all(load_rules_file(Path(path)), str(path))
    return registry
