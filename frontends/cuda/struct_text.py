"""The text of a struct with member functions, read before any of it is parsed.

kir's grammar parses a struct's data members only. A struct with member functions
(``__device__ void add(float x) { ... }``, ``T& operator[](int i) { ... }``, constructors)
is read in two parts from its text: :func:`member_functions` finds each member function's
span, and the data members are parsed from a :class:`PatchedSource` where those spans are
blanked (offsets, and so every location, stay the file's own). A member function is parsed
on first call as a ``__device__`` function from its own span, an operator's name read as a
plain identifier of no greater length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kir.frontends.cuda.scan import closing_bracket

#: C names for operators: what an operator function is read as and its inlined locals are
#: named after (each no longer than ``operator`` and its symbol, which it replaces).
OPERATOR_WORDS = {
    "+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "==": "eq", "!=": "ne",
    "<": "lt", ">": "gt", "<=": "le", ">=": "ge", "&": "band", "|": "bor", "^": "bxor",
    "<<": "shl", ">>": "shr", "!": "not", "~": "bnot", "&&": "and", "||": "or",
    "+=": "add_assign", "-=": "sub_assign", "*=": "mul_assign", "/=": "div_assign",
    "%=": "mod_assign", "&=": "and_assign", "|=": "or_assign", "^=": "xor_assign",
    "<<=": "shl_assign", ">>=": "shr_assign", "[]": "index", "()": "call",
}


def operator_word(symbol: str) -> str:
    """The C name for an operator's symbol (``+=`` -> ``add_assign``)."""
    return OPERATOR_WORDS.get(symbol.replace(" ", ""), "op")
_OPERATOR = re.compile(r"\boperator\s*(\(\s*\)|\[\s*\]|[^\w\s(]+|\s+[A-Za-z_][\w\s:*&]*?)"
                       r"\s*\(")
_ACCESS = re.compile(r"\s*\b(?:public|private|protected)\s*:")
_SPACE = re.compile(r"\s*(?://[^\n]*|/\*.*?\*/)?\s*", re.S)


@dataclass(frozen=True)
class MemberFunction:
    """A member function's span in the file (``start`` to just past its body), its name as
    written (``add``, ``operator[]``, the struct's own name for a constructor) and where
    that name sits, whether it is ``static``, and whether it has a body."""

    name: str
    start: int
    end: int
    name_start: int
    name_end: int
    static: bool
    has_body: bool
    # a constructor's member initializer list (``: m(a), s{0}``), the span after its colon
    init_list: tuple[int, int] | None = None

    @property
    def operator(self) -> str | None:
        """The operator's symbol (``[]``, ``()``, ``+=``), or None for a named function."""
        if not self.name.startswith("operator"):
            return None
        return re.sub(r"\s+", "", self.name[len("operator"):]) or None


def struct_body(text: str) -> tuple[int, int] | None:
    """Offsets (in ``text``) just inside the braces of a struct definition's body."""
    at = re.search(r"\b(?:struct|class)\b", text)
    open_at = text.find("{", at.end() if at else 0)
    close_at = closing_bracket(text, open_at) if open_at >= 0 else -1
    return (open_at + 1, close_at) if close_at >= 0 else None


def member_functions(text: str, base: int = 0) -> list[MemberFunction]:
    """The member functions declared in a struct definition's ``text`` (which sits at offset
    ``base`` of its file), in order; data members, nested types and ``static`` constants are
    not listed."""
    body = struct_body(text)
    if body is None:
        return []
    found: list[MemberFunction] = []
    at, end = body
    while at < end:
        at = _SPACE.match(text, at).end()
        access = _ACCESS.match(text, at)
        if access:
            at = access.end()
            continue
        if at >= end:
            break
        stop = _top_level_stop(text, at, end)
        while text[stop:stop + 1] == "{" and _initializer_brace(text[at:stop]):
            close = closing_bracket(text, stop)  # `s{0}` in a constructor's initializer list
            stop = _top_level_stop(text, close + 1, end) if close >= 0 else end
        head = text[at:stop]
        paren = _top_level(head, "(")
        equals = _top_level(head, "=")
        # a function: its parameter list before any '=' (of an initializer or '= default'),
        # or an operator (whose name may hold '=')
        is_function = _OPERATOR.search(head) is not None or paren >= 0 and (
            equals < 0 or paren < equals)
        if text[stop:stop + 1] == "{":
            close = closing_bracket(text, stop)
            if close < 0:
                break
            if is_function:
                found.append(_member(text, base, at, close + 1, head, True))
                at = close + 1
                continue
            stop = text.find(";", close)  # a brace-initialized member or a nested type
            if stop < 0:
                break
        elif is_function:
            found.append(_member(text, base, at, stop + 1, head, False))
        at = stop + 1
    return found


def _member(text: str, base: int, start: int, end: int, head: str,
            has_body: bool) -> MemberFunction:
    operator = _OPERATOR.search(head)
    if operator:
        name_start, name_end = operator.start(), operator.end() - 1
        name = head[name_start:name_end].strip()
    else:
        paren = _top_level(head, "(")
        word = re.search(r"(~?[A-Za-z_]\w*)\s*$", head[:paren])
        name_start, name_end = (word.start(1), word.end(1)) if word else (paren, paren)
        name = word.group(1) if word else ""
    static = re.search(r"\bstatic\b", head[:name_start]) is not None
    init_list = None
    paren = head.find("(", name_end)
    close = closing_bracket(head, paren) if paren >= 0 else -1
    after = head[close + 1:] if close >= 0 else ""
    colon = re.match(r"\s*:(?!:)", after)
    if colon:
        init_list = (base + start + close + 1 + colon.end(), base + start + len(head))
    return MemberFunction(name, base + start, base + end, base + start + name_start,
                          base + start + name_end, static, has_body, init_list)


def initializer_items(text: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """The items of a member initializer list ``text[start:end]`` (``m(a), s{0}``): each
    member's name and the span of what its parentheses or braces hold."""
    items = []
    at = start
    while at < end:
        found = re.compile(r"\s*([A-Za-z_]\w*)\s*([({])").match(text, at)
        if not found or found.end() > end:
            break
        close = closing_bracket(text, found.end() - 1)
        if close < 0 or close > end:
            break
        items.append((found.group(1), found.end(), close))
        comma = re.compile(r"\s*,?").match(text, close + 1)
        at = comma.end()
    return items


def _initializer_brace(head: str) -> bool:
    """Whether a ``{`` after ``head`` opens a member's initializer (``: m(a), s{``) rather
    than a function body."""
    word = re.search(r"([A-Za-z_]\w*)\s*$", head)
    return bool(re.search(r"\)\s*:(?!:)", head)) and word is not None \
        and word.group(1) not in ("const", "noexcept", "override", "final")


def _top_level_stop(text: str, at: int, end: int) -> int:
    """The first ``;`` or ``{`` at parenthesis depth 0 from ``at`` (``end`` when none)."""
    depth = 0
    for k in range(at, end):
        ch = text[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch in ";{":
            return k
    return end


def _top_level(head: str, char: str) -> int:
    """Where ``char`` first occurs in ``head`` outside parentheses (a ``(`` counts at its
    own opening), or -1."""
    depth = 0
    for k, ch in enumerate(head):
        if ch == char and depth == 0:
            return k
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
    return -1


class PatchedSource:
    """A file's text with some spans replaced by text of the same length (member functions
    blanked, an operator's name read as an identifier); locations are the file's own."""

    def __init__(self, src, replacements: list[tuple[int, int, str]]) -> None:
        self._src = src
        text = src.text
        for start, end, new in sorted(replacements, reverse=True):
            if len(new) > end - start:
                raise ValueError("a replacement must not be longer than what it replaces")
            text = text[:start] + new.ljust(end - start) + text[end:]
        self.text = text

    def loc(self, offset: int):
        return self._src.loc(offset)

    def source_line(self, loc):
        return self._src.source_line(loc)


def blank(text: str, start: int, end: int) -> str:
    """Spaces for ``text[start:end]``, its line breaks kept."""
    return re.sub(r"[^\n]", " ", text[start:end])


__all__ = ["MemberFunction", "initializer_items", "OPERATOR_WORDS", "PatchedSource", "blank",
           "member_functions", "operator_word", "struct_body"]
