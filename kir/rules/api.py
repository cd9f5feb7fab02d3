"""The rewrite-rule interface (protocol v2).

A rule is a CUDA optimization pattern over kir IR. It names the places it can act (*sites*:
loop labels, buffer names, parameter names, occurrence numbers) and works in two parts, as
egg's searcher and applier do:

* ``match(kernel)`` yields a :class:`Match` for every site where the rule is legal for SOME
  value of its parameters, carrying the *plan* its legality analysis computed (the loop and
  its canonical form, the accesses to rewrite, ...); ``match_at(kernel, site)`` does the same
  for one site, or says why not (:class:`NotApplicable`);
* ``apply(kernel, match, params, ctx)`` consumes the plan and returns a new kernel, or
  :class:`NotApplicable` when the chosen parameters do not fit (a tile larger than the trip
  count). It runs no legality analysis of its own.

Parameters are typed: a rule's ``Params`` is a frozen dataclass whose fields are declared with
:func:`choice` (the values the search may give, the first being the default, stated once);
``apply`` receives an instance. Rules never mutate their input (IR nodes are immutable) and
are deterministic. :class:`BaseRule` (sites from ``candidates`` + ``plan``) and
:class:`LoopRule` (sites are loops) carry the shared plumbing; rules written for the first
protocol (``sites`` and ``apply(kernel, site, params_mapping, ctx)``) are adapted by
:func:`as_rule`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, runtime_checkable

from kir.errors import KirError
from kir.ir import For, Kernel
from kir.target import Target

# How often each rule's legality analysis (``plan``) ran: the catalog sweep reads it to show
# that a step analyses its site once.
ANALYSES: Counter = Counter()


@dataclass(frozen=True)
class ParamSpace:
    """A rule parameter and the values the search may give it (the first is the default)."""

    name: str
    choices: tuple[int | str | bool, ...]

    def parse(self, text: str) -> int | str | bool:
        """Parse a value written in a step string, checking it is one of the choices."""
        for choice_value in self.choices:
            if str(choice_value).lower() == text.lower():
                return choice_value
        allowed = ", ".join(str(c) for c in self.choices)
        raise KirError(f"bad value {text!r} for parameter {self.name!r}",
                       hint=f"choose one of {allowed}")


def choice(*values: int | str | bool) -> Any:
    """Declare a rule parameter in a ``Params`` dataclass: the values the search may give it,
    the first being the default. ``factor: int = choice(8, 4, 16, 32)``."""
    if not values:
        raise ValueError("a parameter needs at least one value")
    return field(default=values[0], metadata={"choices": tuple(values)})


@dataclass(frozen=True)
class NoParams:
    """The parameters of a rule that has none."""


def param_spaces(params_type: type) -> tuple[ParamSpace, ...]:
    """The :class:`ParamSpace` of each field of a ``Params`` dataclass, in field order."""
    return tuple(ParamSpace(f.name, tuple(f.metadata["choices"]))
                 for f in dataclasses.fields(params_type))


@dataclass(frozen=True)
class NotApplicable:
    """Why a rule did not apply at a site (a value, not an exception: the search expects it)."""

    reason: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Match:
    """A site where a rule is legal for some parameter value, with the plan its analysis
    computed (whatever ``apply`` needs; None when there is nothing to carry)."""

    site: str
    plan: Any = None


@dataclass(frozen=True)
class RuleContext:
    """What a rule may know besides the kernel: the spec's bound sizes and scalar argument
    values (for specialization), and the target it is rewriting for."""

    sizes: Mapping[str, int] = field(default_factory=dict)
    scalars: Mapping[str, int | float] = field(default_factory=dict)
    target: Target | None = None  # a kir.backends.TARGETS entry; None: any target
    # The spec's expression for each scalar argument (``Tr = "ceil(N / T)"``): a rule that
    # turns a loop bound into a grid size writes the expression, so the kernel stays valid
    # at other sizes instead of being specialized to ``scalars``.
    scalar_exprs: Mapping[str, str] = field(default_factory=dict)
    # Re-tiling (kir.rewrites.retile): the sizes it may change with their current values,
    # the unrewritten kernel it starts from, and how to lower the source again with other
    # values (the driver provides these; a kernel read from IR text has none).
    tile_sizes: Mapping[str, int] = field(default_factory=dict)
    base: Kernel | None = field(default=None, compare=False)
    retiled: Callable[[dict[str, int]], Kernel] | None = field(default=None, compare=False)
    # The spec bound at the compiled sizes (a kir.spec.BoundSpec), for rules that recognise
    # a kernel by running it at small sizes (kir.rewrites.attention.recognize); None for a
    # kernel read without a spec.
    bound: Any = field(default=None, compare=False)

    @property
    def static_shared_budget(self) -> int:
        """Bytes of static shared arrays a block may declare on the target: its limit, or
        Metal's 32 KiB (the smaller) when no target is known."""
        return self.target.max_static_shared_bytes if self.target is not None else 32 * 1024

def context_for(loaded, target: Target | None = None) -> "RuleContext":
    """The rule context for a loaded kernel (a :class:`kir.driver.load.Loaded`): its bound sizes,
    scalar values and their expressions, and the target (a :class:`kir.target.Target` from
    :data:`kir.backends.TARGETS`). ``kir apply``, ``kir compile`` and the search all use it, so
    a saved trace replays to the same kernel."""
    bound = loaded.bound
    if bound is None:
        return RuleContext(target=target)
    args = bound.spec.args
    scalars = {n: bound.scalar(n) for n, a in args.items() if a.is_scalar}
    exprs = {n: a.value for n, a in args.items() if a.is_scalar and a.value}
    tiles = loaded.tile_sizes() if hasattr(loaded, "tile_sizes") else {}
    return RuleContext(sizes=dict(bound.sizes), scalars=scalars, target=target,
                       scalar_exprs=exprs, tile_sizes=tiles, base=loaded.kernel,
                       retiled=loaded.retiled if tiles else None, bound=bound)


@runtime_checkable
class Rule(Protocol):
    """What every rule provides. ``name`` is a kebab-case verb; the class docstring names the
    CUDA practice the rule encodes and its source, and why it is legal."""

    name: str
    site_key: str
    params: tuple[ParamSpace, ...]

    @property
    def summary(self) -> str: ...

    def sites(self, kernel: Kernel, ctx: RuleContext | None = None) -> list[str]: ...

    def match(self, kernel: Kernel, ctx: RuleContext | None = None) -> Iterable[Match]: ...

    def match_at(self, kernel: Kernel, site: str,
                 ctx: RuleContext | None = None) -> Match | NotApplicable: ...

    def make_params(self, values: Mapping[str, object]) -> Any: ...

    def apply(self, kernel: Kernel, match: Match, params: Any,
              ctx: RuleContext) -> Kernel | NotApplicable: ...


def rule_summary(rule: object) -> str:
    """The first line of a rule's docstring."""
    doc = (type(rule).__doc__ or getattr(rule, "doc", "") or "").strip()
    return doc.splitlines()[0] if doc else ""


class BaseRule:
    """Base for Python rules. Class attributes ``name``, ``site_key`` and ``Params`` (a
    dataclass of :func:`choice` fields; none by default); ``summary`` from the docstring.

    A subclass names its sites with ``candidates(kernel)`` (cheap: the places worth
    analysing) and decides legality once per site in ``plan(kernel, site)``, returning what
    ``apply`` needs or :class:`NotApplicable`; ``match`` and ``match_at`` follow from those.
    """

    name: str = ""
    site_key: str = "loop"
    Params: type = NoParams
    # True when applying the rule a second time at the same site gives nothing new worth
    # evaluating: the step is idempotent, undoes the first (a transpose), or compounds it
    # into what one step with another parameter value already offers (pad 1 twice = pad 2).
    # The search keeps only the first such step of a genome (kir.search.genome.canonical).
    once_per_site: bool = False

    @property
    def params(self) -> tuple[ParamSpace, ...]:
        return param_spaces(self.Params)

    @property
    def summary(self) -> str:
        return rule_summary(self)

    def candidates(self, kernel: Kernel) -> Iterable[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def plan(self, kernel: Kernel, site: str) -> Any:
        """The legality analysis at ``site``: a plan for ``apply``, or NotApplicable. The
        default finds nothing to analyse (every candidate is legal)."""
        return None

    def candidates_in(self, kernel: Kernel, ctx: RuleContext | None) -> Iterable[str]:
        """The candidates when they depend on the rule context too (the sizes a spec lets
        a rule change); by default :meth:`candidates`."""
        return self.candidates(kernel)

    def plan_in(self, kernel: Kernel, site: str, ctx: RuleContext | None) -> Any:
        """The analysis when it depends on the rule context too; by default :meth:`plan`."""
        return self.plan(kernel, site)

    def _planned(self, kernel: Kernel, site: str,
                 ctx: RuleContext | None = None) -> Match | NotApplicable:
        ANALYSES[self.name] += 1
        plan = self.plan_in(kernel, site, ctx)
        if isinstance(plan, NotApplicable):
            return plan
        # A plan may say why no parameter value can make the site legal (a ``refusal``):
        # such a site is not offered (a site is one where the rule is legal for some value).
        refusal = getattr(plan, "refusal", "")
        return NotApplicable(refusal) if refusal else Match(site, plan)

    def match(self, kernel: Kernel, ctx: RuleContext | None = None) -> Iterator[Match]:
        for site in self.candidates_in(kernel, ctx):
            found = self._planned(kernel, site, ctx)
            if not isinstance(found, NotApplicable):
                yield found

    def match_at(self, kernel: Kernel, site: str,
                 ctx: RuleContext | None = None) -> Match | NotApplicable:
        if site not in set(self.candidates_in(kernel, ctx)):
            return NotApplicable(f"no site {self.site_key}={site}")
        return self._planned(kernel, site, ctx)

    def sites(self, kernel: Kernel, ctx: RuleContext | None = None) -> list[str]:
        """Every site where the rule is legal for some parameter value."""
        return [found.site for found in self.match(kernel, ctx)]

    def make_params(self, values: Mapping[str, object]) -> Any:
        """The typed parameters for a step's ``name -> value`` pairs (defaults for the rest)."""
        return self.Params(**values)

    def apply(self, kernel: Kernel, match: Match, params: Any,
              ctx: RuleContext) -> Kernel | NotApplicable:  # pragma: no cover - abstract
        raise NotImplementedError

    def rewrite(self, kernel: Kernel, site: str, params: Mapping[str, object] | None = None,
                ctx: RuleContext | None = None) -> Kernel | NotApplicable:
        """One application from Python (tests, notebooks): match at ``site``, then apply with
        ``params`` (a mapping; defaults for what it leaves out)."""
        ctx = ctx or RuleContext()
        found = self.match_at(kernel, site, ctx)
        if isinstance(found, NotApplicable):
            return found
        return self.apply(kernel, found, self.make_params(dict(params or {})), ctx)

    def __repr__(self) -> str:
        return f"<rule {self.name}>"


class LoopRule(BaseRule):
    """A rule whose sites are loops (``loop=L2``): ``plan_loop(kernel, loop)`` is its
    legality analysis, given the loop itself."""

    site_key = "loop"

    def candidates(self, kernel: Kernel) -> Iterable[str]:
        return [n.label for n in kernel.body.walk() if isinstance(n, For)]

    def plan(self, kernel: Kernel, site: str) -> Any:
        loop = next((n for n in kernel.body.walk() if isinstance(n, For) and n.label == site),
                    None)
        if loop is None:
            return NotApplicable(f"no loop {site}")
        return self.plan_loop(kernel, loop)

    def plan_loop(self, kernel: Kernel, loop: For) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class LegacyRule(BaseRule):
    """A rule written for the first protocol (``sites(kernel)`` and ``apply(kernel, site,
    params_mapping, ctx)``, parameters as ``ParamSpace`` tuples), seen through the current
    one. Its ``sites`` is both its candidates and its analysis."""

    def __init__(self, rule: Any) -> None:
        self.rule = rule
        self.name = rule.name
        self.site_key = getattr(rule, "site_key", "loop")
        self._params = tuple(getattr(rule, "params", ()))

    @property
    def params(self) -> tuple[ParamSpace, ...]:
        return self._params

    @property
    def summary(self) -> str:
        summary = getattr(self.rule, "summary", None)
        return summary if isinstance(summary, str) else rule_summary(self.rule)

    def candidates(self, kernel: Kernel) -> Iterable[str]:
        from kir.rules.guard import SITES  # its sites are its analysis: remember them

        return SITES.sites(self.rule, kernel, lambda: list(self.rule.sites(kernel)))

    def make_params(self, values: Mapping[str, object]) -> dict[str, object]:
        return {p.name: values.get(p.name, p.choices[0]) for p in self._params}

    def apply(self, kernel: Kernel, match: Match, params: Any,
              ctx: RuleContext) -> Kernel | NotApplicable:
        return self.rule.apply(kernel, match.site, params, ctx)

    def __repr__(self) -> str:
        return f"<rule {self.name} (first protocol)>"


def as_rule(obj: Any) -> Any:
    """``obj`` as a current rule: rules with ``match`` pass through, first-protocol rules
    (``sites`` and ``apply``, parameters as a ``params`` tuple of ParamSpace, possibly on a
    BaseRule subclass) are wrapped in :class:`LegacyRule`, anything else is None."""
    if obj is None or isinstance(obj, LegacyRule):
        return obj
    first_protocol = isinstance(getattr(type(obj), "params", None), tuple) or (
        isinstance(obj, BaseRule) and type(obj).sites is not BaseRule.sites)
    if not first_protocol and all(hasattr(obj, a) for a in
                                  ("name", "match", "match_at", "apply", "make_params")):
        return obj
    if all(hasattr(obj, a) for a in ("name", "sites", "apply")):
        return LegacyRule(obj)
    return None
