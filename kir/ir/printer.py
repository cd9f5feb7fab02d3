"""IR → text: the dump a CUDA author reads when a kernel is wrong or slow.

One statement per line, two-space indentation, loop labels visible, C-like infix expressions
with the fewest parentheses that stay unambiguous (plus a few C programmers expect around
mixed bitwise and comparison operators), and ``# file:line:col`` comments aligned at a column.

Types are written only where the reader (and :mod:`kir.ir.parser`) cannot infer them. Both sides
share :func:`natural_type`: the type an expression has by the obvious rule (a variable's
declared type, a buffer's element type, an operator's operand type, ``bool`` for comparisons).
A node whose type differs from that is annotated ``(e : T)`` (a load: ``x[i] as f32x4``), so
printing then parsing gives back exactly the same tree, even for an ill-typed kernel.

Everything here is iterative: a 3,000-term sum or deeply nested loops print without recursion.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from kir.ir.nodes import (
    COMPARISONS,
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
    Load,
    MakeVector,
    MatrixFill,
    MatrixLoad,
    MatrixMultiplyAccumulate,
    MatrixStore,
    PREDICATES,
    Return,
    Select,
    Shuffle,
    Special,
    Stmt,
    Store,
    Unary,
    Var,
    WarpReduce,
    While,
)
from kir.ir.types import BOOL, F32, I32, U32, PointerType, Type, VectorType

LOC_COLUMN = 52  # where `# file:line:col` comments start, when the code is shorter
INDENT = "  "

# Words of the IR text grammar; a variable with one of these names prints as `%name`.
RESERVED = frozenset("""
    kernel grid block shared_bytes specialized ignores scratch global shared local const restrict let for
    while do if else barrier atomic dynamic return break continue true false as fast select shuffle reduce
    inf nan lane warp warp_size thread block_dim grid_dim bool i8 u8 i16 u16 i32 u32 i64 u64 f16
    bf16 f32 f64
    matrix fill mload stride transposed mma tf32 tf32x3 mstore assert async async_commit
    async_wait fence
""".split())
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TYPED = re.compile(
    r"(?:bool|i8|u8|i16|u16|i32|u32|i64|u64|f16|bf16|f32|f64)"
    r"(?:x[234]|m[1-9][0-9]*x[1-9][0-9]*)?\Z")

COMPONENTS = "xyzw"

# Binding strength of each printed form (higher binds tighter), C's order.
PREC_ATOM, PREC_POSTFIX, PREC_UNARY, PREC_LOAD_AS = 13, 12, 11, 0
BINARY_PREC = {
    "*": 10, "/": 10, "%": 10, "+": 9, "-": 9, "<<": 8, ">>": 8,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "==": 6, "!=": 6,
    "&": 5, "^": 4, "|": 3, "&&": 2, "||": 1,
}
_BITWISE = ("&", "|", "^", "<<", ">>")


@dataclass
class Env:
    """What the printer and parser know at a point of the kernel: variable types (scalar
    params, declares, for variables) and buffer element types (pointer params, allocs).
    ``loose`` (for printing a lone expression) trusts every Var and Load as written."""

    vars: dict[str, Type] = field(default_factory=dict)
    buffers: dict[str, Type] = field(default_factory=dict)
    loose: bool = False


def natural_type(expr: Expr, env: Env) -> Type | None:
    """The type ``expr`` has by the IR's usual typing rules, given its children's types;
    None when nothing says (an unknown variable, a call without arguments)."""
    if isinstance(expr, (Const, Cast, MakeVector)):
        return expr.type
    if isinstance(expr, Var):
        return expr.type if env.loose else env.vars.get(expr.name)
    if isinstance(expr, Special):
        return U32
    if isinstance(expr, Load):
        return expr.type if env.loose else env.buffers.get(expr.buffer)
    if isinstance(expr, Unary):
        return BOOL if expr.op == "!" else expr.operand.type
    if isinstance(expr, Binary):
        if expr.op in COMPARISONS or expr.op in ("&&", "||"):
            return BOOL
        if isinstance(expr.right.type, VectorType) and not isinstance(expr.left.type, VectorType):
            return expr.right.type
        return expr.left.type
    if isinstance(expr, Select):
        return expr.if_true.type
    if isinstance(expr, Call):
        if expr.fn in PREDICATES:
            return BOOL
        return expr.args[0].type if expr.args else None
    if isinstance(expr, (Shuffle, WarpReduce)):
        return expr.value.type
    if isinstance(expr, Component):
        vtype = expr.vector.type
        return vtype.elem if isinstance(vtype, VectorType) else None
    return None


def format_name(name: str) -> str:
    """A variable, buffer, label or kernel name as the grammar reads it back."""
    if _IDENT.match(name) and name not in RESERVED and not _TYPED.match(name):
        return name
    if _IDENT.match(name):
        return "%" + name
    return "%" + json.dumps(name)


def format_type(t: Type | None) -> str:
    return "?" if t is None else str(t)


def format_const(c: Const) -> str:
    """A literal that reads back to the same value and type: i32, f32 and bool need no
    suffix; floats use Python's repr (exact), plus inf/-inf/nan."""
    value, t = c.value, c.type
    if isinstance(value, bool) and t == BOOL:
        return "true" if value else "false"
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float):
        text = "nan" if math.isnan(value) else repr(value)
        default = F32
    else:
        text = str(int(value))
        default = I32
    return text if t == default else f"{text}_{t}"


def _wrap(text: str, prec: int, need: int, strict: bool = False) -> str:
    return f"({text})" if prec < need or (strict and prec == need) else text


def _format_binary(e: Binary, left: tuple[str, int], right: tuple[str, int]) -> tuple[str, int]:
    prec = BINARY_PREC.get(e.op, 1)
    parts = []
    for (text, child_prec), strict, child in ((left, False, e.left), (right, True, e.right)):
        clarify = isinstance(child, Binary) and child_prec < PREC_UNARY and (
            (e.op in _BITWISE and child_prec != prec)
            or (e.op == "||" and child.op == "&&")
            or (prec in (6, 7) and child_prec in (6, 7)))
        parts.append(f"({text})" if clarify else _wrap(text, child_prec, prec, strict))
    return f"{parts[0]} {e.op} {parts[1]}", prec


def _format_node(e: Expr, kids: list[tuple[str, int]], env: Env) -> tuple[str, int]:
    free = [text for text, _ in kids]  # children in argument position need no parentheses
    if isinstance(e, Const):
        return format_const(e), PREC_ATOM
    if isinstance(e, Var):
        text, prec = format_name(e.name), PREC_ATOM
    elif isinstance(e, Special):
        text, prec = (f"{e.kind}.{e.axis}" if e.axis else e.kind), PREC_ATOM
    elif isinstance(e, Load):
        text = f"{format_name(e.buffer)}[{free[0]}]"
        if e.type != natural_type(e, env):
            return f"{text} as {format_type(e.type)}", PREC_LOAD_AS
        return text, PREC_ATOM
    elif isinstance(e, Unary):
        inner, inner_prec = kids[0]
        if inner_prec < PREC_UNARY or isinstance(e.operand, Unary) or (
                e.op == "-" and isinstance(e.operand, Const)):
            inner = f"({inner})"
        text, prec = f"{e.op}{inner}", PREC_UNARY
    elif isinstance(e, Binary):
        text, prec = _format_binary(e, kids[0], kids[1])
    elif isinstance(e, Select):
        text, prec = f"select({', '.join(free)})", PREC_ATOM
    elif isinstance(e, Cast):
        return f"{format_type(e.type)}({free[0]})", PREC_ATOM
    elif isinstance(e, Call):
        prefix = "fast." if e.fast else ""
        text, prec = f"{prefix}{format_name(e.fn)}({', '.join(free)})", PREC_ATOM
    elif isinstance(e, Shuffle):
        width = "" if e.width == 32 else f", {e.width}"
        text, prec = f"shuffle.{e.mode}({free[0]}, {free[1]}{width})", PREC_ATOM
    elif isinstance(e, WarpReduce):
        text, prec = f"reduce.{e.op}({free[0]})", PREC_ATOM
    elif isinstance(e, MakeVector):
        return f"{format_type(e.type)}{{{', '.join(free)}}}", PREC_ATOM
    elif isinstance(e, Component):
        name = COMPONENTS[e.index] if 0 <= e.index < 4 else f"e{e.index}"
        text, prec = f"{_wrap(free[0], kids[0][1], PREC_POSTFIX)}.{name}", PREC_POSTFIX
    else:
        raise TypeError(f"cannot print {type(e).__name__}")
    if e.type != natural_type(e, env):
        return f"({text} : {format_type(e.type)})", PREC_ATOM
    return text, prec


def print_expr(expr: Expr, env: Env | None = None) -> str:
    """One expression as text. Without ``env`` variables and loads are taken as typed."""
    env = env if env is not None else Env(loose=True)
    results: list[tuple[str, int]] = []
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, done = stack.pop()
        kids = node.children()
        if not done:
            stack.append((node, True))
            stack.extend((kid, False) for kid in reversed(kids))  # type: ignore[misc]
            continue
        start = len(results) - len(kids)
        parts = results[start:]
        del results[start:]
        results.append(_format_node(node, parts, env))
    return results[0][0]


# ------------------------------------------------------------------------------ statements


def _attrs(stmt: For) -> str:
    attrs = [] if stmt.kind == "serial" else [format_name(stmt.kind)]
    if stmt.unroll is not None:
        attrs.append("pragma_unroll" if stmt.unroll == 0 else f"pragma_unroll({stmt.unroll})")
    return f" [{', '.join(attrs)}]" if attrs else ""


def _register(stmt: Stmt, env: Env) -> None:
    """Record what ``stmt`` declares, at the point the parser records it too."""
    if isinstance(stmt, Declare):
        env.vars[stmt.name] = stmt.type
    elif isinstance(stmt, Alloc):
        env.buffers[stmt.name] = stmt.elem


def _lines(stmt: Stmt, env: Env, depth: int) -> list[tuple[int, str, object]]:
    """(depth, text, loc) lines of ``stmt``, in order; compound bodies are walked with an
    explicit stack. A Block's loc rides on its closing-brace line."""
    out: list[tuple[int, str, object]] = []
    # Work items: ("stmt", stmt, depth) or ("line", callable_or_text, depth, loc).
    work: list[tuple] = [("stmt", stmt, depth)]
    while work:
        item = work.pop()
        if item[0] == "line":
            _, text, d, loc = item
            out.append((d, text() if callable(text) else text, loc))
            continue
        _, s, d = item
        if isinstance(s, Block):
            out.append((d, "{", None))
            work.append(("line", "}", d, s.loc))
            work.extend(("stmt", child, d + 1) for child in reversed(s.stmts))
        elif isinstance(s, Declare):
            init = "" if s.init is None else f" = {print_expr(s.init, env)}"
            out.append((d, f"let {format_name(s.name)}: {format_type(s.type)}{init}", s.loc))
            _register(s, env)
        elif isinstance(s, Assign):
            out.append((d, f"{format_name(s.name)} = {print_expr(s.value, env)}", s.loc))
        elif isinstance(s, Store):
            target = f"{format_name(s.buffer)}[{print_expr(s.index, env)}]"
            prefix = "async " if s.asynchronous else ""
            out.append((d, f"{prefix}{target} = {print_expr(s.value, env)}", s.loc))
        elif isinstance(s, Atomic):
            result = "" if s.result is None else f"{format_name(s.result)} = "
            call = (f"atomic.{format_name(s.op)}({format_name(s.buffer)}"
                    f"[{print_expr(s.index, env)}], {print_expr(s.value, env)})")
            out.append((d, result + call, s.loc))
        elif isinstance(s, For):
            env.vars[s.var] = s.type
            var = format_name(s.var)
            head = (f"for {format_name(s.label)}{_attrs(s)} {var}: {format_type(s.type)} = "
                    f"{print_expr(s.init, env)}; {print_expr(s.cond, env)}; "
                    f"{var} = {print_expr(s.update, env)} {{")
            out.append((d, head, s.loc))
            _push_body(work, s.body, d)
        elif isinstance(s, While) and s.test_first:
            out.append((d, f"while {print_expr(s.cond, env)} {{", s.loc))
            _push_body(work, s.body, d)
        elif isinstance(s, While):
            out.append((d, "do {", s.loc))
            cond = s.cond
            work.append(("line", lambda c=cond: f"}} while {print_expr(c, env)}", d,
                         s.body.loc))
            work.extend(("stmt", child, d + 1) for child in reversed(s.body.stmts))
        elif isinstance(s, If):
            out.append((d, f"if {print_expr(s.cond, env)} {{", s.loc))
            if s.orelse is not None:
                _push_body(work, s.orelse, d)
                work.append(("line", "} else {", d, s.then.loc))
                work.extend(("stmt", child, d + 1) for child in reversed(s.then.stmts))
            else:
                _push_body(work, s.then, d)
        elif isinstance(s, Barrier):
            out.append((d, f"barrier {s.scope}", s.loc))
        elif isinstance(s, Fence):
            out.append((d, f"fence {s.scope}", s.loc))
        elif isinstance(s, AsyncCommit):
            out.append((d, "async_commit", s.loc))
        elif isinstance(s, AsyncWait):
            out.append((d, f"async_wait {s.pending}", s.loc))
        elif isinstance(s, Assert):
            said = "" if s.message is None else ", " + json.dumps(s.message)
            out.append((d, f"assert {print_expr(s.cond, env)}{said}", s.loc))
        elif isinstance(s, Alloc):
            dynamic = " dynamic" if s.dynamic else ""
            out.append((d, f"{s.space}{dynamic} {format_name(s.name)}: "
                           f"{format_type(s.elem)}[{s.size}]", s.loc))
            _register(s, env)
        elif isinstance(s, MatrixFill):
            out.append((d, f"matrix {format_name(s.name)}: {format_type(s.type)} = fill "
                           f"{print_expr(s.value, env)}", s.loc))
        elif isinstance(s, MatrixLoad):
            tail = " transposed" if s.transpose else ""
            out.append((d, f"matrix {format_name(s.name)}: {format_type(s.type)} = mload "
                           f"{format_name(s.buffer)}[{print_expr(s.index, env)}] stride "
                           f"{print_expr(s.stride, env)}{tail}", s.loc))
        elif isinstance(s, MatrixMultiplyAccumulate):
            tail = f" {s.precision}" if s.precision != "f32" else ""
            out.append((d, f"mma {format_name(s.acc)} += {format_name(s.a)} * "
                           f"{format_name(s.b)}{tail}", s.loc))
        elif isinstance(s, MatrixStore):
            out.append((d, f"mstore {format_name(s.buffer)}[{print_expr(s.index, env)}] stride "
                           f"{print_expr(s.stride, env)} = {format_name(s.name)}", s.loc))
        elif isinstance(s, Return):
            out.append((d, "return", s.loc))
        elif isinstance(s, Break):
            out.append((d, "break", s.loc))
        elif isinstance(s, Continue):
            out.append((d, "continue", s.loc))
        else:
            raise TypeError(f"cannot print {type(s).__name__}")
    return out


def _push_body(work: list, body: Block, depth: int) -> None:
    work.append(("line", "}", depth, body.loc))
    work.extend(("stmt", child, depth + 1) for child in reversed(body.stmts))


def _render(lines: list[tuple[int, str, object]], locations: bool) -> str:
    rendered = []
    for depth, text, loc in lines:
        line = INDENT * depth + text
        if locations and loc is not None:
            pad = max(LOC_COLUMN - len(line), 2)
            line = f"{line}{' ' * pad}# {loc}"
        rendered.append(line)
    return "\n".join(rendered)


def print_stmt(stmt: Stmt, locations: bool = True, env: Env | None = None,
               depth: int = 0) -> str:
    """One statement (with its body) as text; ``env`` gives the types in scope."""
    env = env if env is not None else Env(loose=True)
    return _render(_lines(stmt, env, depth), locations)


def format_param(name: str, t: Type) -> str:
    return f"{format_name(name)}: {format_type(t)}"


def _format_dim(value: object) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) \
        else json.dumps(str(value))


def print_kernel(kernel: Kernel, locations: bool = True) -> str:
    """The whole kernel as IR text; :func:`kir.ir.parser.parse_kernel` reads it back to an
    equal kernel (and, with ``locations``, the same statement locations)."""
    env = Env()
    for param in kernel.params:
        if isinstance(param.type, PointerType):
            env.buffers[param.name] = param.type.elem
        else:
            env.vars[param.name] = param.type
    params = ", ".join(format_param(p.name, p.type) for p in kernel.params)
    launch = kernel.launch
    grid = ", ".join(_format_dim(g) for g in launch.grid)
    ignores = f" ignores=({', '.join(map(format_name, launch.ignores))})" if launch.ignores else ""
    scratch = ", ".join(f"{format_name(name)}: {json.dumps(count)}"
                        for name, count in launch.scratch)
    scratch = f" scratch=({scratch})" if scratch else ""
    block = ", ".join(str(b) for b in launch.block)
    head = [(0, f"kernel @{format_name(kernel.name)}({params})", None),
            (2, f"grid=({grid}) block=({block}) shared_bytes={launch.shared_bytes}"
                f"{' specialized' if launch.specialized else ''}"
                f"{ignores}{scratch} {{", None)]
    body = _lines(kernel.body, env, 0)
    # The body block's own "{" is the header's; keep its closing line (and loc).
    return _render(head + body[1:], locations) + "\n"


__all__ = ["Env", "natural_type", "print_expr", "print_stmt", "print_kernel", "format_name",
           "format_const", "format_type", "RESERVED"]
