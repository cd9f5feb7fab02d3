"""Parse the device-side units of a CUDA file with lark (LALR, contextual lexer).

The grammar (``kir.grammar/cuda.lark``) is built once per process (and cached on disk by
lark). C's declaration-versus-expression ambiguity is resolved by a post-lexer that turns
identifiers naming types into ``TYPE_NAME`` tokens; the set of type names (builtin CUDA
vector types, typedefs, template type parameters) is supplied per parse.

Constructs the grammar does not model at all (inline assembly, ``new``, classes, ...) are
recognised by a keyword pre-scan so the user gets "X is not supported" at the right place
instead of a bare syntax error. Lark's own errors become :class:`KirError`s with a message a
C programmer expects ("expected ';' before 'x'", "unexpected '}'").
"""

from __future__ import annotations

import re
import threading
from importlib import resources
from typing import Iterator, Protocol

from kir.frontends.cuda import ptx_reads
import lark
from lark import Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

from kir.errors import KirError, Loc, UnsupportedError

#: Identifiers that are types without a declaration in the user's file.
BUILTIN_TYPE_NAMES = frozenset({
    "size_t", "half", "__half", "__nv_bfloat16", "float2", "float3", "float4", "int2", "int3",
    "int4", "uint2", "uint3", "uint4", "double2", "uint", "uint32_t", "int32_t", "uint64_t",
    "int64_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "half2", "__half2", "dim3",
    "ptrdiff_t", "uintptr_t", "intptr_t", "uchar", "uchar2", "uchar3", "uchar4", "char2",
    "char4", "ushort", "__nv_bfloat162", "nv_bfloat16", "nv_bfloat162", "bfloat16",
    "short2", "short4", "ushort2", "ushort4",
    # cooperative groups (qualified or after `using namespace cooperative_groups`)
    "cg::thread_block", "cg::thread_block_tile", "cg::grid_group", "cg::thread_group",
    "cg::coalesced_group", "cg::plus", "cg::greater", "cg::less",
    # CUB's block and warp reductions and their operators (frontends/cuda/lower_cub.py)
    "cub::BlockReduce", "cub::WarpReduce", "cub::BlockScan", "cub::WarpScan", "cub::Sum",
    "cub::Max", "cub::Min", "cub::KeyValuePair", "cub::ArgMax", "cub::ArgMin",
    # PyTorch's half types and accumulation types (frontends/cuda/torch_types.py)
    "c10::Half", "at::Half", "c10::BFloat16", "at::BFloat16", "at::acc_type", "at::opmath_type",
    # <type_traits>' enable_if_t, as a kernel's return type (vLLM's fused_add_rms_norm), and
    # conditional_t, a type chosen by a constant (an accumulator type by the element type)
    "enable_if_t", "conditional_t",
})
#: Library namespaces a qualified name may start with; ``std::size_t`` is ``size_t``.
_STD_PREFIXES = ("::", "cuda::std::", "std::", "cuda::")
_CG_PREFIXES = ("cooperative_groups::", "cg::")


#: Function objects of libcu++ and Thrust that CUB's reductions take (CUDA 13's CUB has no
#: ``cub::Sum``/``Max``/``Min``; code written for it passes these), read as CUB's own.
REDUCTION_OBJECTS = {"cuda::std::plus": "cub::Sum", "std::plus": "cub::Sum",
                     "thrust::plus": "cub::Sum", "cuda::maximum": "cub::Max",
                     "thrust::maximum": "cub::Max", "cuda::minimum": "cub::Min",
                     "thrust::minimum": "cub::Min"}


def normalize_name(name: str) -> str:
    """A qualified name in the form the frontend knows it: ``std::min`` and ``::min`` are
    ``min``, ``cooperative_groups::x`` (or any alias ending in it) is ``cg::x``,
    ``cuda::maximum`` is ``cub::Max`` (:data:`REDUCTION_OBJECTS`); other qualified names (a
    user's namespaces) keep their qualification."""
    if "::" not in name:
        return name
    if name.lstrip(":") in REDUCTION_OBJECTS:
        return REDUCTION_OBJECTS[name.lstrip(":")]
    for prefix in _CG_PREFIXES:
        if name.startswith(prefix):
            return "cg::" + name[len(prefix):]
    for prefix in _STD_PREFIXES:
        if name.startswith(prefix):
            return normalize_name(name[len(prefix):])
    return name


class SourceMap(Protocol):
    """What the frontend needs from the preprocessor's result."""

    text: str

    def loc(self, offset: int) -> Loc: ...

    def source_line(self, loc: Loc) -> str | None: ...


def qualified_suffixes(name: str) -> list[str]:
    """``a::b::c``, ``b::c``, ``c``: how a name qualified by a user's namespaces may have
    been declared (kir does not track namespaces; a ``cg::`` name keeps its qualifier)."""
    if name.startswith("cg::") or "::" not in name:
        return [name]
    parts = name.split("::")
    return ["::".join(parts[k:]) for k in range(len(parts))]


class _TypeNamePostLexer:
    """Turns IDENT tokens that name a type into TYPE_NAME (the classic C lexer hack), and
    those naming a template function into TEMPLATE_NAME (so ``f<T>(x)`` is not ``f < T``).

    A qualified name counts by its normalized form (``std::size_t``), or by its last part
    when it is qualified by a user's namespace (``kernels::Pair``)."""

    always_accept = ("IDENT",)

    def __init__(self) -> None:
        self.type_names: frozenset[str] | set[str] = BUILTIN_TYPE_NAMES
        self.template_names: frozenset[str] | set[str] = frozenset()

    def _kind(self, name: str) -> str:
        plain = normalize_name(name)
        for candidate in qualified_suffixes(plain):
            if candidate in self.type_names:
                return "TYPE_NAME"
            if candidate in self.template_names:
                return "TEMPLATE_NAME"
        return "IDENT"

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        # A builtin type name right after a type (``int half = n / 2;``, common in
        # reductions) declares a variable that hides the type, as C++ allows and nvcc
        # accepts; it is a plain identifier until the block declaring it closes (a `for`
        # header's variable: until its braced body closes).
        hidden: dict[str, int] = {}  # name -> brace depth of its scope
        depth = 0
        for_parens = 0  # parentheses open in a `for` header (0: not in one)
        previous = ""
        for token in stream:
            kind = token.type
            if kind == "IDENT" and "::" in token.value.lstrip(":") and (
                    previous == "TYPENAME" or token.value.endswith("::TempStorage")):
                # ``typename Alias::Member``: the alias, then its member (as after ``S<T>``);
                # a CUB collective's ``Alias::TempStorage`` may leave out the ``typename``
                outer, member = token.value.rsplit("::", 1)
                if self._kind(outer) == "TYPE_NAME":
                    if previous != "TYPENAME":
                        yield Token.new_borrow_pos("TYPENAME", "typename", token)
                    yield Token.new_borrow_pos("TYPE_NAME", outer, token)
                    token = Token.new_borrow_pos("SCOPED_NAME", "::" + member, token)
                    previous = kind = "SCOPED_NAME"
            if kind == "IDENT":
                kind = token.type = self._kind(token.value)
                if kind == "TYPE_NAME" and token.value in BUILTIN_TYPE_NAMES and (
                        token.value in hidden or previous in _TYPE_TOKENS):
                    hidden.setdefault(token.value, depth + (1 if for_parens else 0))
                    token.type = "IDENT"
            elif kind == "LBRACE":
                depth += 1
            elif kind == "RBRACE":
                depth -= 1
                hidden = {name: d for name, d in hidden.items() if d <= depth}
            elif kind == "FOR":
                for_parens = -1  # its `(` comes next
            elif kind == "LPAR" and for_parens:
                for_parens = 1 if for_parens < 0 else for_parens + 1
            elif kind == "RPAR" and for_parens > 0:
                for_parens -= 1
            previous = token.type
            yield token


# Tokens that end a type, after which a name is being declared.
_TYPE_TOKENS = frozenset({"TYPE_NAME", "VOID", "BOOL", "CHAR", "SHORT", "INT", "LONG",
                          "FLOAT", "DOUBLE", "UNSIGNED", "SIGNED", "AUTO"})


_LOCK = threading.Lock()
_PARSER: lark.Lark | None = None
_POSTLEX = _TypeNamePostLexer()
_LITERALS: dict[str, str] = {}


def get_parser() -> lark.Lark:
    """The process-wide CUDA parser (built on first use)."""
    global _PARSER
    if _PARSER is None:
        grammar = resources.files("kir.grammar").joinpath("cuda.lark").read_text()
        _PARSER = lark.Lark(grammar, parser="lalr", lexer="contextual",
                            start=["function_def", "top_decl", "compound", "template_header", "args"],
                            postlex=_POSTLEX, maybe_placeholders=True, cache=True)
        for term in _PARSER.terminals:
            if term.pattern.type == "str":
                _LITERALS[term.name] = term.pattern.value
    return _PARSER


# Words that open a construct outside the subset; the grammar knows none of them.
_UNSUPPORTED_WORDS = {
    "asm": "inline assembly", "__asm__": "inline assembly", "__asm": "inline assembly",
    "new": "operator new", "delete": "operator delete", "class": "class definitions",
    "union": "unions", "throw": "exceptions", "try": "exceptions", "catch": "exceptions",
    "operator": "operator overloading", "virtual": "virtual functions",
    "typeid": "typeid", "texture": "texture references",
    "__shfl": "__shfl without _sync (deprecated)", "wchar_t": "char types",
    "char16_t": "char types", "char32_t": "char types",
}
_WORD = re.compile(r"[A-Za-z_]\w*|<<<|\"|'|\(\s*\*\s*[A-Za-z_]\w*\s*\)\s*\(")


# What to do instead of the CUB collectives kir does not read (it reads reductions and
# scans: frontends/cuda/lower_cub.py, lower_cub_scan.py).
CUB_HINT = ("of CUB's collectives kir reads cub::BlockReduce, cub::WarpReduce, cub::BlockScan "
            "and cub::WarpScan, on one scalar per thread; write others out (loads, stores, "
            "sorts, histograms: with __shared__ arrays, warp shuffles and atomics)")

# What follows a ``typename`` kir reads: a member type of one of the file's struct templates
# (``typename S<...>::Type``), or the ``TempStorage`` of a CUB collective (``typename
# BlockReduce::TempStorage``, ``BlockReduce`` a typedef of one)
_MEMBER_OF_TEMPLATE = re.compile(r"\s*(?:[A-Za-z_][\w:]*\s*<|[A-Za-z_]\w*::TempStorage\b)")


def _prescan(text: str, offset: int, src: SourceMap, template_end: int) -> None:
    """Raise UnsupportedError at the first word that opens an unsupported construct."""
    i = 0
    n = len(text)
    while i < n:
        m = _WORD.search(text, i)
        if not m:
            return
        word = m.group(0)
        i = m.end()
        if word in ("\"", "'"):
            # Skip the literal; strings are rejected (with a better message) when lowered.
            j = i
            while j < n and text[j] != word and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        what = _UNSUPPORTED_WORDS.get(word)
        if word == "<<<":
            what = "kernel launches from device code (dynamic parallelism)"
        elif word.startswith("("):  # (in a template header: a function template parameter)
            what = "function pointers" if m.start() >= template_end else None
        elif word == "class" and (m.start() < template_end or text[:m.start()].rstrip()
                                  .endswith("enum")):
            what = None  # template<class T> is parsed and rejected later with its name
        elif word == "typename" and m.start() >= template_end \
                and not _MEMBER_OF_TEMPLATE.match(text, m.end()):
            what = "dependent type names ('typename X::Y') other than a struct template's " \
                   "member type ('typename S<T>::Type')"
        if what is not None:
            found = error(f"{what} not supported", offset + m.start(), src, UnsupportedError)
            if word == "typename" and "cub::" in text:  # typedef cub::BlockReduce<...> R;
                found.hint = CUB_HINT
            raise found


def template_header_length(text: str) -> int:
    """The length of ``text``'s leading ``template<...>`` header (angle brackets balanced,
    so ``template <template <typename> class Op>`` is one header)."""
    depth = 0
    for k in range(text.find("<"), len(text)):
        depth += {"<": 1, ">": -1}.get(text[k], 0)
        if depth == 0:
            return k + 1
    return len(text)


def error(message: str, offset: int, src: SourceMap, cls: type[KirError] = KirError) -> KirError:
    """A KirError of class ``cls`` at ``offset`` of the preprocessed text, with its caret line."""
    loc = src.loc(offset)
    return cls(message, loc, source_line=src.source_line(loc))


def _describe(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    return repr(str(token.value)) if token.value else token.type


def _expected_message(token: Token, expected: set[str]) -> str:
    found = _describe(token)
    if token.type == "$END":
        return "unexpected end of input (missing '}'?)"
    if token.type == "IDENT" and "::" in token.value and "TYPE_NAME" in expected:
        library = token.value.lstrip(":").split("::")[0]
        return (f"'{token.value}' is not a type kir knows (names from the '{library}' "
                "library are not supported in device code)")
    for name, text in (("SEMICOLON", ";"), ("RPAR", ")"), ("RSQB", "]"), ("RBRACE", "}"),
                       ("COLON", ":")):
        if expected == {name} or (name == "SEMICOLON" and name in expected
                                  and token.type in ("IDENT", "TYPE_NAME", "RBRACE", "INT_LIT",
                                                     "FLOAT_LIT", "$END")):
            return f"expected '{text}' before {found}"
    shown = sorted(_LITERALS.get(e, e) for e in expected if e != "IDENT")[:8]
    hint = f" (expected one of: {', '.join(shown)})" if 0 < len(shown) <= 8 else ""
    return f"unexpected {found}{hint}"


def parse_expressions(text: str, type_names: set[str] | frozenset[str],
                      template_names: set[str] | frozenset[str] = frozenset()) -> Tree | None:
    """``text`` as comma-separated expressions (rule ``args``), or None when it is not;
    positions are relative to ``text`` (for values whose text is not the file's own)."""
    parser = get_parser()
    with _LOCK:
        _POSTLEX.type_names = type_names
        _POSTLEX.template_names = template_names
        try:
            return parser.parse(text, start="args")
        except (UnexpectedToken, UnexpectedCharacters):
            return None


def parse_unit(src: SourceMap, start: int, end: int, rule: str,
               type_names: set[str] | frozenset[str],
               template_names: set[str] | frozenset[str] = frozenset()) -> Tree:
    """Parse ``src.text[start:end]`` with grammar rule ``rule`` (``function_def`` or
    ``top_decl``); token positions in the tree are relative to ``start``. ``type_names``
    and ``template_names`` are the identifiers that name types and template functions."""
    text = ptx_reads.patched(src.text[start:end])
    template_end = 0
    if text.lstrip().startswith("template"):
        template_end = template_header_length(text)
    _prescan(text, start, src, template_end)
    parser = get_parser()
    with _LOCK:
        _POSTLEX.type_names = type_names
        _POSTLEX.template_names = template_names
        try:
            return parser.parse(text, start=rule)
        except UnexpectedToken as exc:
            token = exc.token
            pos = token.start_pos if token.type != "$END" else len(text.rstrip())
            if token.type == "$END":
                pos = max(len(text.rstrip()) - 1, 0)
            found = error(_expected_message(token, set(exc.expected)), start + (pos or 0), src)
            if str(token.value).lstrip(":").startswith("cub::"):
                found.hint = CUB_HINT
            raise found from None
        except UnexpectedCharacters as exc:
            char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "?"
            raise error(f"unexpected character {char!r}", start + exc.pos_in_stream,
                        src) from None
        except UnexpectedEOF:
            raise error("unexpected end of input", start + max(len(text) - 1, 0), src) from None
        finally:
            _POSTLEX.type_names = BUILTIN_TYPE_NAMES
            _POSTLEX.template_names = frozenset()
