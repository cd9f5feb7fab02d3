"""C expressions from host code, parsed to a small tree that can be evaluated and written in
the spec's size-expression language.

Host code around a launch computes sizes, grids and scalar arguments with ordinary C
(``(n + 255) / 256``, ``ceil((float)N / Bc)``, ``1.0f / sqrtf(d)``, ``N * sizeof(float)``).
:func:`parse_expr` reads one such expression (a Pratt parser over C's precedence levels);
:class:`Translator` turns a tree into spec text (integer division becomes ``//``, ``sqrtf``
``sqrt``, casts and ``sizeof`` are resolved) with the names of host variables kept or
replaced by their own definitions, and evaluates it to a number. What it cannot translate it
says, so the spec drafter can mark a guess.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

_TOKEN = re.compile(r"""
    (?P<num>(?:0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)[uUlLfF]*)
  | (?P<name>[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)
  | (?P<op><<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||->|\+\+|--|[-+*/%<>!~&|^?:()\[\],.{}])
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
""", re.VERBOSE)

# Binary operators by precedence (higher binds tighter), C's table.
_BINARY = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7,
           "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}
TYPE_WORDS = {"int", "unsigned", "signed", "long", "short", "char", "float", "double", "bool",
              "size_t", "int64_t", "uint64_t", "int32_t", "uint32_t", "half", "__half",
              "__nv_bfloat16", "float2", "float4", "int2", "int4", "uint", "const", "void",
              "auto", "ptrdiff_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "float3"}
SIZEOF = {"float": 4, "double": 8, "half": 2, "__half": 2, "__nv_bfloat16": 2, "int": 4,
          "unsigned": 4, "uint": 4, "long": 8, "size_t": 8, "int64_t": 8, "uint64_t": 8,
          "int32_t": 4, "uint32_t": 4, "short": 2, "char": 1, "bool": 1, "float2": 8,
          "float4": 16, "int2": 8, "int4": 16, "float3": 12, "int8_t": 1, "uint8_t": 1,
          "int16_t": 2, "uint16_t": 2}
FLOAT_TYPES = {"float", "double", "half", "__half", "__nv_bfloat16"}
_MATH = {  # C function -> (spec function or None, Python function, returns float)
    "ceil": ("ceil", math.ceil, True), "ceilf": ("ceil", math.ceil, True),
    "floor": ("floor", math.floor, True), "floorf": ("floor", math.floor, True),
    "sqrt": ("sqrt", math.sqrt, True), "sqrtf": ("sqrt", math.sqrt, True),
    "log2": ("log2", math.log2, True), "log2f": ("log2", math.log2, True),
    "abs": ("abs", abs, False), "fabs": ("abs", abs, True), "fabsf": ("abs", abs, True),
    "min": ("min", min, False), "max": ("max", max, False), "std::min": ("min", min, False),
    "std::max": ("max", max, False), "fminf": ("min", min, True),
    "fmaxf": ("max", max, True), "fmin": ("min", min, True), "fmax": ("max", max, True),
    "exp": (None, math.exp, True), "expf": (None, math.exp, True),
    "log": (None, math.log, True), "logf": (None, math.log, True),
    "rsqrtf": (None, lambda v: 1 / math.sqrt(v), True),
}
CONSTANTS = {"INFINITY": math.inf, "FLT_MAX": 3.4028234663852886e38, "M_PI": math.pi,
             "true": 1, "false": 0, "nullptr": 0, "NULL": 0}


class HostExprError(Exception):
    """An expression outside what the drafter reads (the message says what)."""


@dataclass(frozen=True)
class Node:
    """``kind``: num, name, call, bin, un, cast, cond, member, index, sizeof, addr, deref,
    braces; ``parts`` its children or values; ``is_float`` for literals."""

    kind: str
    parts: tuple
    is_float: bool = False


def tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        match = _TOKEN.match(text, pos)
        if not match:
            raise HostExprError(f"unexpected {text[pos]!r} in {text!r}")
        out.append(re.sub(r"\s+", "", match.group()) if match.lastgroup == "name"
                   else match.group())
        pos = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokens(text)
        self.i = 0

    def peek(self, ahead: int = 0) -> str | None:
        j = self.i + ahead
        return self.toks[j] if j < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise HostExprError(f"expected {want or 'more'} in {self.text!r}")
        self.i += 1
        return tok

    def expr(self, level: int = 0) -> Node:
        left = self.unary()
        while True:
            op = self.peek()
            if op == "?" and level <= 0:
                self.take()
                yes = self.expr()
                self.take(":")
                left = Node("cond", (left, yes, self.expr()))
                continue
            prec = _BINARY.get(op or "")
            if prec is None or prec <= level:
                return left
            self.take()
            left = Node("bin", (op, left, self.expr(prec)))

    def _is_cast(self) -> bool:
        j = self.i + 1
        words = []
        while j < len(self.toks) and self.toks[j] not in (")",):
            words.append(self.toks[j])
            j += 1
        if not words or j >= len(self.toks):
            return False
        names = [w for w in words if w not in ("*", "&")]
        return bool(names) and all(w in TYPE_WORDS or w.endswith("_t") for w in names)

    def unary(self) -> Node:
        tok = self.peek()
        if tok in ("-", "+", "!", "~"):
            self.take()
            return Node("un", (tok, self.unary()))
        if tok == "&":
            self.take()
            return Node("addr", (self.unary(),))
        if tok == "*":
            self.take()
            return Node("deref", (self.unary(),))
        if tok == "(" and self._is_cast():
            self.take()
            words = []
            while self.peek() != ")":
                words.append(self.take())
            self.take(")")
            return Node("cast", (" ".join(words), self.unary()))
        if tok == "sizeof":
            self.take()
            self.take("(")
            depth, words = 1, []
            while True:
                word = self.take()
                depth += {"(": 1, ")": -1}.get(word, 0)
                if depth == 0:
                    break
                words.append(word)
            return Node("sizeof", (" ".join(words),))
        return self.postfix(self.primary())

    def primary(self) -> Node:
        tok = self.take()
        if tok == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if tok == "{":
            items = []
            while self.peek() != "}":
                items.append(self.expr())
                if self.peek() == ",":
                    self.take()
            self.take("}")
            return Node("braces", tuple(items))
        if tok[0].isdigit() or tok[0] == ".":
            return _number(tok)
        if tok[0].isalpha() or tok[0] == "_":
            if self.peek() == "<" and tok in ("static_cast", "reinterpret_cast"):
                self.take("<")
                words = []
                while self.peek() != ">":
                    words.append(self.take())
                self.take(">")
                self.take("(")
                inner = self.expr()
                self.take(")")
                return Node("cast", (" ".join(words), inner))
            return Node("name", (tok,))
        raise HostExprError(f"unexpected {tok!r} in {self.text!r}")

    def postfix(self, node: Node) -> Node:
        while True:
            tok = self.peek()
            if tok == "(":
                self.take()
                args = []
                while self.peek() != ")":
                    args.append(self.expr())
                    if self.peek() == ",":
                        self.take()
                self.take(")")
                node = Node("call", (node, tuple(args)))
            elif tok == "[":
                self.take()
                index = self.expr()
                self.take("]")
                node = Node("index", (node, index))
            elif tok in (".", "->"):
                self.take()
                node = Node("member", (node, self.take()))
            elif tok == "<" and node.kind == "name" and self._template_call():
                self.take()
                depth, words = 1, []
                while True:
                    word = self.take()
                    depth += {"<": 1, ">": -1}.get(word, 0)
                    if depth == 0:
                        break
                    words.append(word)
                node = Node("name", (f"{node.parts[0]}<{' '.join(words)}>",))
            else:
                return node

    def _template_call(self) -> bool:
        # name<...>( : a template call such as data_ptr<float>() or static_cast-like helpers
        depth = 0
        for j in range(self.i, len(self.toks)):
            tok = self.toks[j]
            depth += {"<": 1, ">": -1}.get(tok, 0)
            if depth == 0:
                return j + 1 < len(self.toks) and self.toks[j + 1] == "("
            if tok in (";", "{", "}"):
                return False
        return False


def _number(tok: str) -> Node:
    text = tok.rstrip("uUlLfF") if not tok.lower().startswith("0x") else tok.rstrip("uUlL")
    is_float = any(c in tok for c in ".eE") and not tok.lower().startswith("0x") \
        or tok[-1] in "fF" and not tok.lower().startswith("0x")
    value = float(text) if is_float else int(text, 0)
    return Node("num", (value,), is_float)


def parse_expr(text: str) -> Node:
    """One C expression (raises HostExprError outside what is read)."""
    parser = _Parser(text)
    node = parser.expr()
    if parser.peek() is not None:
        raise HostExprError(f"unexpected {parser.peek()!r} in {text!r}")
    return node


@dataclass
class Translator:
    """Writes trees as spec expressions. ``resolve(name)`` gives a host variable's meaning:
    ``("size", value)`` (a spec size: kept as its name), ``("expr", node, type)`` (a variable
    defined by another expression: inlined), ``("value", number, type)``, or None (unknown).
    ``notes`` collects what was guessed."""

    resolve: Callable[[str], tuple | None]
    types: Mapping[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # sizeof of the file's own structs (kir.frontends.cuda.struct_sizes)
    struct_sizes: Mapping[str, int] = field(default_factory=dict)

    def is_float(self, node: Node) -> bool:
        kind, parts = node.kind, node.parts
        if kind == "num":
            return node.is_float
        if kind == "name":
            meaning = self.resolve(parts[0])
            if meaning is None:
                return parts[0] in ("INFINITY", "FLT_MAX", "M_PI")
            if meaning[0] == "size":
                return False
            return meaning[2] in FLOAT_TYPES
        if kind == "cast":
            return any(w in FLOAT_TYPES for w in parts[0].split())
        if kind == "call":
            name = _callee(node)
            entry = _MATH.get(name or "")
            if entry is None:
                return True
            return entry[2] or any(self.is_float(a) for a in parts[1])
        if kind == "bin":
            op, left, right = parts
            if op in ("<", ">", "<=", ">=", "==", "!=", "&&", "||", "%", "<<", ">>", "&",
                      "|", "^"):
                return False
            return self.is_float(left) or self.is_float(right)
        if kind == "un":
            return self.is_float(parts[1])
        if kind == "cond":
            return self.is_float(parts[1]) or self.is_float(parts[2])
        return False

    def value(self, node: Node) -> float | int:
        """The number ``node`` stands for (host variables at their values)."""
        kind, parts = node.kind, node.parts
        if kind == "num":
            return parts[0]
        if kind == "name":
            name = parts[0]
            meaning = self.resolve(name)
            if meaning is None:
                if name in CONSTANTS:
                    return CONSTANTS[name]
                raise HostExprError(f"no value known for {name!r}")
            if meaning[0] in ("size", "value"):
                return meaning[1]
            return self.value(meaning[1])
        if kind == "sizeof":
            return _sizeof(parts[0], self.struct_sizes)
        if kind == "cast":
            inner = self.value(parts[1])
            if any(w in FLOAT_TYPES for w in parts[0].split()):
                return float(inner)
            return int(inner)
        if kind == "un":
            inner = self.value(parts[1])
            op = parts[0]
            return -inner if op == "-" else inner if op == "+" else int(not inner) \
                if op == "!" else ~int(inner)
        if kind == "cond":
            return self.value(parts[1]) if self.value(parts[0]) else self.value(parts[2])
        if kind == "call":
            name = _callee(node)
            if name in ("pow", "powf", "std::pow"):
                base, exponent = (self.value(a) for a in parts[1])
                return float(base) ** exponent
            entry = _MATH.get(name or "")
            if entry is None:
                raise HostExprError(f"cannot evaluate call to {name!r}")
            return entry[1](*(self.value(a) for a in parts[1]))
        if kind == "bin":
            op, left, right = parts
            a, b = self.value(left), self.value(right)
            if op == "/":
                if self.is_float(node):
                    return a / b
                return int(a / b) if b else _raise(f"division by zero in {node}")
            ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                   "%": lambda: int(math.fmod(a, b)), "<<": lambda: int(a) << int(b),
                   ">>": lambda: int(a) >> int(b), "<": lambda: int(a < b),
                   ">": lambda: int(a > b), "<=": lambda: int(a <= b),
                   ">=": lambda: int(a >= b), "==": lambda: int(a == b),
                   "!=": lambda: int(a != b), "&&": lambda: int(bool(a) and bool(b)),
                   "||": lambda: int(bool(a) or bool(b)), "&": lambda: int(a) & int(b),
                   "|": lambda: int(a) | int(b), "^": lambda: int(a) ^ int(b)}
            return ops[op]()
        raise HostExprError(f"cannot evaluate {kind}")

    def spec(self, node: Node) -> str:
        """``node`` as a spec size expression; HostExprError when it has no spelling there
        (the caller then uses :meth:`value` and says so)."""
        return self._spec(node)[0]

    def _spec(self, node: Node) -> tuple[str, int]:
        """(text, precedence): 1 for + -, 2 for * / // %, 3 for unary minus and **,
        4 for atoms, so only the parentheses the meaning needs are written."""
        kind, parts = node.kind, node.parts
        if kind == "num":
            value = parts[0]
            text = repr(value) if isinstance(value, float) else str(value)
            return text, (4 if not text.startswith("-") else 3)
        if kind == "name":
            name = parts[0]
            meaning = self.resolve(name)
            if meaning is None:
                if name in CONSTANTS:
                    value = CONSTANTS[name]
                    return ("inf" if value == math.inf else repr(value)), 4
                raise HostExprError(f"unknown host value {name!r}")
            if meaning[0] == "size":
                return name, 4
            if meaning[0] == "value":
                value = meaning[1]
                return (repr(value) if isinstance(value, float) else str(value)), 4
            return self._spec(meaning[1])
        if kind == "sizeof":
            return str(_sizeof(parts[0], self.struct_sizes)), 4
        if kind == "cast":
            inner = self._spec(parts[1])
            if any(w in FLOAT_TYPES for w in parts[0].split()) or not self.is_float(parts[1]):
                return inner
            return f"floor({inner[0]})", 4  # float to int truncates (sizes are not negative)
        if kind == "un":
            if parts[0] in ("-", "+"):
                text, prec = self._spec(parts[1])
                return (f"{parts[0]}{text}" if prec >= 3 else f"{parts[0]}({text})"), 3
            raise HostExprError(f"operator {parts[0]} has no spec spelling")
        if kind == "call":
            name = _callee(node)
            args = parts[1]
            if name in ("pow", "powf", "std::pow") and len(args) == 2:
                base, exponent = (self._spec(a) for a in args)
                return (f"{_paren(base, 4)} ** {_paren(exponent, 4)}"), 3
            entry = _MATH.get(name or "")
            if entry is None or entry[0] is None:
                raise HostExprError(f"{name}(...) has no spec spelling")
            return f"{entry[0]}({', '.join(self.spec(a) for a in args)})", 4
        if kind == "bin":
            op, left, right = parts
            if op == "/":
                op = "/" if self.is_float(node) else "//"
            elif op in ("<<", ">>"):
                a, b = self._spec(left), self._spec(right)
                return (f"{_paren(a, 2)} {'*' if op == '<<' else '//'} 2 ** {_paren(b, 4)}"), 2
            elif op not in ("+", "-", "*", "%"):
                raise HostExprError(f"operator {op} has no spec spelling")
            prec = 1 if op in ("+", "-") else 2
            a, b = self._spec(left), self._spec(right)
            # Left-associative: the right operand of - / // % needs parentheses at equal
            # precedence ("a - (b - c)"), + and * only below it.
            right_needs = prec + 1 if op in ("-", "/", "//", "%") else prec
            return f"{_paren(a, prec)} {op} {_paren(b, right_needs)}", prec
        raise HostExprError(f"{kind} has no spec spelling")


def _paren(item: tuple[str, int], least: int) -> str:
    text, prec = item
    return text if prec >= least else f"({text})"


def _raise(message: str):
    raise HostExprError(message)


def _callee(node: Node) -> str | None:
    target = node.parts[0]
    return target.parts[0] if target.kind == "name" else None


def _sizeof(type_text: str, structs: Mapping[str, int] = {}) -> int:
    words = [w for w in type_text.split() if w not in ("const", "struct", "unsigned", "signed")]
    if "*" in type_text:
        return 8
    if not words and "unsigned" in type_text:
        return 4
    if words and words[0] in SIZEOF:
        return SIZEOF[words[0]]
    if words and words[0] in structs:
        return structs[words[0]]
    raise HostExprError(f"size of {type_text!r} unknown")


def product_factors(node: Node) -> list[Node]:
    """The factors of a top-level product (``B * T * C`` → [B, T, C]), parentheses seen
    through; any other node is its own only factor."""
    if node.kind == "bin" and node.parts[0] == "*":
        return product_factors(node.parts[1]) + product_factors(node.parts[2])
    return [node]
