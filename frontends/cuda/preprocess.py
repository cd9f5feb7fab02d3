"""The CUDA preprocessor: macros, conditionals, dropped includes, ``#pragma unroll``, and a
source map from every character of the output back to the user's file, line and column.

Phases, as in C: (1) line continuations are spliced out, (2) comments become spaces of the
same length (so columns hold), (3) directives run line by line and the code between them is
macro-expanded. Phases 1-2 give the working text ``S``; one sorted table maps ``S`` offsets
to source offsets (continuations are the only places it jumps) and another maps output
offsets to ``S`` offsets. Text from a macro body maps to the macro use in the user's file.

Directive lines become empty lines, and lines joined by continuations or multi-line comments
are padded with newlines afterwards, so plain code keeps its line numbers. An ``#include
"header"`` found beside the file or in an include directory (:mod:`.includes`) is
preprocessed with the same macros and its text put where the directive was, on that one
line; locations inside it map to the header's own file, line and column.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from kir.frontends.cuda.macros import (
    ID,
    NL,
    NUM,
    RAW,
    SPECIAL_NAMES,
    WS,
    Expander,
    Macro,
    Tok,
    is_punct,
    lex,
    parse_define,
    skip_ws,
)
from kir.frontends.cuda.includes import (
    MAX_INCLUDE_DEPTH,
    IncludeState,
    find_header,
    header_name,
    should_read,
)
from kir.frontends.cuda.ppexpr import evaluate

from kir.errors import KirError, Loc

MAX_INPUT_CHARS = 4 * 1024 * 1024
PREDEFINED = {"__CUDACC__": "1", "__NVCC__": "1", "__cplusplus": "201703L"}

_SPLICE_RE = re.compile(r"\\[ \t\r\f\v]*\n")
_LEXICAL_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*')
_DIRECTIVE_RE = re.compile(r"^[ \t\f\v\r]*#", re.M)
_IDENT_RE = re.compile(r"(?<![\w$])[A-Za-z_$][\w$]*")
_CONDITIONALS = ("if", "ifdef", "ifndef", "elif", "else", "endif")
_IGNORED = ("include_next", "import", "line", "warning", "ident", "sccs")
_PUNCT_CHARS = frozenset("+-*/%&|^!=<>.:#")


class Preprocessed:
    """The expanded text and its map back to the user's source."""

    def __init__(self, text: str, filename: str, source: str, out_map: tuple[list, list, list],
                 splice_map: tuple[list, list], line_starts: list[int],
                 headers: Sequence[tuple[int, int, "Preprocessed"]] = ()) -> None:
        self.text = text
        self.filename = filename
        self._source = source
        self._out_starts, self._out_s, self._out_exact = out_map
        self._splice_s, self._splice_o = splice_map
        self._line_starts = line_starts
        # (start, end, header) for each included header's text, in output order
        self._headers = list(headers)
        self._header_starts = [h[0] for h in self._headers]

    def _header_at(self, offset: int) -> tuple[int, "Preprocessed"] | None:
        k = bisect_right(self._header_starts, offset) - 1
        if k >= 0 and offset < self._headers[k][1]:
            return self._headers[k][0], self._headers[k][2]
        return None

    def source_offset(self, offset: int) -> int:
        """The offset in the user's file that character ``offset`` of ``text`` came from."""
        if not self.text:
            return 0
        offset = min(max(offset, 0), len(self.text) - 1)
        k = bisect_right(self._out_starts, offset) - 1
        s = self._out_s[k] + (offset - self._out_starts[k] if self._out_exact[k] else 0)
        k = bisect_right(self._splice_s, s) - 1
        return self._splice_o[k] + (s - self._splice_s[k])

    def loc(self, offset: int) -> Loc:
        """``file:line:col`` (1-based) of the token character ``offset`` of ``text`` came
        from; for macro-produced text, the macro use; in a header, the header's."""
        header = self._header_at(offset)
        if header is not None:
            return header[1].loc(offset - header[0])
        return _loc_of(self.filename, self._line_starts, self.source_offset(offset))

    def source_line(self, loc: Loc) -> str | None:
        """The user's original text of ``loc.line`` (for carets), or None."""
        if loc.file != self.filename:
            for _start, _end, header in self._headers:
                line = header.source_line(loc)
                if line is not None:
                    return line
            return None
        if not 1 <= loc.line <= len(self._line_starts):
            return None
        start = self._line_starts[loc.line - 1]
        end = self._source.find("\n", start)
        return self._source[start:end if end >= 0 else len(self._source)].rstrip("\r")

    def error(self, message: str, offset: int, *, cls: type[KirError] = KirError,
              hint: str | None = None) -> KirError:
        """An error (to raise) located at character ``offset`` of ``text``."""
        loc = self.loc(offset)
        return cls(message, loc, source_line=self.source_line(loc), hint=hint)


def preprocess(text: str, filename: str, defines: dict[str, str] | None = None, *,
               include_dirs: Sequence[str | Path] = ()) -> Preprocessed:
    """Run the preprocessor over ``text`` (the contents of ``filename``). ``defines`` are
    extra ``#define NAME value`` lines (a key may be ``F(a, b)``); ``include_dirs`` are
    searched for ``#include "..."`` headers after ``filename``'s folder; raises KirError
    with the location of any problem."""
    if len(text) > MAX_INPUT_CHARS:
        raise KirError(f"input is too large for the preprocessor ({len(text)} characters; "
                       f"the limit is {MAX_INPUT_CHARS})", Loc(filename, 1, 1))
    state = IncludeState({}, tuple(Path(d) for d in include_dirs))
    return _Preprocessor(text, filename, defines or {}, state).run()


def _loc_of(filename: str, line_starts: list[int], offset: int) -> Loc:
    line = bisect_right(line_starts, offset)
    return Loc(filename, line, offset - line_starts[line - 1] + 1)


class _Cond:
    __slots__ = ("name", "origin", "parent", "taken", "seen_else")

    def __init__(self, name: str, origin: int, parent: bool, taken: bool) -> None:
        self.name, self.origin, self.parent, self.taken = name, origin, parent, taken
        self.seen_else = False


class _Preprocessor:
    def __init__(self, source: str, filename: str, defines: dict[str, str],
                 state: IncludeState, main: bool = True) -> None:
        self.source = source
        self.filename = filename
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self._splice()
        self._strip_comments()
        self.state = state
        self.macros: dict[str, Macro] = state.macros  # shared with the headers read
        self.headers: list[tuple[int, int, Preprocessed]] = []
        self.once = False
        if main:
            for name, value in {**PREDEFINED, **defines}.items():
                self._define_external(name, value)
        self.expander = Expander(self.text, self.macros, self._fail, self._line_of_s, filename)
        self.stack: list[_Cond] = []
        self.active = True
        self.out: list[str] = []
        self.out_len = 0
        self.out_line = 1
        self.map_starts: list[int] = []
        self.map_s: list[int] = []
        self.map_exact: list[bool] = []
        self.last_char = "\n"
        self.last_end = -1

    # ---- phases 1 and 2 -------------------------------------------------------------------

    def _splice(self) -> None:
        """Join continuation lines; record where the working text jumps in the source."""
        pieces, self.splice_s, self.splice_o = [], [0], [0]
        self.pad_points: list[int] = []  # newlines that end lines spanning several lines
        length, start = 0, 0
        for m in _SPLICE_RE.finditer(self.source):
            pieces.append(self.source[start:m.start()])
            length += m.start() - start
            start = m.end()
            self.splice_s.append(length)
            self.splice_o.append(start)
        pieces.append(self.source[start:])
        self.text = "".join(pieces)

    def _strip_comments(self) -> None:
        text, pieces, pos, done = self.text, [], 0, 0
        while True:
            m = _LEXICAL_RE.search(text, pos)
            if m is None:
                break
            pos = m.end()
            if m.group().startswith("/*"):
                end = text.find("*/", m.start() + 2)
                if end < 0:
                    self._fail("unterminated /* comment", m.start())
                pos = end + 2
                if "\n" in text[m.start():pos]:
                    self.pad_points.append(pos)
            elif not m.group().startswith("//"):
                continue  # a string or character literal: comment markers inside are text
            pieces.append(text[done:m.start()])
            pieces.append(" " * (pos - m.start()))
            done = pos
        pieces.append(text[done:])
        self.text = text = "".join(pieces)
        # Newlines inside block comments are gone now (they became spaces): the text's lines
        # are logical lines. Pad after each line that covered several source lines.
        points = [text.find("\n", p) for p in self.pad_points + self.splice_s[1:]]
        self.pad_points = sorted({p for p in points if p >= 0})

    # ---- locations and errors -------------------------------------------------------------

    def _to_source(self, s: int) -> int:
        k = bisect_right(self.splice_s, s) - 1
        return self.splice_o[k] + (s - self.splice_s[k])

    def _line_of_s(self, s: int) -> int:
        return bisect_right(self.line_starts, self._to_source(s))

    def _fail(self, message: str, s: int, cls: type[KirError] = KirError) -> NoReturn:
        loc = _loc_of(self.filename, self.line_starts, self._to_source(max(s, 0)))
        start = self.line_starts[loc.line - 1]
        end = self.source.find("\n", start)
        line = self.source[start:end if end >= 0 else len(self.source)].rstrip("\r")
        raise cls(message, loc, source_line=line)

    def _define_external(self, name: str, value: str) -> None:
        line = f"{name} {value}"

        def fail(message: str, tok: Tok | None) -> NoReturn:
            raise KirError(f"bad macro definition {name}={value!r}: {message}")

        if "\n" in line:
            fail("a definition must be one line", None)
        macro = parse_define(lex(line, 0, len(line), False), fail)
        self.macros[macro.name] = macro

    # ---- output ---------------------------------------------------------------------------

    def _emit(self, text: str, s: int, exact: bool) -> None:
        """Append ``text``; its characters come from ``S`` offset ``s`` onward (``exact``)
        or all from ``s``."""
        n = self.out_len
        if not self.map_starts or self.map_exact[-1] != exact or self.map_s[-1] != (
                s - (n - self.map_starts[-1]) if exact else s):
            self.map_starts.append(n)  # a new segment: it does not continue the last one
            self.map_s.append(s)
            self.map_exact.append(exact)
        self.out.append(text)
        self.out_len += len(text)
        self.out_line += text.count("\n")
        self.last_char = text[-1]
        self.last_end = s + len(text) if exact else -1

    def _sync(self, next_s: int) -> None:
        """Pad with newlines so the text from ``S`` offset ``next_s`` lands on its line."""
        missing = self._line_of_s(next_s) - self.out_line
        if missing > 0:
            self._emit("\n" * missing, max(next_s - 1, 0), False)

    def _emit_raw(self, a: int, b: int) -> None:
        text, points = self.text, self.pad_points
        k = bisect_left(points, a)
        while k < len(points) and points[k] < b:
            self._emit(text[a:points[k] + 1], a, True)
            a = points[k] + 1
            self._sync(a)
            k += 1
        if a < b:
            self._emit(text[a:b], a, True)
            if text[b - 1] == "\n":
                self._sync(b)

    def _emit_tokens(self, tokens: list[Tok]) -> None:
        # User tokens that expansion left adjacent are copied as one run (up to a newline):
        # fewer, longer map segments, and newline padding at the run's end.
        run_start = run_end = -1
        for tok in tokens:
            if not tok.text:
                continue
            if tok.exact and tok.origin == run_end:
                run_end += len(tok.text)
            else:
                if run_start >= 0:
                    self._emit_raw(run_start, run_end)
                    run_start = run_end = -1
                if (not (tok.exact and tok.origin == self.last_end)
                        and _would_paste(self.last_char, tok.text[0])):
                    self._emit(" ", tok.origin, False)
                if not tok.exact:
                    self._emit(tok.text, tok.origin, False)
                    continue
                run_start, run_end = tok.origin, tok.origin + len(tok.text)
            if tok.kind in (NL, RAW):
                self._emit_raw(run_start, run_end)
                run_start = run_end = -1
        if run_start >= 0:
            self._emit_raw(run_start, run_end)

    # ---- the driver -----------------------------------------------------------------------

    def run(self) -> Preprocessed:
        text = self.text
        pos = 0
        for m in _DIRECTIVE_RE.finditer(text):
            start, hash_pos = m.start(), m.end() - 1
            if self.active:
                self._code(pos, start)
            else:
                self._sync(start)
            end = text.find("\n", hash_pos)
            end = len(text) if end < 0 else end
            self._directive(hash_pos, end)
            pos = min(end + 1, len(text))
            if end < len(text):
                self._emit("\n", end, True)
                self._sync(pos)
        if self.active:
            self._code(pos, len(text))
        if self.stack:
            cond = self.stack[-1]
            self._fail(f"unterminated #{cond.name} (no matching #endif)", cond.origin)
        return Preprocessed("".join(self.out), self.filename, self.source,
                            (self.map_starts, self.map_s, self.map_exact),
                            (self.splice_s, self.splice_o), self.line_starts, self.headers)

    def _code(self, a: int, b: int) -> None:
        """Expand the code in ``S[a:b]`` (whole lines, no directives) and emit it."""
        if a >= b:
            return
        text, macros = self.text, self.macros
        names = set(_IDENT_RE.findall(text, a, b))
        if names.isdisjoint(macros) and names.isdisjoint(SPECIAL_NAMES):
            self._emit_raw(a, b)
            return
        # Lines naming a macro are lexed; the lines between stay RAW runs (lexed only if a
        # macro's argument list reaches into them).
        tokens: list[Tok] = []
        done = a
        for m in _IDENT_RE.finditer(text, a, b):
            if m.start() < done or (m.group() not in macros and m.group() not in SPECIAL_NAMES):
                continue
            line_start = text.rfind("\n", a, m.start()) + 1 or a
            line_end = text.find("\n", m.start(), b)
            line_end = b if line_end < 0 else line_end + 1
            prefix = text[line_start:m.start()]
            if '"' not in prefix and "'" not in prefix and prefix[-1:] not in (".", "+", "-"):
                line_start = m.start()  # no literal or number before the name: no lexing
            if done < line_start:
                tokens.append(Tok(RAW, text[done:line_start], done, True))
            tokens.extend(lex(text, line_start, line_end, True))
            done = line_end
        if done < b:
            tokens.append(Tok(RAW, text[done:b], done, True))
        self._emit_tokens(self.expander.expand(tokens))

    def _directive(self, hash_pos: int, end: int) -> None:
        tokens = lex(self.text, hash_pos + 1, end, True)
        i = skip_ws(tokens, 0)
        if i >= len(tokens):
            return  # the null directive
        head, rest = tokens[i], tokens[i + 1:]
        name = head.text if head.kind == ID else ""
        if name in _CONDITIONALS:
            self._conditional(name, rest, hash_pos)
        elif not self.active or name in _IGNORED or head.kind == NUM:
            return  # skipped group, or an #include_next / #line / line marker: dropped
        elif name == "include":
            self._include(self.text[head.origin + len(head.text):end], hash_pos)
        elif name == "define":
            macro = parse_define(rest, self._fail_at_token(end))
            self.macros[macro.name] = macro
        elif name == "undef":
            j = skip_ws(rest, 0)
            if j >= len(rest) or rest[j].kind != ID:
                self._fail("#undef needs a macro name", rest[j].origin if j < len(rest)
                           else head.origin)
            self.macros.pop(rest[j].text, None)
        elif name == "pragma":
            self._pragma(rest, hash_pos)
        elif name == "error":
            message = self.text[head.origin + len(head.text):end].strip()
            self._fail(f"#error {message}".rstrip(), hash_pos)
        else:
            self._fail(f"unknown preprocessor directive '#{head.text}'", head.origin)

    def _include(self, rest: str, hash_pos: int) -> None:
        """Read a user's ``#include "header"`` in place (see :mod:`.includes`)."""
        found = header_name(rest)
        if found is None or not found[1]:
            return  # <system header> or a computed include: not read
        path = find_header(found[0], self.filename, self.state)
        if path is None or not should_read(path, self.state):
            return
        if len(self.state.active) >= MAX_INCLUDE_DEPTH:
            self._fail(f"#include nested more than {MAX_INCLUDE_DEPTH} deep", hash_pos)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            self._fail(f"cannot read {path}: {exc.strerror or exc}", hash_pos)
        if len(text) > MAX_INPUT_CHARS:
            self._fail(f"{path} is too large for the preprocessor ({len(text)} characters)",
                       hash_pos)
        key = path.resolve()
        self.state.active.append(key)
        try:
            child = _Preprocessor(text, str(path), {}, self.state, main=False)
            header = child.run()
        finally:
            self.state.active.pop()
        if child.once:
            self.state.once.add(key)
        if self._expander_stale():
            self.expander.macros = self.macros
        # The header's text goes on the directive's line (newlines as spaces: the lines of
        # this file keep their numbers); its locations come from the header's own map.
        start = self.out_len
        if header.text:
            self._emit(header.text.replace("\n", " "), hash_pos, False)
            self.headers.append((start, self.out_len, header))

    def _expander_stale(self) -> bool:
        return self.expander.macros is not self.macros

    def _fail_at_token(self, end: int) -> Callable[[str, Tok | None], NoReturn]:
        def fail(message: str, tok: Tok | None) -> NoReturn:
            self._fail(message, tok.origin if tok is not None else end)
        return fail

    def _conditional(self, name: str, rest: list[Tok], hash_pos: int) -> None:
        if name in ("if", "ifdef", "ifndef"):
            value = self.active and self._test(name, rest, hash_pos)
            self.stack.append(_Cond(name, hash_pos, self.active, value))
            self.active = value
            return
        if not self.stack:
            self._fail(f"#{name} without #if", hash_pos)
        cond = self.stack[-1]
        if name == "endif":
            self.stack.pop()
            self.active = cond.parent
        elif cond.seen_else:
            self._fail(f"#{name} after #else", hash_pos)
        elif name == "else":
            cond.seen_else = True
            self.active = cond.parent and not cond.taken
            cond.taken = True
        else:
            self.active = cond.parent and not cond.taken and self._test("if", rest, hash_pos)
            cond.taken = cond.taken or self.active

    def _test(self, name: str, rest: list[Tok], hash_pos: int) -> bool:
        if name != "if":
            j = skip_ws(rest, 0)
            if j >= len(rest) or rest[j].kind != ID:
                self._fail(f"#{name} needs a macro name", hash_pos)
            return (rest[j].text in self.macros) == (name == "ifdef")
        tokens = self._replace_defined(rest, hash_pos)
        return evaluate(self.expander.expand(tokens), self._fail, hash_pos) != 0

    def _replace_defined(self, tokens: list[Tok], hash_pos: int) -> list[Tok]:
        """``defined X`` / ``defined(X)`` become 1 or 0 before macros expand."""
        out: list[Tok] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.kind != ID or tok.text != "defined":
                out.append(tok)
                i += 1
                continue
            j = skip_ws(tokens, i + 1)
            paren = j < len(tokens) and is_punct(tokens[j], "(")
            if paren:
                j = skip_ws(tokens, j + 1)
            if j >= len(tokens) or tokens[j].kind != ID:
                self._fail("'defined' needs a macro name", tok.origin)
            value = "1" if tokens[j].text in self.macros else "0"
            if paren:
                j = skip_ws(tokens, j + 1)
                if j >= len(tokens) or not is_punct(tokens[j], ")"):
                    self._fail("missing ')' after 'defined(NAME'", tok.origin)
            out.append(Tok(NUM, value, tok.origin, False))
            i = j + 1
        return out

    def _pragma(self, rest: list[Tok], hash_pos: int) -> None:
        i = skip_ws(rest, 0)
        if i < len(rest) and rest[i].kind == ID and rest[i].text == "once":
            self.once = True
            return
        if i >= len(rest) or rest[i].kind != ID or rest[i].text != "unroll":
            return  # any other pragma: dropped
        args = [t for t in self.expander.expand(rest[i + 1:]) if t.kind not in (WS, NL)]
        if not args:
            self._emit("__pragma_unroll__();", hash_pos, False)
            return
        try:
            count = str(evaluate(args, self._fail, hash_pos, strict=True))
        except KirError:  # e.g. a template parameter: left for the parser to resolve
            count = " ".join(t.text for t in args)
        self._emit(f"__pragma_unroll__({count});", hash_pos, False)


def _would_paste(previous: str, first: str) -> bool:
    """Whether writing ``first`` right after ``previous`` would glue two tokens into one."""
    word_prev = previous.isalnum() or previous in "_$"
    if word_prev and (first.isalnum() or first in "_$\"'"):
        return True
    if previous.isdigit() and first == ".":
        return True
    return previous in _PUNCT_CHARS and first in _PUNCT_CHARS
