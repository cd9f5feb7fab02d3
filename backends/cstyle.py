"""One C-like printer over kir IR, parameterized by a :class:`Dialect` table.

Metal and CUDA differ in a handful of spellings (types, address spaces, barriers, hardware
indices, shuffles, atomics, math); everything else — C precedence with minimal parentheses,
statements, loops — is shared here. Expressions print iteratively (an explicit stack), so a
long sum cannot exhaust Python's recursion; statements recurse only as deep as the source
nests, with a hard bound.

The printer knows nothing about MLX; :mod:`kir.backends.emitter` decides which buffers are
inputs, outputs, atomic or XOR-encoded and passes that in as :class:`BufferInfo`.
"""

from __future__ import annotations

import re

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from kir import ir
from kir.analysis.matrix_roles import OperandRole
from kir.errors import KirError, UnsupportedError
from kir.ir.nodes import PREDICATES
from kir.ir.types import F16, ScalarType, VectorType

# C precedence, higher binds tighter.
PRIMARY, UNARY, COND = 16, 14, 3
BINARY_PREC = {"*": 13, "/": 13, "%": 13, "+": 12, "-": 12, "<<": 11, ">>": 11,
               "<": 10, "<=": 10, ">": 10, ">=": 10, "==": 9, "!=": 9,
               "&": 8, "^": 7, "|": 6, "&&": 5, "||": 4}
# Operators whose mixing with others compilers warn about (-Wparentheses); we add the
# parentheses a reader would want even where precedence makes them redundant.
_BITWISE = {"&", "^", "|", "<<", ">>"}
MAX_NESTING = 200


@dataclass(frozen=True)
class Dialect:
    """The spellings one target uses; every format string names its holes."""

    name: str
    scalar_types: Mapping[str, str]          # kir scalar name -> C type
    vector_elems: Mapping[str, str]          # kir scalar name -> vector prefix (float -> float4)
    make_vector: str                         # "{type}({elems})" / "make_{type}({elems})"
    shared_qualifier: str                    # "threadgroup" / "__shared__"
    aligned_array: str                       # "{qual}{elem} {name}[{size}]", 16-byte aligned
    local_qualifier: str                     # "" (thread space is the default in both)
    barrier_block: str
    barrier_block_device: str                # a block barrier that also orders device memory
    barrier_warp: str
    fences: Mapping[str, str]                # fence scope (device, block) -> statement
    specials: Mapping[str, str]              # "thread.x" -> text
    shuffles: Mapping[str, str]              # mode -> "{value}", "{lane}" format
    warp_reduces: Mapping[str, str]          # op -> "{value}" format
    scalar_param: str                        # how a scalar kernel parameter is read: "{name}"
    vector_pointer: str                      # "*(({space}{type}*)({buffer} + {index}))"
    infinity: str                            # positive float infinity
    nan: str
    math: Callable[[str, ScalarType, bool], str]           # (fn, type, fast) -> callee
    atomic: Callable[["Printer", ir.Atomic, "BufferInfo", str, str], str]
    atomic_load: str | None                  # "{ptr}" format, None where plain loads work
    atomic_store: str | None
    cast_vector: str                         # "{type}({value})"
    keywords: frozenset[str] = frozenset()
    # Literal spellings: the suffix of a half literal ("" where halves print as a cast), of
    # integer literals by type, and the float types whose infinity/NaN spelling needs no cast.
    half_suffix: str = ""
    int_suffixes: Mapping[str, str] = field(default_factory=lambda: {"u32": "u"})
    bare_special_floats: frozenset[str] = frozenset({"f32"})
    # Vector types the target's headers lack, by kir type ("f16x4"): the name kir defines
    # for it; a helper of that name holds the definition (CUDA has no 4-wide halves)
    vector_names: Mapping[str, str] = field(default_factory=dict)
    # (printer, matrix statement) -> lines; None where the target has no matrix fragments
    matrix: Callable[["Printer", ir.Stmt], list[str]] | None = None
    # (printer, consecutive matrix products) -> lines, where the target issues several
    # products as one instruction; None prints each through ``matrix``
    matrix_products: Callable[["Printer", list[ir.MatrixMultiplyAccumulate]], list[str]] \
        | None = None
    # A line copying each scalar parameter into a local at the top of the body ("{type}",
    # "{name}"), which ``scalar_param`` then reads; "" where parameters are read in place.
    scalar_copy: str = ""
    # Asynchronous global-to-shared copies (ir.Store.asynchronous): a statement's format over
    # "{dst}", "{src}" (element addresses) and "{bytes}", and the commit and wait
    # ("{pending}") statements, with the helper that defines them; None copies synchronously
    # (a load and a store: one of the orders an asynchronous copy allows) and drops the rest.
    async_copy: str | None = None
    async_commit: str = ""
    async_wait: str = ""
    async_helper: str = ""
    # (source type, target type, target's name, value) -> the value's bits as the target
    bit_view: Callable[[ScalarType, ScalarType, str, str], str] | None = None


@dataclass(frozen=True)
class BufferInfo:
    """What the printer needs to know about one named memory (parameter or Alloc)."""

    elem: ScalarType | VectorType
    space: str = ""              # qualifier text for pointer casts: "const device ", "" ...
    atomic: bool = False         # every access goes through atomic load/store
    xor_key: str | None = None   # a constant (e.g. "0xff800000u") XOR-ed into stored bits
    xor_key_buffer: str | None = None  # or a key input read at the same index
    writable: bool = True
    vector_access: bool = False  # read or written as vectors somewhere (declared aligned)


@dataclass
class Printer:
    """Prints one kernel body; collects the helper names it used (for the header)."""

    dialect: Dialect
    buffers: dict[str, BufferInfo]
    scalar_params: frozenset[str] = frozenset()
    names: dict[str, str] = field(default_factory=dict)   # kir name -> emitted name
    barrier_orders_device: bool = False
    helpers: set[str] = field(default_factory=set)
    # fragment -> its role as an operand of TF32 products, loaded in that role's layout
    # (kir.analysis.matrix_roles.tf32_operand_roles)
    fragment_roles: dict[str, OperandRole] = field(default_factory=dict)

    # ------------------------------------------------------------------ names and types

    def name(self, kir_name: str) -> str:
        return self.names.get(kir_name, kir_name)

    def type_name(self, t: ScalarType | VectorType) -> str:
        d = self.dialect
        if isinstance(t, VectorType):
            named = d.vector_names.get(str(t))
            if named is not None:
                self.helpers.add(named)
                return named
            prefix = d.vector_elems.get(t.elem.name)
            if prefix is None:
                raise UnsupportedError(f"{d.name} has no vector type for {t}")
            return f"{prefix}{t.count}"
        if isinstance(t, ScalarType) and t.name in d.scalar_types:
            return d.scalar_types[t.name]
        raise UnsupportedError(f"{d.name} has no type for {t}")

    def literal(self, c: ir.Const) -> tuple[str, int]:
        value, t = c.value, c.type
        if t.name == "bool":
            return ("true" if value else "false"), PRIMARY
        if t.is_float:
            value = float(value)
            if math.isnan(value):
                return self._float_special(self.dialect.nan, t), PRIMARY
            if math.isinf(value):
                text = self._float_special(self.dialect.infinity, t)
                return (f"-{text}", UNARY) if value < 0 else (text, PRIMARY)
            text = float_text(value, t)
            if t.name == "f32":
                text += "f"
            elif t == F16 and self.dialect.half_suffix:
                text += self.dialect.half_suffix
            elif t.name in ("f16", "bf16"):
                text = f"({self.type_name(t)}){text}f"
                return text, UNARY
            return text, (UNARY if value < 0 or text.startswith("-") else PRIMARY)
        value = int(value)
        if t.name in ("i8", "u8", "i16", "u16"):  # no char or short literals: a converted int
            return f"({self.type_name(t)}){value}", UNARY
        suffix = self.dialect.int_suffixes.get(t.name, "")
        if t.name == "i32" and value == -2**31:
            return "(-2147483647 - 1)", PRIMARY
        text = f"{value}{suffix}"
        return text, (UNARY if value < 0 else PRIMARY)

    def _float_special(self, text: str, t: ScalarType) -> str:
        if t.name in self.dialect.bare_special_floats:
            return text
        return f"(({self.type_name(t)}){text})"

    # ---------------------------------------------------------------------- expressions

    def expr(self, root: ir.Expr) -> str:
        """C text of ``root`` (iterative post-order; minimal parentheses)."""
        stack: list[tuple[ir.Node, bool]] = [(root, False)]
        results: list[tuple[str, int]] = []
        while stack:
            node, done = stack.pop()
            kids = node.children()
            if not done:
                stack.append((node, True))
                stack.extend((k, False) for k in reversed(kids))
                continue
            parts = results[len(results) - len(kids):] if kids else []
            if kids:
                del results[len(results) - len(kids):]
            results.append(self._combine(node, parts))
        return results[0][0]

    def _combine(self, e: ir.Node, kids: list[tuple[str, int]]) -> tuple[str, int]:
        d = self.dialect
        match e:
            case ir.Const():
                return self.literal(e)
            case ir.Var(name=name):
                if name in self.scalar_params:
                    return d.scalar_param.format(name=self.name(name)), PRIMARY
                return self.name(name), PRIMARY
            case ir.Special(kind=kind, axis=axis):
                key = f"{kind}.{axis}" if axis else kind
                if key not in d.specials:
                    raise UnsupportedError(f"{d.name}: no spelling for hardware index {key}")
                text = d.specials[key]
                if text.startswith("kir_"):
                    self.helpers.add(text[4:].rstrip("()"))
                return text, PRIMARY
            case ir.Load():
                return self.load(e.buffer, kids[0][0], e.type), PRIMARY
            case ir.Unary(op=op):
                operand = wrap(kids[0], UNARY)
                sep = " " if operand.startswith(op) else ""
                return f"{op}{sep}{operand}", UNARY
            case ir.Binary(op=op):
                return self._binary(e, kids)
            case ir.Select():
                cond = wrap(kids[0], COND + 1)
                return f"{cond} ? {wrap(kids[1], COND + 1)} : {wrap(kids[2], COND + 1)}", COND
            case ir.Cast():
                return self._cast(e, kids[0])
            case ir.Call():
                return self._call(e, [k[0] for k in kids]), PRIMARY
            case ir.Shuffle(mode=mode):
                if mode not in d.shuffles:
                    raise UnsupportedError(f"{d.name}: no {mode} shuffle")
                text = d.shuffles[mode].format(value=kids[0][0], lane=kids[1][0],
                                               width=e.width, type=self.type_name(e.type))
                if "kir_" in d.shuffles[mode]:
                    self.helpers.add(f"shuffle_{mode}")
                return text, PRIMARY
            case ir.WarpReduce(op=op):
                if op not in d.warp_reduces:
                    raise UnsupportedError(f"{d.name}: no warp reduction {op!r}")
                if "kir_" in d.warp_reduces[op]:
                    self.helpers.add(f"warp_{op}")
                return d.warp_reduces[op].format(value=kids[0][0]), PRIMARY
            case ir.MakeVector():
                elems = ", ".join(k[0] for k in kids)
                return d.make_vector.format(type=self.type_name(e.type), elems=elems), PRIMARY
            case ir.Component(index=index):
                return f"{wrap(kids[0], PRIMARY)}.{'xyzw'[index]}", PRIMARY
        raise UnsupportedError(f"{d.name} backend cannot print {type(e).__name__}")

    def _binary(self, e: ir.Binary, kids: list[tuple[str, int]]) -> tuple[str, int]:
        prec = BINARY_PREC[e.op]
        if isinstance(e.type, VectorType):
            self.helpers.add("vector_ops")
        texts = []
        for child, kid, min_prec in ((e.left, kids[0], prec), (e.right, kids[1], prec + 1)):
            # Clarity parentheses (as -Wparentheses asks): bitwise or shift next to another
            # operator, && inside ||.
            if isinstance(child, ir.Binary) and child.op != e.op and (
                    e.op in _BITWISE or child.op in _BITWISE
                    or (e.op == "||" and child.op == "&&")):
                min_prec = PRIMARY
            texts.append(wrap(kid, min_prec))
        return f"{texts[0]} {e.op} {texts[1]}", prec

    def _cast(self, e: ir.Cast, value: tuple[str, int]) -> tuple[str, int]:
        t = e.type
        if isinstance(t, VectorType):
            return self.dialect.cast_vector.format(type=self.type_name(t), value=value[0]), PRIMARY
        inner = e.value
        # A literal converted exactly prints as a literal of the target type.
        if isinstance(inner, ir.Const) and isinstance(inner.value, (int, float)) \
                and not isinstance(inner.value, bool) and t.name != "bool":
            converted = float(inner.value) if t.is_float else int(inner.value)
            if converted == inner.value and (not t.is_int or _fits(converted, t)):
                return self.literal(ir.Const(converted, t))
        return f"({self.type_name(t)}){wrap(value, UNARY)}", UNARY

    def _call(self, e: ir.Call, args: list[str]) -> str:
        if e.fn == "bitcast":
            text = self.dialect.bit_view(e.args[0].type, e.type, self.type_name(e.type),
                                         args[0])
            helper = re.search(r"\bkir_\w+(?=\()", text)
            if helper:
                self.helpers.add(helper.group(0))
            return text
        of = e.args[0].type if e.fn in PREDICATES else e.type  # isnan(x) is named for x
        t = of if isinstance(of, ScalarType) else of.elem
        callee = self.dialect.math(e.fn, t, e.fast)
        if callee.startswith("kir_"):
            self.helpers.add(callee)
        if callee.startswith("(float)"):
            # Half-precision math through f32 (CUDA): convert in, compute, convert back.
            inner = callee[len("(float)"):]
            joined = ", ".join(f"(float)({a})" for a in args)
            return f"({self.type_name(t)}){inner}({joined})"
        return f"{callee}({', '.join(args)})"

    # ------------------------------------------------------------------------- memory

    def info(self, buffer: str) -> BufferInfo:
        if buffer not in self.buffers:
            raise KirError(f"unknown buffer {buffer!r} in kernel")
        return self.buffers[buffer]

    def element(self, buffer: str, index: str) -> str:
        return f"{self.name(buffer)}[{index}]"

    def load(self, buffer: str, index: str, t: ir.ValueType) -> str:
        info = self.info(buffer)
        d = self.dialect
        if isinstance(t, VectorType):
            if self._per_lane(info) or t.count == 3:
                # Atomic or XOR-encoded elements are read one by one (each through its own
                # atomic load or key), then gathered into the vector; so are 3-vectors,
                # which may start at any element (a struct's float3 member) and which Metal
                # pads to 16 bytes.
                lanes = ", ".join(self.load(buffer, f"({index}) + {i}", t.elem)
                                  for i in range(t.count))
                return d.make_vector.format(type=self.type_name(t), elems=lanes)
            return d.vector_pointer.format(space=info.space, type=self.type_name(t),
                                           buffer=self.name(buffer), index=index)
        if info.atomic and d.atomic_load:
            text = d.atomic_load.format(ptr=f"&{self.element(buffer, index)}")
        else:
            text = self.element(buffer, index)
        return self._xor(info, text, index)

    def _xor(self, info: BufferInfo, text: str, index: str) -> str:
        if info.xor_key is None and info.xor_key_buffer is None:
            return text
        # One helper per element type, so a header never names a type (half) whose bit-cast
        # intrinsics the kernel does not otherwise need; named per type, not overloaded: a
        # stored value may be of a type that converts equally well to two of them (CUDA's
        # long long to int64_t, which is long, and to double).
        self.helpers.add(f"xor_{info.elem}")
        key = info.xor_key if info.xor_key is not None else \
            self.element(info.xor_key_buffer, index)
        return f"kir_xor_{info.elem}({text}, {key})"

    @staticmethod
    def _per_lane(info: BufferInfo) -> bool:
        """Whether vector accesses to the buffer must go element by element: its elements
        are atomic (MLX's ``atomic_outputs``) or XOR-encoded (an output whose initial
        contents MLX cannot fill)."""
        return bool(info.atomic or info.xor_key or info.xor_key_buffer)

    def async_copy(self, s: ir.Store) -> str:
        """An asynchronous copy where the target has one, else an ordinary store."""
        d, load = self.dialect, s.value
        if d.async_copy is None or not isinstance(load, ir.Load):
            return self.store(s)
        if self._per_lane(self.info(load.buffer)) or self._per_lane(self.info(s.buffer)):
            raise UnsupportedError(f"asynchronous copy from {load.buffer!r}, whose elements "
                                   "are atomic or encoded", s.loc,
                                   hint="copy it with an ordinary load and store")
        self.helpers.add(d.async_helper)
        return d.async_copy.format(
            dst=f"&{self.element(s.buffer, self.expr(s.index))}",
            src=f"&{self.element(load.buffer, self.expr(load.index))}",
            bytes=load.type.nbytes) + ";"

    def store(self, s: ir.Store) -> str:
        info = self.info(s.buffer)
        if not info.writable:
            raise UnsupportedError(f"kernel writes to input buffer {s.buffer!r}",
                                   s.loc, hint="give it role 'out' or 'inout' in the spec")
        index, value = self.expr(s.index), self.expr(s.value)
        vt = s.value.type
        d = self.dialect
        if isinstance(vt, VectorType):
            if self._per_lane(info) or vt.count == 3:
                # One element at a time, each atomic or encoded (or a 3-vector: a 16-byte
                # Metal float3 store would write the element after it); the vector is
                # computed once.
                lanes = " ".join(self._store_element(s.buffer, info, f"({index}) + {i}",
                                                     f"kir_vector.{'xyzw'[i]}", vt.elem)
                                 for i in range(vt.count))
                return f"{{ {self.type_name(vt)} kir_vector = {value}; {lanes} }}"
            target = d.vector_pointer.format(space=info.space, type=self.type_name(vt),
                                             buffer=self.name(s.buffer), index=index)
            return f"{target} = {value};"
        return self._store_element(s.buffer, info, index, value, vt)

    def _store_element(self, buffer: str, info: BufferInfo, index: str, value: str,
                       value_type) -> str:
        d = self.dialect
        if value_type != info.elem and isinstance(info.elem, ScalarType):
            value = f"({self.type_name(info.elem)})({value})"
        value = self._xor(info, value, index)
        if info.atomic and d.atomic_store:
            return d.atomic_store.format(ptr=f"&{self.element(buffer, index)}",
                                         value=value) + ";"
        return f"{self.element(buffer, index)} = {value};"

    # ----------------------------------------------------------------------- statements

    def block(self, b: ir.Block, indent: int) -> list[str]:
        """Lines of a statement block at ``indent`` levels (4 spaces each)."""
        if indent > MAX_NESTING:
            raise KirError(f"statements nested more than {MAX_NESTING} deep")
        out: list[str] = []
        products = self.dialect.matrix_products
        run: list[ir.MatrixMultiplyAccumulate] = []
        for s in [*b.stmts, None]:
            if products is not None and isinstance(s, ir.MatrixMultiplyAccumulate):
                run.append(s)
                continue
            if run:
                out.extend("    " * indent + line for line in products(self, run))
                run = []
            if s is not None:
                out.extend(self.stmt(s, indent))
        return out

    def stmt(self, s: ir.Stmt, indent: int) -> list[str]:
        pad = "    " * indent
        d = self.dialect
        match s:
            case ir.Block():
                return [pad + "{", *self.block(s, indent + 1), pad + "}"]
            case ir.Declare(name=name, type=t, init=init):
                tail = f" = {self.expr(init)}" if init is not None else ""
                return [f"{pad}{self.type_name(t)} {self.name(name)}{tail};"]
            case ir.Assign(name=name, value=value):
                return [f"{pad}{self.name(name)} = {self.expr(value)};"]
            case ir.Store(asynchronous=True):
                return [pad + self.async_copy(s)]
            case ir.Store():
                return [pad + self.store(s)]
            case ir.AsyncCommit() | ir.AsyncWait():
                if d.async_copy is None:
                    return []
                self.helpers.add(d.async_helper)
                if isinstance(s, ir.AsyncCommit):
                    return [pad + d.async_commit + ";"]
                return [pad + d.async_wait.format(pending=s.pending) + ";"]
            case ir.For():
                return self._for(s, indent)
            case ir.While(cond=cond, body=body, test_first=test_first):
                if test_first:
                    return [f"{pad}while ({self.expr(cond)}) {{",
                            *self.block(body, indent + 1), pad + "}"]
                return [pad + "do {", *self.block(body, indent + 1),
                        f"{pad}}} while ({self.expr(cond)});"]
            case ir.If():
                return self._if(s, indent)
            case ir.Barrier(scope=scope):
                if scope == "warp":
                    return [pad + d.barrier_warp + ";"]
                text = d.barrier_block_device if self.barrier_orders_device else d.barrier_block
                return [pad + text + ";"]
            case ir.Fence(scope=scope):
                return [pad + d.fences[scope] + ";"]
            case ir.Atomic():
                info = self.info(s.buffer)
                if info.xor_key or info.xor_key_buffer:
                    raise UnsupportedError(
                        f"atomic {s.op} on {s.buffer!r}, whose initial contents MLX cannot "
                        "fill (one init_value fills every output) and an atomic cannot decode",
                        s.loc,
                        hint=f"in the spec, give args.{s.buffer} the init the other outputs "
                             "start with, or init = 0 (kir adds initial data after the "
                             "kernel for an output it only atomically adds to)")
                call = d.atomic(self, s, info, self.expr(s.index), self.expr(s.value))
                if s.result is not None:
                    return [f"{pad}{self.name(s.result)} = {call};"]
                return [f"{pad}{call};"]
            case ir.Alloc():
                return [pad + self.alloc(s)]
            case ir.Return():
                return [pad + "return;"]
            case ir.Break():
                return [pad + "break;"]
            case ir.Continue():
                return [pad + "continue;"]
            case ir.Assert():
                return []  # asserts are checked on the interpreter and dropped on GPUs
            case ir.MatrixFill() | ir.MatrixLoad() | ir.MatrixMultiplyAccumulate() \
                    | ir.MatrixStore() if d.matrix is not None:
                return [pad + line for line in d.matrix(self, s)]
        raise UnsupportedError(f"{d.name} backend cannot print {type(s).__name__}",
                               ir.stmt_loc(s))

    def alloc(self, a: ir.Alloc) -> str:
        """Declaration of a shared or local array (dynamic ones are sized by the emitter)."""
        info = self.info(a.name)
        elem = self.type_name(a.elem)
        if info.atomic:
            elem = f"atomic<{elem}>"
        qual = self.dialect.shared_qualifier if a.space == "shared" \
            else self.dialect.local_qualifier
        qual = f"{qual} " if qual else ""
        if a.dynamic:
            # Only CUDA keeps dynamic shared memory (the emitter sizes Metal's statically).
            return f"extern {qual}__align__(16) {elem} {self.name(a.name)}[];"
        if info.vector_access:
            # 16-byte aligned, so float4 accesses at multiples of 4 elements (vectorize-loads,
            # vectorize-access) are aligned whatever layout the compiler picks: C++ aligns a
            # float array to 4 bytes only.
            return self.dialect.aligned_array.format(
                qual=qual, elem=elem, name=self.name(a.name), size=a.size) + ";"
        return f"{qual}{elem} {self.name(a.name)}[{a.size}];"

    def _for(self, s: ir.For, indent: int) -> list[str]:
        pad = "    " * indent
        var = self.name(s.var)
        update = self._update(s.var, s.update)
        head = (f"for ({self.type_name(s.type)} {var} = {self.expr(s.init)}; "
                f"{self.expr(s.cond)}; {update})")
        pragma = []
        if s.kind == "unroll" or s.unroll == 0:
            pragma.append(pad + "#pragma unroll")
        elif s.unroll is not None:
            pragma.append(f"{pad}#pragma unroll {s.unroll}")
        return [f"{pad}// {s.label}", *pragma, f"{pad}{head} {{",
                *self.block(s.body, indent + 1), pad + "}"]

    def _update(self, var: str, update: ir.Expr) -> str:
        name = self.name(var)
        if isinstance(update, ir.Binary) and isinstance(update.left, ir.Var) \
                and update.left.name == var and update.op in ("+", "-", "*", "<<", ">>"):
            if isinstance(update.right, ir.Const) and update.right.value == 1 \
                    and update.op in ("+", "-"):
                return f"{'++' if update.op == '+' else '--'}{name}"
            return f"{name} {update.op}= {self.expr(update.right)}"
        return f"{name} = {self.expr(update)}"

    def _if(self, s: ir.If, indent: int) -> list[str]:
        pad = "    " * indent
        lines = [f"{pad}if ({self.expr(s.cond)}) {{", *self.block(s.then, indent + 1)]
        orelse = s.orelse
        # else-if chains print flat, not as ever deeper nesting.
        while orelse is not None and len(orelse.stmts) == 1 and isinstance(orelse.stmts[0], ir.If):
            inner = orelse.stmts[0]
            lines += [f"{pad}}} else if ({self.expr(inner.cond)}) {{",
                      *self.block(inner.then, indent + 1)]
            orelse = inner.orelse
        if orelse is not None and orelse.stmts:
            lines += [pad + "} else {", *self.block(orelse, indent + 1)]
        return lines + [pad + "}"]


def wrap(child: tuple[str, int], min_prec: int) -> str:
    """``child``'s text, parenthesized when it binds looser than ``min_prec``."""
    text, prec = child
    return text if prec >= min_prec else f"({text})"


def float_text(value: float, t: ScalarType) -> str:
    """The shortest decimal that reads back as the same ``t`` value, always with a '.'."""
    if t.name == "f64":
        text = repr(value)
    else:
        np_type = np.float16 if t.name == "f16" else np.float32
        target = np_type(value)
        text = repr(float(target))
        for digits in range(1, 18):
            candidate = f"{float(target):.{digits}g}"
            with np.errstate(over="ignore"):  # a short rounding of FLT_MAX overflows: skip it
                if np_type(float(candidate)) == target:
                    text = candidate
                    break
    if "inf" in text or "nan" in text:
        return text
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def _fits(value: int, t: ScalarType) -> bool:
    lo, hi = {"i8": (-2**7, 2**7 - 1), "u8": (0, 2**8 - 1), "i16": (-2**15, 2**15 - 1),
              "u16": (0, 2**16 - 1), "i32": (-2**31, 2**31 - 1),
              "u32": (0, 2**32 - 1), "i64": (-2**63, 2**63 - 1), "u64": (0, 2**64 - 1)}[t.name]
    return lo <= value <= hi
