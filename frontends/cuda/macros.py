"""Preprocessing tokens, ``#define`` parsing and macro expansion for the CUDA preprocessor.

Expansion follows C's rules with Prosser's hide sets: every token carries the set of macro
names that produced it, and a macro is not expanded again inside its own expansion (so a
self-referential ``#define x (x + 1)`` expands once). Rescanning uses an explicit work list;
the only recursion is the pre-expansion of macro arguments, bounded by ``MAX_DEPTH``.

Tokens remember where they came from (``origin``, an offset in the comment-free text the
preprocessor works on). Tokens copied from the user's text keep their own offset
(``exact``); tokens a macro body produced carry the offset of the macro use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, NoReturn

from kir.errors import KirError, UnsupportedError

NL, WS, ID, NUM, STR, CHR, PUNCT, RAW, MARK = range(9)

# A RAW token is a run of user text that holds no macro name (copied without lexing); MARK is
# C's placemarker, the stand-in for an empty argument next to ``##``.

MAX_DEPTH = 100  # nested macro invocations inside macro arguments
# Tokens macro bodies may produce per file: a macro blow-up stops in seconds.
MAX_EXPANDED_TOKENS = 500_000
SPECIAL_NAMES = frozenset({"_Pragma", "__LINE__", "__FILE__"})
EMPTY: frozenset[str] = frozenset()

_TOKEN_RE = re.compile(
    r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+)
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<num>\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.])*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<chr>'(?:[^'\\\n]|\\.)*')
  | (?P<punct>\#\#|->\*?|\+\+|--|<<=|>>=|<<|>>|\.\.\.|::|&&|\|\||[-+*/%&|^!=<>]=|.)
    """,
    re.X | re.S,
)
_KINDS = {"nl": NL, "ws": WS, "id": ID, "num": NUM, "str": STR, "chr": CHR, "punct": PUNCT}

Fail = Callable[[str, int, type], NoReturn]


class Tok:
    """One preprocessing token: kind, spelling, origin offset, whether its characters map
    one-to-one onto the source (``exact``), and its hide set."""

    __slots__ = ("kind", "text", "origin", "exact", "hide")

    def __init__(self, kind: int, text: str, origin: int, exact: bool,
                 hide: frozenset[str] = EMPTY) -> None:
        self.kind = kind
        self.text = text
        self.origin = origin
        self.exact = exact
        self.hide = hide

    def __repr__(self) -> str:
        return f"Tok({self.kind}, {self.text!r}, {self.origin})"


def lex(text: str, start: int, end: int, exact: bool) -> list[Tok]:
    """Tokens of ``text[start:end]``; origins are offsets into ``text``."""
    kinds = _KINDS
    return [Tok(kinds[m.lastgroup], m.group(), m.start(), exact)  # type: ignore[index]
            for m in _TOKEN_RE.finditer(text, start, end)]


def is_punct(tok: Tok, text: str) -> bool:
    """Whether ``tok`` is the punctuator ``text``."""
    return tok.kind == PUNCT and tok.text == text


def skip_ws(tokens: list[Tok], i: int) -> int:
    """Index of the first token at or after ``i`` that is not white space."""
    while i < len(tokens) and tokens[i].kind in (WS, NL):
        i += 1
    return i


@dataclass(slots=True)
class Macro:
    """A ``#define``: ``params`` is None for an object-like macro; ``param_at[i]`` is the
    parameter index body token ``i`` names, or -1."""

    name: str
    params: tuple[str, ...] | None
    body: list[Tok]
    param_at: list[int]
    variadic: bool = False
    simple: bool = False  # no parameters used, no '#' or '##': the body is copied as is


def parse_define(tokens: list[Tok], fail: Callable[[str, Tok | None], NoReturn]) -> Macro:
    """Parse the tokens after ``#define``; ``fail(message, token)`` raises."""
    n = len(tokens)
    i = skip_ws(tokens, 0)
    if i >= n:
        fail("macro name missing after #define", None)
    if tokens[i].kind != ID:
        fail("macro name must be an identifier", tokens[i])
    name = tokens[i].text
    if name == "defined":
        fail("'defined' cannot be used as a macro name", tokens[i])
    i += 1
    params: list[str] | None = None
    variadic = False
    if i < n and is_punct(tokens[i], "("):  # function-like only when '(' touches the name
        params = []
        i += 1
        while True:
            i = skip_ws(tokens, i)
            if i >= n:
                fail("missing ')' in macro parameter list", tokens[-1])
            tok = tokens[i]
            if is_punct(tok, ")") and not params:
                i += 1
                break
            if tok.kind == ID and not variadic:
                if tok.text in params:
                    fail(f"duplicate macro parameter '{tok.text}'", tok)
                params.append(tok.text)
            elif is_punct(tok, "...") and not variadic:
                params.append("__VA_ARGS__")
                variadic = True
            else:
                fail("expected a macro parameter name", tok)
            i = skip_ws(tokens, i + 1)
            if i >= n:
                fail("missing ')' in macro parameter list", tokens[-1])
            if is_punct(tokens[i], ")"):
                i += 1
                break
            if not is_punct(tokens[i], ",") or variadic:
                fail("expected ',' or ')' in macro parameter list", tokens[i])
            i += 1
    body: list[Tok] = []
    for tok in tokens[i:]:
        if tok.kind in (WS, NL):
            if body and body[-1].kind != WS:
                body.append(Tok(WS, " ", tok.origin, False))
        else:
            body.append(tok)
    if body and body[-1].kind == WS:
        body.pop()
    index = {p: k for k, p in enumerate(params or ())}
    param_at = [index.get(t.text, -1) if t.kind == ID else -1 for t in body]
    for edge in (body[:1] + body[-1:]):
        if is_punct(edge, "##"):
            fail("'##' cannot appear at either end of a macro body", edge)
    if params is not None:
        for k, tok in enumerate(body):
            if is_punct(tok, "#"):
                j = skip_ws(body, k + 1)
                if j >= len(body) or param_at[j] < 0:
                    fail("'#' is not followed by a macro parameter", tok)
    simple = all(k < 0 for k in param_at) and not any(
        is_punct(t, "##") or (params is not None and is_punct(t, "#")) for t in body)
    return Macro(name, None if params is None else tuple(params), body, param_at, variadic,
                 simple)


def _stringize(arg: list[Tok], origin: int, hide: frozenset[str]) -> Tok:
    parts: list[str] = []
    for tok in arg:
        if tok.kind in (WS, NL):
            if parts and parts[-1] != " ":
                parts.append(" ")
        elif tok.kind in (STR, CHR):
            parts.append(tok.text.replace("\\", "\\\\").replace('"', '\\"'))
        else:
            parts.append(tok.text)
    return Tok(STR, '"' + "".join(parts).strip() + '"', origin, False, hide)


class Expander:
    """Expands macros in token lists. ``text`` is the comment-free source RAW tokens point
    into; ``fail(message, origin, error_class)`` raises with a location; ``line_of(origin)``
    gives the user's line for ``__LINE__``."""

    def __init__(self, text: str, macros: dict[str, Macro], fail: Fail,
                 line_of: Callable[[int], int], filename: str) -> None:
        self.text = text
        self.macros = macros
        self.fail = fail
        self.line_of = line_of
        self.filename = filename
        self.budget = MAX_EXPANDED_TOKENS  # read at each run, so tests can lower it

    def expand(self, tokens: list[Tok], depth: int = 0) -> list[Tok]:
        """``tokens`` with every macro invocation replaced by its expansion, rescanned."""
        out: list[Tok] = []
        pending = tokens[::-1]  # a stack: the next token is pending[-1]
        macros = self.macros
        while pending:
            tok = pending.pop()
            if tok.kind != ID:
                out.append(tok)
                continue
            name = tok.text
            macro = macros.get(name)
            if macro is None or name in tok.hide:
                if macro is None and name in SPECIAL_NAMES:
                    out.append(self._special(tok))
                else:
                    out.append(tok)
                continue
            if macro.params is None:
                pending.extend(reversed(self._subst(macro, [], tok.hide | {name}, tok, depth)))
                continue
            skipped: list[Tok] = []
            while pending and pending[-1].kind in (WS, NL, RAW):
                ws = pending.pop()
                if ws.kind == RAW:
                    pending.extend(reversed(self._split(ws)))
                else:
                    skipped.append(ws)
            if not pending or not is_punct(pending[-1], "("):
                out.append(tok)  # a function-like macro name without '(' is just a name
                pending.extend(reversed(skipped))
                continue
            args, rparen = self._collect_args(pending, tok, macro)
            hide = (tok.hide & rparen.hide) | {name}
            pending.extend(reversed(self._subst(macro, args, hide, tok, depth)))
        return out

    def _special(self, tok: Tok) -> Tok:
        if tok.text == "_Pragma":
            self.fail("_Pragma(...) is not supported; use #pragma", tok.origin, UnsupportedError)
        if tok.text == "__LINE__":
            return Tok(NUM, str(self.line_of(tok.origin)), tok.origin, False, tok.hide)
        quoted = self.filename.replace("\\", "\\\\").replace('"', '\\"')
        return Tok(STR, f'"{quoted}"', tok.origin, False, tok.hide)

    def _split(self, raw: Tok) -> list[Tok]:
        return lex(self.text, raw.origin, raw.origin + len(raw.text), True)

    def _collect_args(self, pending: list[Tok], use: Tok,
                      macro: Macro) -> tuple[list[list[Tok]], Tok]:
        pending.pop()  # the '('
        params = macro.params or ()
        args: list[list[Tok]] = [[]]
        nesting = 0
        while True:
            if not pending:
                self.fail(f"unterminated argument list invoking macro '{macro.name}'",
                          use.origin, KirError)
            tok = pending.pop()
            if tok.kind == RAW:
                pending.extend(reversed(self._split(tok)))
                continue
            if tok.kind == NL:  # a newline inside arguments is plain white space
                tok = Tok(WS, " ", tok.origin, False, tok.hide)
            elif tok.kind == PUNCT:
                if tok.text == "(":
                    nesting += 1
                elif tok.text == ")":
                    if nesting == 0:
                        rparen = tok
                        break
                    nesting -= 1
                elif tok.text == "," and nesting == 0 and not (
                        macro.variadic and len(args) >= len(params)):
                    args.append([])
                    continue
            args[-1].append(tok)
        for k, arg in enumerate(args):
            lo, hi = 0, len(arg)
            while lo < hi and arg[lo].kind == WS:
                lo += 1
            while hi > lo and arg[hi - 1].kind == WS:
                hi -= 1
            args[k] = arg[lo:hi]
        if len(params) == 0 and len(args) == 1 and not args[0]:
            args = []
        if macro.variadic and len(args) == len(params) - 1:
            args.append([])
        if len(args) != len(params):
            self.fail(f"macro '{macro.name}' takes {len(params)} argument"
                      f"{'' if len(params) == 1 else 's'}, but {len(args)} were given",
                      use.origin, KirError)
        return args, rparen

    def _subst(self, macro: Macro, args: list[list[Tok]], hide: frozenset[str], use: Tok,
               depth: int) -> list[Tok]:
        """The body of ``macro`` with arguments substituted and ``##`` applied."""
        if depth > MAX_DEPTH:
            self.fail(f"macro expansion too deep (more than {MAX_DEPTH} nested macro "
                      "invocations in arguments)", use.origin, KirError)
        origin = use.origin
        body, param_at = macro.body, macro.param_at
        if macro.simple:
            self.budget -= len(body)
            if self.budget < 0:
                self._too_many(origin)
            return [Tok(t.kind, t.text, origin, False, hide) for t in body]
        result: list[Tok] = []
        expanded: dict[int, list[Tok]] = {}
        paste = False
        i, n = 0, len(body)
        while i < n:
            tok = body[i]
            k = param_at[i]
            if tok.kind == PUNCT and tok.text == "##":
                while result and result[-1].kind == WS:
                    result.pop()
                paste = True
                i = skip_ws(body, i + 1)
                continue
            if macro.params is not None and tok.kind == PUNCT and tok.text == "#":
                i = skip_ws(body, i + 1)
                piece = [_stringize(args[param_at[i]], origin, hide)]
            elif k >= 0:
                j = skip_ws(body, i + 1)
                if paste or (j < n and is_punct(body[j], "##")):
                    source = args[k] or [Tok(MARK, "", origin, False)]
                else:
                    if k not in expanded:
                        expanded[k] = self.expand(args[k], depth + 1)
                    source = expanded[k]
                piece = [Tok(t.kind, t.text, t.origin, t.exact, (t.hide | hide) if t.hide
                             else hide) for t in source]
            else:
                piece = [Tok(tok.kind, tok.text, origin, False, hide)]
            if paste and piece:
                piece[0] = self._paste(result.pop(), piece[0], origin, hide)
                paste = False
            result.extend(piece)
            i += 1
        self.budget -= len(result)
        if self.budget < 0:
            self._too_many(origin)
        return [t for t in result if t.kind != MARK]

    def _too_many(self, origin: int) -> NoReturn:
        self.fail(f"macro expansion produces too many tokens (more than {MAX_EXPANDED_TOKENS})",
                  origin, KirError)

    def _paste(self, left: Tok, right: Tok, origin: int, hide: frozenset[str]) -> Tok:
        if left.kind == MARK:
            return right
        if right.kind == MARK:
            return left
        text = left.text + right.text
        tokens = lex(text, 0, len(text), False)
        if len(tokens) != 1 or tokens[0].kind in (WS, NL):
            self.fail(f"pasting '{left.text}' and '{right.text}' does not give a valid token",
                      origin, KirError)
        return Tok(tokens[0].kind, text, origin, False, hide)
