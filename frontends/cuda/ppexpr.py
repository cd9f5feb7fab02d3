"""Integer constant expressions of ``#if`` / ``#elif`` (and ``#pragma unroll N``).

Evaluated by a small precedence-climbing parser over preprocessing tokens, never by
``eval``. Arithmetic is C's on 64-bit signed integers: division truncates toward zero, and
the right operand of ``&&``, ``||`` and the untaken arm of ``?:`` are parsed but not
evaluated (so ``0 && 1 / 0`` is fine). Recursion is bounded by ``_MAX_FRAMES``.
"""

from __future__ import annotations

import re
from typing import Callable, NoReturn

from kir.frontends.cuda.macros import CHR, ID, NL, NUM, PUNCT, WS, Tok

_BINARY = {
    "*": 10, "/": 10, "%": 10, "+": 9, "-": 9, "<<": 8, ">>": 8,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "==": 6, "!=": 6,
    "&": 5, "^": 4, "|": 3, "&&": 2, "||": 1,
}
_INT_RE = re.compile(
    r"(?:(0[xX][0-9a-fA-F]+)|(0[bB][01]+)|(0[0-7]*)|([1-9][0-9]*))"
    r"(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?"
)
_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "a": 7, "b": 8, "f": 12, "v": 11,
            "\\": 92, "'": 39, '"': 34, "?": 63}
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
_MAX_FRAMES = 300

Fail = Callable[[str, int], NoReturn]


class _Unsigned(int):
    """A value of type unsigned long long (C's usual conversions make the other operand one)."""


def _wrap(value: int) -> int:
    return ((value + (1 << 63)) % (1 << 64)) - (1 << 63)


def _make(value: int, unsigned: bool) -> int:
    return _Unsigned(value % (1 << 64)) if unsigned else _wrap(value)


def evaluate(tokens: list[Tok], fail: Fail, origin: int, *, strict: bool = False) -> int:
    """The value of the macro-expanded ``tokens``. Identifiers left after expansion are 0
    (``true`` is 1) as in C++, unless ``strict``, where they are an error. ``fail(message,
    origin)`` raises; ``origin`` locates errors that have no token of their own."""
    parser = _Parser([t for t in tokens if t.kind not in (WS, NL)], fail, origin, strict)
    if not parser.tokens:
        fail("missing expression", origin)
    value = parser.conditional(True)
    if parser.pos < len(parser.tokens):
        tok = parser.tokens[parser.pos]
        fail(f"unexpected '{tok.text}' in preprocessor expression", tok.origin)
    return value


class _Parser:
    def __init__(self, tokens: list[Tok], fail: Fail, origin: int, strict: bool) -> None:
        self.tokens = tokens
        self.fail = fail
        self.origin = origin
        self.strict = strict
        self.pos = 0
        self.frames = 0

    def _peek(self) -> Tok | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _at(self, text: str) -> bool:
        tok = self._peek()
        return tok is not None and tok.kind == PUNCT and tok.text == text

    def _expect(self, text: str) -> None:
        if not self._at(text):
            tok = self._peek()
            where = tok.origin if tok else self.origin
            found = f"'{tok.text}'" if tok else "end of line"
            self.fail(f"expected '{text}' in preprocessor expression, found {found}", where)
        self.pos += 1

    def _enter(self) -> None:
        self.frames += 1
        if self.frames > _MAX_FRAMES:
            self.fail("preprocessor expression too deeply nested", self.origin)

    def conditional(self, live: bool) -> int:
        self._enter()
        cond = self.binary(1, live)
        if self._at("?"):
            self.pos += 1
            then = self.conditional(live and cond != 0)
            self._expect(":")
            other = self.conditional(live and cond == 0)
            unsigned = isinstance(then, _Unsigned) or isinstance(other, _Unsigned)
            cond = _make(then if cond else other, unsigned)
        self.frames -= 1
        return cond

    def binary(self, min_prec: int, live: bool) -> int:
        self._enter()
        left = self.unary(live)
        while True:
            tok = self._peek()
            prec = _BINARY.get(tok.text) if tok is not None and tok.kind == PUNCT else None
            if prec is None or prec < min_prec:
                break
            self.pos += 1
            if tok.text == "&&":  # type: ignore[union-attr]
                right = self.binary(prec + 1, live and left != 0)
                left = int(left != 0 and right != 0)
            elif tok.text == "||":  # type: ignore[union-attr]
                right = self.binary(prec + 1, live and left == 0)
                left = int(left != 0 or right != 0)
            else:
                right = self.binary(prec + 1, live)
                left = self._apply(tok, left, right, live)  # type: ignore[arg-type]
        self.frames -= 1
        return left

    def unary(self, live: bool) -> int:
        self._enter()
        tok = self._peek()
        if tok is None:
            self.fail("expression ends too early", self.origin)
        self.pos += 1
        if tok.kind == PUNCT and tok.text in ("+", "-", "!", "~"):
            value = self.unary(live)
            unsigned = isinstance(value, _Unsigned)
            value = {"+": value, "-": _make(-value, unsigned), "!": int(value == 0),
                     "~": _make(~value, unsigned)}[tok.text]
        elif tok.kind == PUNCT and tok.text == "(":
            value = self.conditional(live)
            self._expect(")")
        elif tok.kind == NUM:
            value = self._number(tok)
        elif tok.kind == CHR:
            value = self._char(tok)
        elif tok.kind == ID and not self.strict:
            value = 1 if tok.text == "true" else 0
        else:
            self.fail(f"'{tok.text}' is not allowed in a preprocessor expression", tok.origin)
        self.frames -= 1
        return value

    def _number(self, tok: Tok) -> int:
        match = _INT_RE.fullmatch(tok.text)
        if match is None:
            self.fail(f"'{tok.text}' is not an integer constant", tok.origin)
        hexa, binary, octal, decimal = match.groups()
        if hexa:
            value = int(hexa, 16)
        elif binary:
            value = int(binary[2:], 2)
        elif octal:
            value = int(octal, 8)
        else:
            value = int(decimal)
        if value >= 1 << 64:
            self.fail(f"integer constant {tok.text} is too large", tok.origin)
        return _make(value, "u" in tok.text.lower() or value >= 1 << 63)

    def _char(self, tok: Tok) -> int:
        body = tok.text[1:-1]
        if len(body) == 1 and body != "\\":
            return ord(body)
        if body.startswith("\\x") and len(body) > 2:
            return int(body[2:], 16)
        if body.startswith("\\") and body[1:].isdigit():
            return int(body[1:], 8)
        if len(body) == 2 and body[0] == "\\" and body[1] in _ESCAPES:
            return _ESCAPES[body[1]]
        self.fail(f"unsupported character constant {tok.text} in preprocessor expression",
                  tok.origin)

    def _apply(self, op: Tok, a: int, b: int, live: bool) -> int:
        text = op.text
        if text in ("<<", ">>"):
            if not 0 <= b < 64:
                if live:
                    self.fail(f"shift count {b} out of range in preprocessor expression",
                              op.origin)
                return 0
            return _make(a << b if text == "<<" else a >> b, isinstance(a, _Unsigned))
        unsigned = isinstance(a, _Unsigned) or isinstance(b, _Unsigned)
        if unsigned:
            a, b = a % (1 << 64), b % (1 << 64)
        if text in ("/", "%"):
            if b == 0:
                if live:
                    self.fail("division by zero in preprocessor expression", op.origin)
                return 0
            quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            return _make(quotient if text == "/" else a - b * quotient, unsigned)
        result = {
            "*": lambda: a * b, "+": lambda: a + b, "-": lambda: a - b,
            "<": lambda: int(a < b), "<=": lambda: int(a <= b), ">": lambda: int(a > b),
            ">=": lambda: int(a >= b), "==": lambda: int(a == b), "!=": lambda: int(a != b),
            "&": lambda: a & b, "^": lambda: a ^ b, "|": lambda: a | b,
        }[text]()
        return int(result) if text in _COMPARISONS else _make(result, unsigned)

