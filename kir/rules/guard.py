"""Running a rule's code as untrusted: under a time limit, with its exceptions and wrong
answers turned into a :class:`RuleError` that names the rule, the file it came from and the
line that failed, and with a cap on the size of the kernel it returns.

Every caller of a rule goes through here: :func:`kir.rules.trace.apply_step` (``kir apply``,
``kir rules test``, the search and its replays) and :func:`rule_sites` (``kir rules show``,
the search's moves). A registry that keeps a :class:`FailureLog` (``registry.failures``)
learns of every failure, so the search can count them, report them once at the end, and stop
offering a rule that ran past its time limit (every further try would cost the limit again).
"""

from __future__ import annotations

import inspect
import sys
import traceback
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from kir import limits
from kir.errors import AnalysisLimitError, KirError, Loc, frame_place
from kir.ir import Kernel, Node, Stmt


class RuleError(KirError):
    """A rule's own code failed: it raised, returned something that is not a kernel or a
    refusal, or ran past its time limit. Located at the rule's line where that is known."""

    def __init__(self, message: str, loc: Loc | None = None, *, rule: str, origin: str | None,
                 timed_out: bool = False, source_line: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, loc, source_line=source_line, hint=hint)
        self.rule = rule
        self.origin = origin
        self.timed_out = timed_out


@dataclass
class FailureLog:
    """How often each rule failed, the first failure's message, and which timed out."""

    counts: Counter = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)
    timed_out: set[str] = field(default_factory=set)

    def note(self, error: RuleError) -> None:
        self.counts[error.rule] += 1
        self.first.setdefault(error.rule, str(error))
        if error.timed_out:
            self.timed_out.add(error.rule)

    def usable(self, name: str) -> bool:
        """False for a rule that ran past its time limit: trying it again costs as much."""
        return name not in self.timed_out

    def summary(self) -> list[str]:
        """One paragraph per failing rule, for the end of a search."""
        out = []
        for name, count in sorted(self.counts.items()):
            stopped = "; not tried again after it timed out" if name in self.timed_out else ""
            out.append(f"rule {name} failed {count} time(s), each candidate it was in "
                       f"rejected{stopped}; the first:\n  "
                       + self.first[name].replace("\n", "\n  "))
        return out


def origin_of(registry: Mapping[str, Any], name: str) -> str | None:
    """Where ``registry`` says rule ``name`` came from (a file, a module), if it keeps that."""
    return getattr(registry, "origins", {}).get(name)


def ships_with_kir(registry: Mapping[str, Any], name: str) -> bool:
    """Whether rule ``name`` is one of kir's own (the registry's ``builtin`` names)."""
    return name in getattr(registry, "builtin", ())


def failures_of(registry: Mapping[str, Any]) -> FailureLog | None:
    """The registry's failure log, if it keeps one."""
    return getattr(registry, "failures", None)


def _named(rule: str, origin: str | None) -> str:
    return f"rule {rule}" + (f" (from {origin})" if origin else "")


def _blame_hint(origin: str | None) -> str:
    if origin and origin.startswith(("kir.rewrites", "rewrites/")):
        return "this is a bug in kir's rule, not in your kernel: please report it"
    return "this is a bug in the rule, not in your kernel: fix the rule or leave it out"


def _rule_file(rule: object) -> str | None:
    target = getattr(rule, "rule", rule)  # a first-protocol rule seen through its adapter
    module = sys.modules.get(type(target).__module__)
    return getattr(module, "__file__", None)


def _frame_in(tb: Any, rule_file: str | None) -> traceback.FrameSummary | None:
    """The deepest frame of ``tb`` in the rule's own file, else the deepest frame."""
    return limits.frame_in(list(traceback.extract_tb(tb)), rule_file)


def _located(frame: traceback.FrameSummary | None) -> dict[str, Any]:
    loc, line = frame_place(frame)
    return {"loc": loc, "source_line": line}


def _apply_place(rule: object) -> dict[str, Any]:
    """The place of the rule's ``apply`` method, for a wrong answer it gave."""
    target = getattr(rule, "rule", rule)
    try:
        function = type(target).apply
        lines, first = inspect.getsourcelines(function)
        file = inspect.getsourcefile(function)
    except (TypeError, OSError, AttributeError):
        return {}
    if not file:
        return {}
    return _located(traceback.FrameSummary(file, first, "apply"))


def run_guarded(rule: object, name: str, origin: str | None, doing: str,
                call: Callable[[], Any], failures: FailureLog | None = None) -> Any:
    """``call()`` (a piece of rule ``name``'s code, ``doing`` says what: ``"at loop=L1"``)
    under the rule time limit. Its exceptions become a :class:`RuleError` (noted in
    ``failures``); an :class:`AnalysisLimitError` passes through as it is."""
    seconds = limits.current().rule_s
    rule_file = _rule_file(rule)

    def too_slow(overrun: limits.Overrun) -> RuleError:
        return RuleError(f"{_named(name, origin)} did not finish within {overrun.limit_text} "
                         f"{doing}", rule=name, origin=origin, timed_out=True,
                         **_located(limits.frame_in(overrun.where, rule_file)),
                         hint=limits.limit_hint("rule_s", seconds)
                         + "; or the rule never ends: " + _blame_hint(origin))
    try:
        try:
            with limits.cpu_limit(seconds, too_slow):
                return call()
        except (RuleError, AnalysisLimitError, KeyboardInterrupt, limits.TimeLimitExceeded):
            raise
        except KirError as exc:
            raise RuleError(f"{_named(name, origin)} failed {doing}: {exc.message}", exc.loc,
                            rule=name, origin=origin, source_line=exc.source_line,
                            hint=exc.hint or _blame_hint(origin)) from None
        except BaseException as exc:  # the rule's own code: any exception at all is its bug
            raise RuleError(f"{_named(name, origin)} raised {type(exc).__name__}: "
                            f"{_safe_str(exc)} ({doing})", rule=name, origin=origin,
                            **_located(_frame_in(exc.__traceback__, rule_file)),
                            hint=_blame_hint(origin)) from None
    except RuleError as error:
        if failures is not None:
            failures.note(error)
        raise


def checked_result(result: object, rule: object, name: str, origin: str | None, doing: str,
                   failures: FailureLog | None = None, check_it: bool = True) -> object:
    """``result`` when it is a Kernel within the IR size limit or a NotApplicable; a refusal
    when the kernel is too large; a RuleError for anything else. ``check_it=False`` skips
    printing and verifying it (kir's own rules: see :func:`_malformed`)."""
    from kir.rules.api import NotApplicable

    if isinstance(result, NotApplicable):
        return result
    if not isinstance(result, Kernel):
        error = RuleError(f"{_named(name, origin)} returned {_shown(result)} {doing}: apply "
                          "must return a Kernel or NotApplicable(reason)", rule=name,
                          origin=origin, hint=_blame_hint(origin),
                          **_apply_place(getattr(rule, "rule", rule)))
        if failures is not None:
            failures.note(error)
        raise error
    cap = limits.current().ir_nodes
    if count_nodes(result, cap) > cap:  # first: printing and verifying scale with the size
        return NotApplicable(f"the result would have more than {cap} IR nodes (the limit per "
                             f"step; --limit ir_nodes=N raises it)")
    problem = _malformed(result) if check_it else None
    if problem:
        error = RuleError(f"{_named(name, origin)} returned a malformed kernel {doing}: "
                          f"{problem}", rule=name, origin=origin, hint=_blame_hint(origin),
                          **_apply_place(getattr(rule, "rule", rule)))
        if failures is not None:
            failures.note(error)
        raise error
    return result


def _listed(sites: object) -> object:
    """Any iterable of sites as a list (iterated under the guard: a generator runs the rule's
    code); anything else as it is, for the check to name."""
    if isinstance(sites, (str, bytes)) or not hasattr(sites, "__iter__"):
        return sites
    return list(sites)  # type: ignore[call-overload]


def _malformed(kernel: Kernel) -> str | None:
    """Why a Kernel a rule returned cannot be printed or verified (a field holding the wrong
    kind of thing: what every later step does with it), or None. A kernel the verifier
    refuses with a KirError is well-formed: its caller reports that.

    :func:`~kir.rules.trace.apply_step` skips this for kir's own rules: they are checked on
    every rule case and by the soundness sweep, a candidate's last kernel is printed when the
    search fingerprints it, and every candidate is verified again, against the target, when
    it is validated. Checking each step's result here as well was most of the search loop's
    own time on attention (its template kernels are large: printing one took 50 ms in a
    steady search on the H200, BENCHMARKS.md round 20). A rule from elsewhere is checked at
    once, so that garbage is blamed on it by name and line."""
    from kir.ir.verify import verify

    try:
        kernel.fingerprint()  # prints it (and keeps the fingerprint the search asks next)
        verify(kernel)
        stray = next((n.loc for n in kernel.body.walk() if isinstance(n, Stmt)
                      and n.loc is not None and not isinstance(n.loc, Loc)), None)
        if stray is not None:
            return f"a statement's loc is {type(stray).__name__}, not a kir.errors.Loc"
    except KirError:
        return None
    except Exception as exc:  # noqa: BLE001 - garbage in the rule's kernel
        return f"{type(exc).__name__}: {_safe_str(exc)}"
    return None


def _safe_str(value: object) -> str:
    try:
        return str(value)[:200]
    except Exception:  # noqa: BLE001 - an exception whose str raises
        return f"<{type(value).__name__}>"


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a user object whose repr raises
        text = "?"
    return f"{type(value).__name__} {text[:60]}" if value is not None else "None"


def count_nodes(node: Kernel | Node, cap: int) -> int:
    """The node count of a kernel (or any node: a loop's body), counting no further than
    ``cap + 1``."""
    count = 0
    for _ in node.walk():
        count += 1
        if count > cap:
            break
    return count


class SiteCache:
    """The sites each rule listed for each kernel, most recent ``size`` pairs. Rules are
    deterministic and kernels immutable, so a search that meets a kernel again (a parent it
    mutates, a genome it replays, a second search answered from the tuning database) need
    not run the rule's analysis again. Keyed by identity of the rule, the kernel and the rule
    context (sites may depend on the sizes and target it carries), holding all three so no
    identity can be reused while its entry lives."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.entries: OrderedDict[tuple[int, int, int],
                                  tuple[object, Kernel, object, list[str]]] = OrderedDict()

    def sites(self, rule: Any, kernel: Kernel, compute: Callable[[], list[str]],
              ctx: object = None) -> list[str]:
        key = (id(rule), id(kernel), id(ctx))
        hit = self.entries.get(key)
        if hit is not None:
            self.entries.move_to_end(key)
            return list(hit[3])
        sites = compute()
        if isinstance(sites, list):
            self.entries[key] = (rule, kernel, ctx, list(sites))
            if len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return sites


SITES = SiteCache()


def rule_sites(rule: Any, kernel: Kernel, registry: Mapping[str, Any] | None = None,
               ctx: Any = None) -> list[str]:
    """``rule.sites(kernel, ctx)`` under the rule's limits (remembered in :data:`SITES`): a list
    of site names, or a RuleError (an analysis over its bound offers no sites)."""
    name = getattr(rule, "name", "?")
    origin = origin_of(registry, name) if registry is not None else None
    failures = failures_of(registry) if registry is not None else None
    try:
        sites = run_guarded(rule, name, origin, "listing its sites",
                            lambda: SITES.sites(rule, kernel,
                                                lambda: _listed(rule.sites(kernel, ctx)), ctx),
                            failures)
    except AnalysisLimitError:
        return []
    if not isinstance(sites, list) or not all(isinstance(s, str) for s in sites):
        error = RuleError(f"{_named(name, origin)} listed its sites as {_shown(sites)}: "
                          "sites must be a list of strings", rule=name, origin=origin,
                          hint=_blame_hint(origin))
        if failures is not None:
            failures.note(error)
        raise error
    return list(sites)
