"""Text → IR: reads what :mod:`kir.ir.printer` writes (``grammar/kir.lark``, LALR).

Types come back the way the printer left them out: a symbol table (params, declares, for
variables, allocs, recorded in text order exactly as the printer records them) types
variables and loads, :func:`kir.ir.printer.natural_type` types operators, and ``(e : T)`` /
``x[i] as T`` annotations override. ``# file:line:col`` comments at the end of a line become
the ``loc`` of the statement starting on that line (a block's: of its closing brace).

The parse tree is walked with an explicit stack, so long sums and deep nesting never reach
Python's recursion limit.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from functools import lru_cache
from importlib import resources

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from kir.errors import KirError, Loc, source_line_of
from kir.ir.nodes import (
    Alloc,
    Assign,
    Atomic,
    Assert,
    AsyncCommit,
    Fence,
    AsyncWait,
    Barrier,
    Binary,
    Block,
    Break,
    Call,
    Cast,
    Component,
    Const,
    Continue,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Launch,
    Load,
    MakeVector,
    MatrixFill,
    MatrixLoad,
    MatrixMultiplyAccumulate,
    MatrixStore,
    Param,
    Return,
    Select,
    Shuffle,
    Special,
    Store,
    Unary,
    Var,
    WarpReduce,
    While,
)
from kir.ir.printer import COMPONENTS, Env, natural_type
from kir.ir.types import BOOL, F32, I32, SCALARS, MatrixType, PointerType, Type, parse_type

_LOC_COMMENT = re.compile(r"#\s(.*):(\d+):(\d+)\s*$")


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = resources.files("kir.grammar").joinpath("kir.lark").read_text()
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=True)


@lru_cache(maxsize=32)
def parse_template(text: str, filename: str) -> Kernel:
    """:func:`parse_kernel` for the IR text a rule builds from a template: one search
    rebuilds the same kernel from the same text again and again (each attention rebuild
    took 0.27 s to parse), and kernels are immutable, so each text is parsed once."""
    return parse_kernel(text, filename)


def parse_kernel(text: str, filename: str = "<ir>", *, locate_unmarked: bool = False) -> Kernel:
    """Parse IR text into a :class:`Kernel`; malformed text raises :class:`KirError` naming
    ``filename:line:col`` with the offending line and a caret. Statements keep the source
    location of their ``# file:line:col`` comment; with ``locate_unmarked`` a statement
    without one (written or edited by hand in a dump) is located in ``filename`` itself, so
    the verifier's and the interpreter's errors still point at it."""
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, filename) from None
    return _Builder(text, filename, locate_unmarked).build(tree)


def _syntax_error(exc: UnexpectedInput, text: str, filename: str) -> KirError:
    line, col = getattr(exc, "line", -1), getattr(exc, "column", -1)
    if isinstance(exc, UnexpectedEOF) or line is None or line < 1:
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
        message = "unexpected end of input"
    elif isinstance(exc, UnexpectedToken):
        token = exc.token
        shown = "end of input" if token.type == "$END" else repr(str(token))
        message = f"unexpected {shown}"
    elif isinstance(exc, UnexpectedCharacters):
        message = f"unexpected character {text[exc.pos_in_stream]!r}"
    else:  # pragma: no cover - lark's other errors
        message = "syntax error"
    expected = sorted(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    hint = None
    if expected:
        names = _expected_names(expected)
        hint = "expected " + ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
    return KirError(message, Loc(filename, line, col),
                    source_line=source_line_of(text, line), hint=hint)


def _expected_names(terminals: list[str]) -> list[str]:
    lark = _lark()
    patterns = {t.name: t.pattern for t in lark.terminals}
    names = []
    for name in terminals:
        pattern = patterns.get(name)
        if pattern is not None and pattern.type == "str":
            names.append(repr(pattern.value))
        else:
            names.append(name.lower())
    return names


def _unescape(token: str) -> str:
    if token.startswith('%"'):
        return json.loads(token[1:])
    return token[1:] if token.startswith("%") else str(token)


def _int(token: Token) -> int:
    return int(str(token))


class _Scratch(list):
    """The launch's scratch buffers while the launch is built (told apart from ignores)."""


class _Builder:
    """Turns the lark tree into IR nodes bottom-up (explicit stack, no recursion)."""

    def __init__(self, text: str, filename: str, locate_unmarked: bool = False) -> None:
        self.text = text
        self.filename = filename
        self.locate_unmarked = locate_unmarked
        self.env = Env()
        self.locs: dict[int, Loc] = {}
        self.positions: dict[int, tuple[int, int]] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            match = _LOC_COMMENT.search(line)
            if match:
                self.locs[number] = Loc(match.group(1), int(match.group(2)),
                                        int(match.group(3)))

    # -- driver --------------------------------------------------------------------------

    def build(self, tree: Tree) -> Kernel:
        out: list[object] = []
        stack: list[tuple[object, bool]] = [(tree, False)]
        while stack:
            item, done = stack.pop()
            if not isinstance(item, Tree):
                out.append(item)
                continue
            if not done:
                if item.data == "for_stmt":  # the loop variable is in scope from its header
                    var, vtype = item.children[3], item.children[4]
                    self.env.vars[_unescape(var)] = self._type(vtype)
                stack.append((item, True))
                stack.extend((child, False) for child in reversed(item.children))
                continue
            count = len(item.children)
            kids = out[len(out) - count:]
            del out[len(out) - count:]
            result = getattr(self, "on_" + item.data)(item.meta, kids)
            if isinstance(result, Expr) and not getattr(item.meta, "empty", True):
                self.positions[id(result)] = (item.meta.line, item.meta.column)
            out.append(result)
        return out[0]  # type: ignore[return-value]

    def error(self, message: str, line: int, col: int, hint: str | None = None) -> KirError:
        return KirError(message, Loc(self.filename, line, col),
                        source_line=source_line_of(self.text, line), hint=hint)

    def _type(self, token: Token) -> Type:
        try:
            return parse_type(str(token))
        except ValueError:
            raise self.error(f"unknown type {str(token)!r}", token.line, token.column) from None

    def _need(self, expr: Expr, meta) -> Expr:
        """Reject an expression whose type nothing determined (unknown name, no annotation)."""
        if expr.type is None:
            line, col = self.positions.get(id(expr), (meta.line, meta.column))
            what = f"variable {expr.name!r}" if isinstance(expr, Var) else \
                f"buffer {expr.buffer!r}" if isinstance(expr, Load) else "this expression"
            raise self.error(f"cannot tell the type of {what}", line, col,
                             hint="declare it first, or annotate it: (e : f32)")
        return expr

    def _typed(self, node: Expr, meta) -> Expr:
        for child in node.children():
            self._need(child, meta)  # type: ignore[arg-type]
        return dataclasses.replace(node, type=natural_type(node, self.env))

    def _stmt_loc(self, meta) -> Loc | None:
        found = self.locs.get(meta.line)
        if found is None and self.locate_unmarked:
            return Loc(self.filename, meta.line, meta.column)
        return found

    # -- kernel --------------------------------------------------------------------------

    def on_start(self, meta, kids):
        return kids[0]

    def on_kernel(self, meta, kids):
        name, params, launch, body = kids
        return Kernel(_unescape(name), tuple(params or ()), body, launch)

    def on_params(self, meta, kids):
        return list(kids)

    def on_param(self, meta, kids):
        name, ptype, ptr = _unescape(kids[0]), self._type(kids[1]), kids[2]
        if ptr is not None:
            space, const, restrict = ptr
            ptype = PointerType(ptype, space, const, restrict)  # type: ignore[arg-type]
            self.env.buffers[name] = ptype.elem
        else:
            self.env.vars[name] = ptype
        return Param(name, ptype)

    def on_ptr(self, meta, kids):
        return kids[0], kids[1] is not None, kids[2] is not None

    def on_space(self, meta, kids):
        return str(kids[0])

    on_alloc_space = on_space
    on_scope = on_space

    def on_ignores(self, meta, kids):
        return tuple(_unescape(k) for k in kids)

    def on_scratch_buffer(self, meta, kids):
        return (_unescape(kids[0]), json.loads(str(kids[1])))

    def on_scratch(self, meta, kids):
        return _Scratch(kids)

    def on_launch(self, meta, kids):
        scratch = next((tuple(k) for k in kids if isinstance(k, _Scratch)), ())
        kids = [k for k in kids if not isinstance(k, _Scratch)]
        ignores = next((k for k in kids if isinstance(k, tuple)), ())
        kids = [k for k in kids if not isinstance(k, tuple)]
        specialized = any(getattr(k, "type", "") == "SPECIALIZED" for k in kids if k is not None)
        kids = [k for k in kids if k is not None and getattr(k, "type", "") != "SPECIALIZED"]
        dims = []
        for token in kids:
            if token.type == "STRING":
                dims.append(json.loads(str(token)))
            elif re.fullmatch(r"\d+", str(token)):
                dims.append(int(str(token)))
            else:
                raise self.error(f"expected a whole number, not {str(token)!r}",
                                 token.line, token.column)
        grid = tuple(dims[:3])
        block = tuple(dims[3:6])
        for token, value in zip(kids[3:], dims[3:]):
            if not isinstance(value, int):
                raise self.error("block sizes and shared_bytes are whole numbers",
                                 token.line, token.column)
        return Launch(grid, block, dims[6], specialized, ignores,  # type: ignore[arg-type]
                      scratch)

    # -- statements ----------------------------------------------------------------------

    def on_block(self, meta, kids):
        stmts = tuple(k for k in kids if not isinstance(k, Token))
        return Block(stmts, loc=self.locs.get(meta.end_line))

    def on_declare(self, meta, kids):
        _, name, dtype, init = kids
        dtype = self._type(dtype)
        if init is not None:
            self._need(init, meta)
        name = _unescape(name)
        self.env.vars[name] = dtype
        return Declare(name, dtype, init, loc=self._stmt_loc(meta))

    def on_assign(self, meta, kids):
        return Assign(_unescape(kids[0]), self._need(kids[1], meta), loc=self._stmt_loc(meta))

    def on_store(self, meta, kids):
        asynchronous, buffer, index, value = kids
        return Store(_unescape(buffer), self._need(index, meta), self._need(value, meta),
                     loc=self._stmt_loc(meta), asynchronous=asynchronous is not None)

    def on_async_commit(self, meta, kids):
        return AsyncCommit(loc=self._stmt_loc(meta))

    def on_async_wait(self, meta, kids):
        return AsyncWait(_int(kids[1]), loc=self._stmt_loc(meta))

    def on_atomic(self, meta, kids):
        result, _, op, buffer, index, value = kids
        return Atomic(str(op), _unescape(buffer), self._need(index, meta),
                      self._need(value, meta),
                      None if result is None else _unescape(result), loc=self._stmt_loc(meta))

    def on_for_stmt(self, meta, kids):
        _, label, attrs, var, vtype, init, cond, upd_name, update, body = kids
        if _unescape(upd_name) != _unescape(var):
            raise self.error(f"the update must assign the loop variable {_unescape(var)!r}",
                             upd_name.line, upd_name.column)
        kind, unroll = "serial", None
        for name, number in attrs or ():
            if name == "pragma_unroll":
                unroll = 0 if number is None else _int(number)
            elif number is None:
                kind = str(name)
            else:
                raise self.error(f"unknown loop attribute {str(name)!r}", name.line,
                                 name.column, hint="use a kind (unroll) or pragma_unroll(N)")
        for expr in (init, cond, update):
            self._need(expr, meta)
        return For(_unescape(label), _unescape(var), self._type(vtype), init, cond, update,
                   body, kind, unroll, loc=self._stmt_loc(meta))

    def on_attrs(self, meta, kids):
        return list(kids)

    def on_attr(self, meta, kids):
        return kids[0], kids[1]

    def on_while_stmt(self, meta, kids):
        return While(self._need(kids[1], meta), kids[2], True, loc=self._stmt_loc(meta))

    def on_do_stmt(self, meta, kids):
        # kids: DO, body, [WHILE,] cond
        return While(self._need(kids[-1], meta), kids[1], False, loc=self._stmt_loc(meta))

    def on_if_stmt(self, meta, kids):
        return If(self._need(kids[1], meta), kids[2], kids[3], loc=self._stmt_loc(meta))

    def on_barrier(self, meta, kids):
        return Barrier(kids[1], loc=self._stmt_loc(meta))

    def on_fence(self, meta, kids):
        return Fence(str(kids[1]), loc=self._stmt_loc(meta))

    def on_assert_stmt(self, meta, kids):
        message = None if kids[2] is None else json.loads(str(kids[2]))
        return Assert(self._need(kids[1], meta), message, loc=self._stmt_loc(meta))

    def on_alloc(self, meta, kids):
        space, dynamic, name, elem, size = kids
        name, elem = _unescape(name), self._type(elem)
        self.env.buffers[name] = elem
        return Alloc(name, elem, _int(size), space, dynamic is not None,  # type: ignore[arg-type]
                     loc=self._stmt_loc(meta))

    def _matrix_type(self, token: Token) -> MatrixType:
        mtype = self._type(token)
        if not isinstance(mtype, MatrixType):
            raise self.error(f"a matrix fragment needs a matrix type (f32m8x8), not {mtype}",
                             token.line, token.column)
        return mtype

    def on_matrix_fill(self, meta, kids):
        _, name, mtype, value = kids
        return MatrixFill(_unescape(name), self._matrix_type(mtype), self._need(value, meta),
                          loc=self._stmt_loc(meta))

    def on_matrix_load(self, meta, kids):
        _, name, mtype, buffer, index, stride, transposed = kids
        return MatrixLoad(_unescape(name), self._matrix_type(mtype), _unescape(buffer),
                          self._need(index, meta), self._need(stride, meta),
                          transposed is not None, loc=self._stmt_loc(meta))

    def on_matrix_mma(self, meta, kids):
        _, acc, a, _, b, precision = kids
        return MatrixMultiplyAccumulate(_unescape(acc), _unescape(a), _unescape(b),
                                        "f32" if precision is None else str(precision),
                                        loc=self._stmt_loc(meta))

    def on_matrix_store(self, meta, kids):
        _, buffer, index, stride, name = kids
        return MatrixStore(_unescape(buffer), self._need(index, meta), self._need(stride, meta),
                           _unescape(name), loc=self._stmt_loc(meta))

    def on_ret(self, meta, kids):
        return Return(loc=self._stmt_loc(meta))

    def on_brk(self, meta, kids):
        return Break(loc=self._stmt_loc(meta))

    def on_cont(self, meta, kids):
        return Continue(loc=self._stmt_loc(meta))

    # -- expressions ---------------------------------------------------------------------

    def on_const(self, meta, kids):
        text = str(kids[0])
        if text in ("true", "false"):
            return Const(text == "true", BOOL)
        body, _, suffix = text.partition("_")
        if body in ("nan", "-nan"):
            value: int | float = math.nan  # one object, so nan constants compare equal
        elif any(ch in body for ch in ".eEn"):
            value = float(body)
        else:
            value = int(body)
        default = F32 if isinstance(value, float) else I32
        return Const(value, SCALARS[suffix] if suffix else default)

    def on_var(self, meta, kids):
        return self._typed(Var(_unescape(kids[0]), None), meta)  # type: ignore[arg-type]

    def on_special(self, meta, kids):
        kind, _, axis = str(kids[0]).partition(".")
        return Special(kind, axis)

    def on_load(self, meta, kids):
        node = Load(_unescape(kids[0]), kids[1], None)  # type: ignore[arg-type]
        return self._typed(node, meta)

    def on_load_as(self, meta, kids):
        return Load(_unescape(kids[0]), self._need(kids[1], meta), self._type(kids[2]))

    def on_unary(self, meta, kids):
        return self._typed(Unary(str(kids[0]), kids[1], None), meta)  # type: ignore[arg-type]

    def on_binary(self, meta, kids):
        node = Binary(str(kids[1]), kids[0], kids[2], None)  # type: ignore[arg-type]
        return self._typed(node, meta)

    def on_select(self, meta, kids):
        return self._typed(Select(kids[0], kids[1], kids[2], None), meta)  # type: ignore

    def on_cast(self, meta, kids):
        return Cast(self._need(kids[1], meta), self._type(kids[0]))

    def on_make_vector(self, meta, kids):
        elems = tuple(self._need(e, meta) for e in kids[2])
        return MakeVector(elems, self._type(kids[0]))  # type: ignore[arg-type]

    def on_args(self, meta, kids):
        return [k for k in kids if k is not None]

    def on_call(self, meta, kids, fast: bool = False):
        node = Call(_unescape(kids[0]), tuple(kids[1]), None, fast)  # type: ignore[arg-type]
        return self._typed(node, meta)

    def on_fast_call(self, meta, kids):
        return self.on_call(meta, kids, fast=True)

    def on_shuffle(self, meta, kids):
        mode, value, lane, width = kids
        width = 32 if width is None else _int(width)
        return self._typed(Shuffle(str(mode), value, lane, None, width), meta)  # type: ignore

    def on_reduce(self, meta, kids):
        return self._typed(WarpReduce(str(kids[0]), kids[1], None), meta)  # type: ignore

    def on_component(self, meta, kids):
        name = str(kids[1])
        if name in COMPONENTS:
            index = COMPONENTS.index(name)
        elif re.fullmatch(r"e\d+", name):
            index = int(name[1:])
        else:
            raise self.error(f"unknown vector component {name!r}", kids[1].line,
                             kids[1].column, hint="use .x .y .z or .w")
        return self._typed(Component(kids[0], index, None), meta)  # type: ignore[arg-type]

    def on_annotate(self, meta, kids):
        return dataclasses.replace(kids[0], type=self._type(kids[1]))


__all__ = ["parse_kernel"]
