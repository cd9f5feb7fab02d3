"""The Lowerer: parse trees of one CUDA kernel (and the ``__device__`` functions it calls)
to a :class:`kir.ir.Kernel`.

Expression, call, statement, declaration, type, struct, inlining, cooperative-groups and
byte-pool lowering live in mixins (``lower_expr``, ``lower_calls``, ``lower_stmt``,
``lower_decl``, ``lower_types``, ``lower_struct``, ``lower_inline``, ``lower_cg``,
``lower_pool``); this module holds the state they share: scopes and unique
local names, the statement list being emitted, source locations and the kernel's parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_assign import AssignMixin
from kir.frontends.cuda.lower_int_intrinsics import IntIntrinsicsMixin
from kir.frontends.cuda.lower_warp_sync import WarpSyncMixin
from kir.frontends.cuda.lower_math import MathMixin
from kir.frontends.cuda.lower_bits import BitsMixin
from kir.frontends.cuda.lower_calls import CallMixin
from kir.frontends.cuda.lockstep import LockstepMixin
from kir.frontends.cuda.lower_cg import CgMixin
from kir.frontends.cuda.lower_cub import CubMixin
from kir.frontends.cuda.lower_cub_ops import CubOperatorMixin
from kir.frontends.cuda.lower_cub_scan import CubScanMixin
from kir.frontends.cuda.lower_constant import ConstantMixin
from kir.frontends.cuda.lower_functor import FunctorMixin
from kir.frontends.cuda.lower_view_struct import ViewStructMixin
from kir.frontends.cuda.lower_decl import DeclMixin
from kir.frontends.cuda.lower_expr import ExprMixin
from kir.frontends.cuda.lower_inline import InlineMixin
from kir.frontends.cuda.lower_pool import PoolMixin
from kir.frontends.cuda.lower_stmt import StmtMixin
from kir.frontends.cuda.lower_struct import StructMixin
from kir.frontends.cuda.lower_switch import SwitchMixin
from kir.frontends.cuda.lower_constructors import ConstructorMixin
from kir.frontends.cuda.lower_half2 import Half2Mixin
from kir.frontends.cuda.lower_lambda import LambdaMixin
from kir.frontends.cuda.pointer_choice import PointerChoiceMixin
from kir.frontends.cuda.shared_pairs import SharedPairsMixin
from kir.frontends.cuda.lower_methods import MethodMixin
from kir.frontends.cuda.lower_operators import OperatorMixin
from kir.frontends.cuda.lower_struct_def import StructDefMixin
from kir.frontends.cuda.lower_types import TypeMixin, dtype_type, function_param_name
from kir.frontends.cuda.instantiations import ValueText
from kir.frontends.cuda.parser import SourceMap, error, parse_expressions
from kir.frontends.cuda.values import (
    FUNCTION_POINTER,
    struct_size,
    AUTO,
    NULL_POINTER,
    OFFSET_TYPE,
    BufferInfo,
    CgType,
    ConstSym,
    FnContext,
    FunctorStruct,
    FunctorVal,
    FunctionSym,
    PtrSym,
    RefSym,
    StructType,
    TypeSym,
    VarSym,
)
from lark import Token, Tree

from kir.errors import KirError, Loc, UnsupportedError
from kir.analysis.array_copies import forward_array_copies
from kir.analysis.copies import forward_single_writes, propagate_copies
from kir.analysis.dead import drop_dead_locals
from kir.ir import Block, Const, Declare, Kernel, Launch, Param, Stmt, Var
from kir.ir.types import I32, U8, PointerType, ScalarType

ASSIGNING = ("assign", "pre_inc", "pre_dec", "post_inc", "post_dec")


def split_function(tree) -> tuple:
    """(template, specs, pointer trees, name token, params, body) of a function_def."""
    kids = [k for k in tree.children
            if not (isinstance(k, Tree) and k.data == "fn_qual")
            and not (isinstance(k, Token) and k.type == "REF")]
    return kids[0], kids[1], kids[2:-3], kids[-3], kids[-2], kids[-1]


def returns_reference(tree) -> bool:
    """Whether a function_def returns a reference (``T& f(...)``)."""
    return any(isinstance(k, Token) and k.type == "REF" for k in tree.children)


def param_parts(ptree) -> tuple:
    """(decl_specs, declarator or None, default initializer or None) of a ``param``."""
    declarator = default = None
    for child in ptree.children[1:]:
        if isinstance(child, Tree) and child.data == "declarator":
            declarator = child
        elif isinstance(child, Tree) and child.data == "param_default":
            default = child.children[0]
    return ptree.children[0], declarator, default


def assigned_names(tree) -> set[str]:
    """Names assigned directly (``x = ...``, ``x += ...``, ``x++``, a member ``x.a.b = ...``)
    anywhere in ``tree``."""
    names = set()
    for sub in tree.iter_subtrees():
        if sub.data in ASSIGNING:
            target = sub.children[0] if sub.data in ("assign", "post_inc", "post_dec") \
                else sub.children[-1]
            while isinstance(target, Tree) and target.data == "member":
                target = target.children[0]
            if isinstance(target, Tree) and target.data == "name":
                names.add(str(target.children[0]))
    return names


class Lowerer(ExprMixin, AssignMixin, CallMixin, SwitchMixin, StmtMixin, DeclMixin, TypeMixin,
              StructMixin, InlineMixin, CgMixin, CubMixin, CubScanMixin,
              CubOperatorMixin, LockstepMixin, PoolMixin, ConstantMixin,
              ViewStructMixin, FunctorMixin, StructDefMixin, MethodMixin, OperatorMixin,
              Half2Mixin, LambdaMixin, ConstructorMixin, BitsMixin, IntIntrinsicsMixin,
              WarpSyncMixin, MathMixin, PointerChoiceMixin, SharedPairsMixin):
    """Lowers one kernel. ``functions`` maps device function names to their overloads;
    ``globals_`` holds top-level constants; ``typedefs`` the file's type aliases; ``program``
    the rest of the file's device side (structs, names); ``args`` what the spec says of the
    kernel's arguments (None without a spec)."""

    def __init__(self, src: SourceMap, functions: dict[str, list[FunctionSym]],
                 globals_: dict[str, ConstSym], typedefs: dict[str, object],
                 launch: Launch, program=None, args=None) -> None:
        from kir.frontends.cuda.program import Program

        self.src = src
        self.functions = functions
        self.typedefs = typedefs
        self.launch = launch
        self.program = program or Program(src, functions, {}, frozenset(), frozenset())
        self.args = args
        self.scopes: list[dict[str, object]] = [dict(globals_)]
        self.used: set[str] = set()
        self.out: list[Stmt] = []
        self.prologue: list[Stmt] = []
        self.buffers: dict[str, BufferInfo] = {}
        self.fn_stack: list[FnContext] = []
        self.labels = 0
        self.depth = 0
        # while an atomic's pointer operand is lowered: the integer types it was cast to
        self.atomic_operand: list | None = None
        self.offset = 0  # text offset that tree positions are relative to
        self.cur_loc: Loc | None = None
        self.dynamic_shared = None
        self.last_qualifiers: set[str] = set()
        # Incremented whenever a pointer test folds to a constant (a null argument, or a
        # present buffer compared with null): the branch it decides is then lowered alone.
        self.null_folds = 0
        # __constant__ memory read so far (lower_constant): bound once, kernel parameters
        self.constants_bound: set[str] = set()
        # __device__ variables the kernel writes: (name, element count) for Launch.scratch
        self.scratch: list[tuple[str, str]] = []
        self.structs_taken_apart = False  # a struct local or parameter was made (lower_struct)
        self.implicit_params: list = []

    # ------------------------------------------------------------------ plumbing

    def loc_of(self, node) -> Loc | None:
        pos = self._pos(node)
        return self.src.loc(self.offset + pos) if pos is not None else self.cur_loc

    def _pos(self, node) -> int | None:
        """Offset of the first token under ``node``.

        Iterative (trees can be very deep) and memoized per tree: statement lowering asks for
        the position of every enclosing statement, and a subtree without tokens (``{{{}}}``)
        would otherwise be walked once per level, quadratic in the nesting."""
        if isinstance(node, Token):
            return node.start_pos
        if not isinstance(node, Tree):
            return None
        # id -> (tree, offset): the tree is kept so a recycled id never matches.
        cache = self.__dict__.setdefault("_positions", {})
        stack: list[tuple[Tree, bool]] = [(node, False)]
        while stack:
            current, expanded = stack.pop()
            if id(current) in cache and cache[id(current)][0] is current:
                continue
            if not expanded:
                stack.append((current, True))
                stack.extend((c, False) for c in current.children if isinstance(c, Tree))
                continue
            pos = None
            for child in current.children:
                if isinstance(child, Token):
                    pos = child.start_pos
                elif isinstance(child, Tree):
                    pos = cache[id(child)][1]
                if pos is not None:
                    break
            cache[id(current)] = (current, pos)
        return cache[id(node)][1]

    def error(self, message: str, node, cls: type[KirError] = KirError) -> KirError:
        """A KirError at ``node`` (a tree, a token, or None for the current statement)."""
        pos = self._pos(node) if node is not None else None
        if pos is not None:
            return error(message, self.offset + pos, self.src, cls)
        loc = self.cur_loc
        return cls(message, loc, source_line=self.src.source_line(loc) if loc else None)

    def emit(self, stmt: Stmt) -> None:
        self.out.append(stmt)

    def capture(self, fn: Callable[[], object]) -> tuple[list[Stmt], object]:
        """Run ``fn`` with a fresh statement list; return what it emitted and its result."""
        saved = self.out
        self.out = []
        try:
            result = fn()
            return self.out, result
        finally:
            self.out = saved

    def fresh(self, base: str) -> str:
        """A kernel-unique local name: ``base``, ``base_1``, ``base_2``, ..."""
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def next_label(self) -> str:
        label = f"L{self.labels}"
        self.labels += 1
        return label

    def push_scope(self) -> None:
        self.scopes.append({})

    def pop_scope(self) -> None:
        self.scopes.pop()

    def bind(self, ident: str, sym: object) -> None:
        self.scopes[-1][ident] = sym

    def lookup(self, ident: str):
        for scope in reversed(self.scopes):
            if ident in scope:
                return scope[ident]
        if self.bind_constant(ident):  # __constant__ memory, first read: now a parameter
            return self.scopes[0].get(ident)
        return None

    def constant(self, tree, what: str, variable_length: bool = False):
        """The compile-time value of ``tree`` (an int/float/bool), else a KirError."""
        stmts, value = self.capture(lambda: self.rvalue(tree))
        if stmts or not isinstance(value, Const):
            if variable_length:
                raise self.error(f"variable-length arrays not supported ({what} must be a "
                                 "compile-time constant)", tree, UnsupportedError)
            raise self.error(f"{what} must be a compile-time constant", tree)
        return value.value

    @staticmethod
    def split_declarator(declarator):
        """(pointer trees, is_reference, name, dimension trees or None for [])"""
        pointers, is_ref, ident, dims = [], False, None, []
        for child in declarator.children:
            if isinstance(child, Tree) and child.data == "pointer":
                pointers.append(child)
            elif isinstance(child, Tree) and child.data == "array_dim":
                dims.append(child.children[0])
            elif isinstance(child, Token) and child.type == "REF":
                is_ref = True
            elif isinstance(child, Token):
                ident = str(child)
        return pointers, is_ref, ident, dims

    # ------------------------------------------------------------------- kernels

    def lower_kernel(self, tree, offset: int, template_values: dict[str, int | str]) -> Kernel:
        """Lower a parsed ``__global__`` function definition."""
        self.offset = offset
        template, specs, pointers, ident, params, body = split_function(tree)
        self.cur_loc = self.loc_of(tree)
        if template is not None:
            self.bind_template(template, template_values)
        ret = self.resolve_specs(specs)
        if ret.base is not None or pointers:
            raise self.error("a __global__ function must return void", specs)
        assigned = assigned_names(body)
        kparams = []
        for ptree in (params.children if params is not None else []):
            kparams.extend(self.kernel_param(ptree, assigned))
        self.push_scope()
        self.lower_stmt_list(body.children)
        self.pop_scope()
        stmts = tuple(self.prologue) + tuple(self.out)
        kernel = self.settle_lockstep(self.settle_choices(Kernel(
            str(ident), tuple(kparams) + tuple(self.implicit_params),
            Block(stmts, loc=self.loc_of(body)),
            dataclasses.replace(self.launch, scratch=tuple(self.scratch))
            if self.scratch else self.launch)))
        if not self.structs_taken_apart:
            return kernel
        # The field-by-field copies of structs (each by-value argument, return, assignment)
        # hide the kernel's structure from the rules (a k-tile loop "writes" the sub-matrix
        # struct it only reads): forward them. Other kernels keep every local as written,
        # so their dumps, traces and loop labels stay as they were.
        kernel = forward_array_copies(kernel)
        return drop_dead_locals(forward_single_writes(propagate_copies(kernel)))

    def bind_template(self, template, values: dict[str, int | str]) -> None:
        for param in template.children:
            if param.data == "template_type":
                self._bind_type_param(param, values)
                continue
            if param.data == "template_template":
                raise self.error("a kernel's template template parameter not supported (a "
                                 "spec gives types and values only)", param, UnsupportedError)
            if param.data == "template_function":  # T (*ACT_FN)(const T&)
                self.bind_function_param(param, values.get(function_param_name(param)))
                continue
            specs, ident = param.children[0], str(param.children[1])
            default = param.children[2] if len(param.children) > 2 else None
            t = self.resolve_specs(specs).base
            if t is FUNCTION_POINTER:  # dequantize_kernel_t dequantize_kernel: a function
                self.bind_function_param(param, values.get(ident))
                continue
            value = values.get(ident)
            if isinstance(value, str):
                raise self.error(f"template parameter '{ident}' is a value, but the spec "
                                 f"gives the type {value!r}", param)
            if isinstance(value, ValueText):  # the file's own argument, in its scope
                value = self._file_constant(value.text)
            if value is None and default is not None:
                value = self.constant(default, f"default of template parameter '{ident}'")
            elif value is None:
                raise self.error(f"missing value for template parameter '{ident}' (give it "
                                 "in template_values / the spec)", param)
            self.bind(ident, ConstSym(ct.convert(Const(value, I32 if isinstance(value, int)
                                                       else ct.F32), t)))
            self.used.add(ident)

    def _bind_type_param(self, param, values: dict[str, int | str]) -> None:
        """``typename T``: the spec's ``templates`` type, else the default, else unbound
        until a parameter declared with ``T`` takes its argument's dtype."""
        ident = str(param.children[0])
        given = values.get(ident)
        default = param.children[1] if len(param.children) > 1 else None
        if isinstance(given, str):
            t = dtype_type(given) or ct.NAMED_TYPES.get(given) or self._file_type(given)
            if t is None:
                raise self.error(f"template type '{ident}' = {given!r} is neither a kir "
                                 "dtype nor a type of this file", param)
            self.bind(ident, TypeSym(t))
        elif default is not None:
            self.bind(ident, TypeSym(self.resolve_type_name(default).base))
        else:
            self.bind(ident, TypeSym(None, f"template type parameter '{ident}' has no type: "
                                     "give a dtype to an argument declared with it in the "
                                     f"spec, or templates = {{ {ident} = \"f32\" }}"))

    def _file_constant(self, text: str):
        """The value of the constant expression ``text`` (an instantiation's argument) in the
        file's scope, or None when it has none kir can read."""
        parsed = parse_expressions(text, self.program.type_names, self.program.template_names)
        if parsed is None or len(parsed.children) != 1:
            return None
        saved = self.offset
        try:
            return self.constant(parsed.children[0], "a template argument")
        except KirError:
            return None
        finally:
            self.offset = saved

    def _file_type(self, name: str):
        """The type ``name`` names in this file (a struct, a function object), or None."""
        if name not in self.program.type_names and name not in self.program.struct_units:
            return None
        try:
            return self.named_type(name, None)
        except KirError:
            return None

    def _deduce_from_spec(self, specs, ident: str) -> None:
        """Bind an unbound template type naming this parameter's type to the spec's dtype."""
        dtypes = self.args.dtypes if self.args is not None else {}
        for spec in specs.children:
            if spec.data != "type_word":
                continue
            for word in spec.children:
                sym = self.lookup(str(word)) if isinstance(word, Token) else None
                if isinstance(sym, TypeSym) and sym.type is None and dtypes.get(ident):
                    sym.type = dtype_type(dtypes[ident])

    def kernel_param(self, ptree, assigned: set[str]) -> list[Param]:
        specs, declarator, default = param_parts(ptree)
        if declarator is None:
            if self.resolve_specs(specs).base is None:
                return []
            raise self.error("unnamed kernel parameter", ptree)
        pointers, is_ref, ident, dims = self.split_declarator(declarator)
        self._deduce_from_spec(specs, ident)
        ctype = self.resolve_specs(specs)
        self.refuse_volatile_memory(bool(pointers), ident, ptree)
        if is_ref or dims:
            raise self.error("reference or array kernel parameters not supported", ptree,
                             UnsupportedError)
        if isinstance(ctype.base, StructType) and not pointers:
            return self.struct_kernel_param(ident, ctype.base, ident in assigned, ptree)
        if isinstance(ctype.base, FunctorStruct) and not pointers:  # data-free: no argument
            self.bind(ident, FunctorVal(ctype.base))
            return []
        view = ctype.base  # what the pointer sees: its elements, or structs of them
        if isinstance(view, StructType) and len(pointers) == 1:
            ctype = dataclasses.replace(ctype, base=self.struct_buffer_elem(ident, view, ptree))
        if isinstance(ctype.base, (StructType, CgType)) or ctype.base is AUTO:
            raise self.error(f"kernel parameter '{ident}' of type {ctype.base} not supported "
                             "(a spec describes buffers and scalars)", ptree, UnsupportedError)
        self.used.add(ident)
        if self._bind_absent(ident, bool(pointers), ctype, default, ptree):
            return []
        if not pointers:
            if ctype.base is None:
                raise self.error(f"parameter '{ident}' of type void", ptree)
            if ident in assigned:  # C passes by value: a modified parameter gets a local copy
                local = self.fresh(ident)
                self.prologue.append(Declare(local, ctype.base, Var(ident, ctype.base),
                                             loc=self.loc_of(ptree)))
                self.bind(ident, VarSym(local, ctype.base))
            else:
                self.bind(ident, VarSym(ident, ctype.base))
            return [Param(ident, ctype.base, loc=self.loc_of(ptree))]
        if len(pointers) == 1 and ctype.base is None:  # void*: raw bytes (the spec may say)
            view = ctype = dataclasses.replace(ctype, base=self._void_buffer_elem(ident))
        if len(pointers) > 1 or ctype.base is None:
            raise self.error(f"parameter '{ident}': only pointers to scalars or vectors are "
                             "supported", ptree, UnsupportedError)
        restrict = any(str(q.children[0]) in ("__restrict__", "__restrict", "restrict")
                       for q in pointers[0].children[1:])
        elem = ct.scalar_of(ctype.base)
        self.buffers[ident] = BufferInfo(elem, "global", ctype.const)
        sym = PtrSym(ident, view, offset_expr=Const(0, OFFSET_TYPE))
        if ident in assigned:
            sym.offset_var = self.fresh(ident + "_off")
            self.prologue.append(Declare(sym.offset_var, OFFSET_TYPE, Const(0, OFFSET_TYPE),
                                         loc=self.loc_of(ptree)))
        self.bind(ident, sym)
        return [Param(ident, PointerType(elem, "global", ctype.const, restrict),
                      loc=self.loc_of(ptree))]

    def _void_buffer_elem(self, ident: str) -> ScalarType:
        """A ``void*`` parameter's element type: the spec's dtype for it, else bytes
        (``const void* vx`` holding quantized blocks, read through casts)."""
        given = self.args.dtypes.get(ident) if self.args is not None else None
        return dtype_type(given) if given else U8

    def struct_buffer_elem(self, ident: str, t: StructType, ptree) -> ScalarType:
        """The element type of ``const Particle* parts``'s buffer: an array of structs whose
        members are all of one scalar type (scalars, vectors, one-dimensional arrays, nested
        such structs) is a buffer of that type, seen through the struct as
        ``reinterpret_cast<const Particle*>`` over it would be; the spec gives it as that
        type, as many values a struct as it has members."""
        elem, count = t.scalars()
        if elem is None:
            raise self.error(f"kernel parameter '{ident}': an array of {t}, whose members are "
                             "not all of one scalar type (kir reads an array of structs as a "
                             "buffer of its members' type); pass its members as separate "
                             "arrays, or make them all one type", ptree, UnsupportedError)
        if struct_size(t) != count * elem.nbytes:
            raise self.error(f"kernel parameter '{ident}': {t} is {struct_size(t)} bytes with "
                             f"padding after its {count} {elem} members (kir reads an array "
                             "of structs as a buffer of its members, without gaps)", ptree,
                             UnsupportedError)
        return elem

    def _bind_absent(self, ident: str, pointer: bool, ctype, default, ptree) -> bool:
        """Bind a parameter the kernel does not take at run time: a pointer the spec says is
        null, or a parameter with a default value the spec does not give. True if bound."""
        args = self.args
        if args is None:
            return False
        if ident in args.null:
            if not pointer:
                raise self.error(f"the spec says '{ident}' is null, but it is not a pointer",
                                 ptree)
            self.bind(ident, RefSym(NULL_POINTER))
            return True
        if ident in args.dtypes or default is None:
            return False
        stmts, value = self.capture(lambda: self.operand(default))
        if stmts:
            raise self.error(f"default of '{ident}' must be a constant (or give '{ident}' in "
                             "the spec)", default, UnsupportedError)
        if pointer:
            if value is not NULL_POINTER:
                raise self.error(f"parameter '{ident}' defaults to a pointer that is not null; "
                                 "give it in the spec", default, UnsupportedError)
            self.bind(ident, RefSym(NULL_POINTER))
            return True
        if not isinstance(value, Const) or not isinstance(ctype.base, ScalarType):
            raise self.error(f"default of '{ident}' must be a constant (or give '{ident}' in "
                             "the spec)", default, UnsupportedError)
        self.bind(ident, ConstSym(ct.convert(value, ctype.base)))
        return True
