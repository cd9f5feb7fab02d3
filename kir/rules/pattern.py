"""Declarative rules: ``pattern => replacement if guard`` over kir expressions, as data.

A ``.rules`` file (grammar ``grammar/rules.lark``) holds local algebraic rewrites such as::

    rule exp-to-exp2 "exp(x) as exp2(x * log2 e) ...":
        exp(?x) => exp2(?x * 1.4426950408889634) if float(?x)

Patterns match expression trees: ``?x`` binds any subexpression (the same variable twice must
bind equal trees), a number matches a constant of equal value (a float literal matches only
floating-point constants, an integer literal only integers), ``exp(...)`` matches the precise
intrinsic and ``fast.exp(...)`` the fast one. The replacement is built with the types of the
bound variables: a literal takes the type of its sibling operand, a call the type of its first
argument, a comparison is ``bool``.

Sites (key ``at``) are ``all`` (every match, innermost first) or ``0``, ``1``, ... — the n-th
match in pre-order. Guards: ``float(?x)``, ``int(?x)``, ``const(?x)``, ``nonzero(?x)``,
``pow2(?x)`` (a positive power-of-two integer constant), ``same_type(?x, ?y)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from kir.errors import KirError, Loc, source_line_of
from kir.ir import Binary, Call, Cast, Const, Expr, Kernel, Node, Select, Unary, transform
from kir.ir.types import BOOL, ScalarType
from kir.rules.api import ANALYSES, Match, NoParams, NotApplicable, RuleContext

# ------------------------------------------------------------------------- pattern nodes


@dataclass(frozen=True)
class PVar:
    name: str


@dataclass(frozen=True)
class PNum:
    value: int | float


@dataclass(frozen=True)
class POp:
    """An operator or call: ``kind`` is 'binary', 'unary', 'call' or 'select'."""

    kind: str
    op: str
    args: tuple
    fast: bool = False


_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%", "lor": "||",
           "land": "&&"}
_UNARY = {"neg": "-", "lnot": "!", "bitnot": "~"}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = resources.files("kir.grammar").joinpath("rules.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True)


def _to_pattern(tree: Tree | Token):
    """Parse tree → pattern; iterative post-order (rule files can hold long expressions)."""
    stack: list[tuple[object, bool]] = [(tree, False)]
    out: list[object] = []
    while stack:
        node, done = stack.pop()
        if isinstance(node, Token):
            out.append(node)
            continue
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed([c for c in node.children if c is not None]))
            continue
        n = len([c for c in node.children if c is not None])
        kids = out[len(out) - n:] if n else []
        del out[len(out) - n:]
        out.append(_build(node.data, kids))
    return out[0]


def _build(kind: str, kids: list):
    if kind == "pvar":
        return PVar(str(kids[0])[1:])
    if kind == "number":
        text = str(kids[0])
        if text == "inf":
            return PNum(math.inf)
        return PNum(float(text) if any(c in text for c in ".eE") else int(text))
    if kind in _BINARY:
        return POp("binary", _BINARY[kind], (kids[0], kids[1]))
    if kind in ("compare", "bitop"):
        return POp("binary", str(kids[1]), (kids[0], kids[2]))
    if kind in _UNARY:
        inner = kids[0]
        if kind == "neg" and isinstance(inner, PNum):
            return PNum(-inner.value)
        return POp("unary", _UNARY[kind], (inner,))
    if kind in ("call", "fast_call"):
        return POp("call", str(kids[0]), tuple(kids[1:]), fast=kind == "fast_call")
    if kind == "select":
        return POp("select", "?", tuple(kids))
    raise AssertionError(f"unexpected rules parse node {kind}")


# ------------------------------------------------------------------------------ matching


def match(pattern, expr: Expr, bindings: dict[str, Expr] | None = None) -> dict[str, Expr] | None:
    """Bindings under which ``pattern`` equals ``expr``, or None."""
    bindings = dict(bindings or {})
    work = [(pattern, expr)]
    while work:
        p, e = work.pop()
        if isinstance(p, PVar):
            if p.name in bindings and bindings[p.name] != e:
                return None
            bindings[p.name] = e
        elif isinstance(p, PNum):
            if not (isinstance(e, Const) and isinstance(e.type, ScalarType)):
                return None
            if isinstance(p.value, float) != e.type.is_float or e.value != p.value:
                return None
        elif p.kind == "binary":
            if not (isinstance(e, Binary) and e.op == p.op):
                return None
            work += [(p.args[0], e.left), (p.args[1], e.right)]
        elif p.kind == "unary":
            if not (isinstance(e, Unary) and e.op == p.op):
                return None
            work.append((p.args[0], e.operand))
        elif p.kind == "call":
            if not (isinstance(e, Call) and e.fn == p.op and e.fast == p.fast
                    and len(e.args) == len(p.args)):
                return None
            work += list(zip(p.args, e.args))
        elif p.kind == "select":
            if not isinstance(e, Select):
                return None
            work += list(zip(p.args, (e.cond, e.if_true, e.if_false)))
    return bindings


def instantiate(pattern, bindings: Mapping[str, Expr], hint: ScalarType | None = None) -> Expr:
    """Build the replacement expression (recursion depth = replacement size, which is small)."""
    if isinstance(pattern, PVar):
        return bindings[pattern.name]
    if isinstance(pattern, PNum):
        t = hint if hint is not None else ScalarType("f32" if isinstance(pattern.value, float)
                                                     else "i32")
        value = float(pattern.value) if t.is_float else int(pattern.value)
        return Const(value, t)
    if pattern.kind == "binary":
        left_hint = _known_type(pattern.args[0], bindings) or _known_type(pattern.args[1],
                                                                          bindings) or hint
        left = instantiate(pattern.args[0], bindings, left_hint)
        right = instantiate(pattern.args[1], bindings, left.type)
        if right.type != left.type:
            right = Cast(right, left.type)
        result = BOOL if pattern.op in ("==", "!=", "<", "<=", ">", ">=", "&&", "||") \
            else left.type
        return Binary(pattern.op, left, right, result)
    if pattern.kind == "unary":
        operand = instantiate(pattern.args[0], bindings, hint)
        return Unary(pattern.op, operand, BOOL if pattern.op == "!" else operand.type)
    if pattern.kind == "call":
        first = _known_type(pattern.args[0], bindings) if pattern.args else None
        args = tuple(instantiate(a, bindings, first or hint) for a in pattern.args)
        return Call(pattern.op, args, args[0].type if args else hint, fast=pattern.fast)
    cond = instantiate(pattern.args[0], bindings, None)
    arm_hint = _known_type(pattern.args[1], bindings) or _known_type(pattern.args[2], bindings)
    a = instantiate(pattern.args[1], bindings, arm_hint or hint)
    b = instantiate(pattern.args[2], bindings, a.type)
    return Select(cond, a, b, a.type)


def _known_type(pattern, bindings: Mapping[str, Expr]):
    """The type a subpattern will have, when a bound variable decides it."""
    if isinstance(pattern, PVar):
        return bindings[pattern.name].type
    if isinstance(pattern, POp) and pattern.kind in ("binary", "call", "unary") \
            and pattern.op not in ("==", "!=", "<", "<=", ">", ">=", "&&", "||", "!"):
        for arg in pattern.args:
            found = _known_type(arg, bindings)
            if found is not None:
                return found
    return None


# -------------------------------------------------------------------------------- guards


def _is_pow2(e: Expr) -> bool:
    return isinstance(e, Const) and isinstance(e.value, int) and e.value > 0 \
        and (e.value & (e.value - 1)) == 0


GUARDS = {
    "float": lambda e: isinstance(e.type, ScalarType) and e.type.is_float,
    "int": lambda e: isinstance(e.type, ScalarType) and e.type.is_int,
    "const": lambda e: isinstance(e, Const),
    "nonzero": lambda e: isinstance(e, Const) and e.value != 0,
    "pow2": _is_pow2,
    "same_type": lambda a, b: a.type == b.type,
}


@dataclass(frozen=True)
class Guard:
    name: str
    args: tuple

    def holds(self, bindings: Mapping[str, Expr]) -> bool:
        values = [bindings[a.name] if isinstance(a, PVar) else instantiate(a, bindings)
                  for a in self.args]
        return bool(GUARDS[self.name](*values))


# --------------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class DeclarativeRule:
    """One ``pattern => replacement if guards`` rule (implements the Rule protocol)."""

    name: str
    doc: str
    pattern: object
    replacement: object
    guards: tuple[Guard, ...]
    origin: str
    site_key: str = "at"

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else f"{self.name} (declarative)"

    @property
    def text(self) -> str:
        """The rule's content as text (patterns and guards): what its behaviour depends on."""
        return f"{self.pattern!r} => {self.replacement!r} if {self.guards!r}"

    def _matches(self, expr: Node) -> dict[str, Expr] | None:
        if not isinstance(expr, Expr):
            return None
        bindings = match(self.pattern, expr)
        if bindings is None or not all(g.holds(bindings) for g in self.guards):
            return None
        return bindings

    @property
    def params(self) -> tuple:
        return ()

    def candidates(self, kernel: Kernel) -> list[str]:
        count = sum(1 for n in kernel.body.walk() if self._matches(n) is not None)
        return (["all"] + [str(i) for i in range(count)]) if count else []

    def match(self, kernel: Kernel, ctx: RuleContext | None = None) -> list[Match]:
        matches = self._all(kernel)
        if not matches:
            return []
        return [Match("all", matches)] + [Match(str(i), [n]) for i, n in enumerate(matches)]

    def match_at(self, kernel: Kernel, site: str,
                 ctx: RuleContext | None = None) -> Match | NotApplicable:
        ANALYSES[self.name] += 1
        matches = self._all(kernel)
        if not matches:
            return NotApplicable(f"no site at={site}: the pattern does not match")
        if site == "all":
            return Match(site, matches)
        if site.isdigit() and int(site) < len(matches):
            return Match(site, [matches[int(site)]])
        return NotApplicable(f"no site at={site}: the pattern matches {len(matches)} times")

    def sites(self, kernel: Kernel, ctx: RuleContext | None = None) -> list[str]:
        return [found.site for found in self.match(kernel)]

    def make_params(self, values: Mapping[str, object]) -> NoParams:
        return NoParams()

    def _all(self, kernel: Kernel) -> list[Node]:
        return [n for n in kernel.body.walk() if self._matches(n) is not None]

    def apply(self, kernel: Kernel, match: Match, params: object = None,
              ctx: RuleContext | None = None) -> Kernel | NotApplicable:
        """Rewrite the matched occurrences (the plan: the nodes ``match`` found)."""
        site = match.site
        targets = {id(n) for n in match.plan}

        def visit(n: Node) -> Node | None:
            # Identity of the original node is lost once children are rebuilt, so rewrite
            # whatever still matches among the targeted nodes and their rebuilt forms.
            if id(n) in targets or (site == "all" and self._matches(n) is not None):
                bindings = self._matches(n)
                if bindings is not None:
                    return instantiate(self.replacement, bindings, n.type)
            return None

        body = transform(kernel.body, visit)
        if body == kernel.body:
            return NotApplicable("replacement leaves the kernel unchanged")
        from dataclasses import replace

        return replace(kernel, body=body)

    def rewrite(self, kernel: Kernel, site: str, params: Mapping[str, object] | None = None,
                ctx: RuleContext | None = None) -> Kernel | NotApplicable:
        """One application from Python: match at ``site``, then apply."""
        found = self.match_at(kernel, site)
        return found if isinstance(found, NotApplicable) else self.apply(kernel, found)


def parse_rules(text: str, filename: str = "<rules>") -> list[DeclarativeRule]:
    """Parse a ``.rules`` file; syntax errors and unknown guards are KirErrors with loc."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        loc = Loc(filename, exc.line, exc.column)
        raise KirError("malformed rule", loc, source_line=source_line_of(text, exc.line),
                       hint="write: rule NAME \"doc\": PATTERN => REPLACEMENT [if GUARD(?x)]") \
            from None
    rules = []
    for node in tree.children:
        kids = [c for c in node.children if c is not None]
        name = str(kids[0])
        pos = 1
        doc = ""
        if isinstance(kids[pos], Token) and kids[pos].type == "STRING":
            doc = str(kids[pos])[1:-1]
            pos += 1
        pattern = _to_pattern(kids[pos])
        replacement = _to_pattern(kids[pos + 1])
        guards: list[Guard] = []
        if len(kids) > pos + 2:
            for pred in kids[pos + 2].children:
                gname = str(pred.children[0])
                if gname not in GUARDS:
                    loc = Loc(filename, pred.meta.line, pred.meta.column)
                    raise KirError(f"unknown guard {gname!r}", loc,
                                   source_line=source_line_of(text, pred.meta.line),
                                   hint=f"guards: {', '.join(GUARDS)}")
                guards.append(Guard(gname, tuple(_to_pattern(a) for a in pred.children[1:])))
        unbound = _pvars(replacement) - _pvars(pattern)
        if unbound:
            loc = Loc(filename, node.meta.line, node.meta.column)
            raise KirError(f"rule {name}: replacement uses ?{sorted(unbound)[0]} which the "
                           "pattern does not bind", loc,
                           source_line=source_line_of(text, node.meta.line))
        if isinstance(pattern, PVar):
            loc = Loc(filename, node.meta.line, node.meta.column)
            raise KirError(f"rule {name}: a bare ?variable pattern matches everything", loc,
                           source_line=source_line_of(text, node.meta.line))
        rules.append(DeclarativeRule(name, doc, pattern, replacement, tuple(guards), filename))
    return rules


def _pvars(pattern) -> set[str]:
    if isinstance(pattern, PVar):
        return {pattern.name}
    if isinstance(pattern, POp):
        return set().union(*(_pvars(a) for a in pattern.args)) if pattern.args else set()
    return set()
