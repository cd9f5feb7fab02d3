"""The Lowerer: parse trees of one CUDA kernel (and the ``__device__`` functions it calls)
to a :class:`kir.ir.Kernel`.

Expression, call and statement lowering live in mixins (``lower_expr``, ``lower_calls``,
``lower_stmt``); this module holds the state they share: scopes and unique local names,
the statement list being emitted, source locations, type resolution, the kernel's
parameters and the inlining of device functions.
"""

from __future__ import annotations

from typing import Callable

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_assign import AssignMixin
from kir.frontends.cuda.lower_calls import CallMixin
from kir.frontends.cuda.lower_expr import ExprMixin
from kir.frontends.cuda.lower_stmt import StmtMixin
from kir.frontends.cuda.lower_switch import SwitchMixin
from kir.frontends.cuda.parser import SourceMap, error
from kir.frontends.cuda.values import (
    OFFSET_TYPE,
    BufferInfo,
    ConstSym,
    FnContext,
    FunctionSym,
    PtrSym,
    PtrVal,
    VarSym,
)
from lark import Token, Tree

from kir.errors import KirError, Loc, UnsupportedError
from kir.ir import Block, Const, Declare, Kernel, Launch, Param, Stmt, Var
from kir.ir.types import BOOL, I32, SCALARS, PointerType

ASSIGNING = ("assign", "pre_inc", "pre_dec", "post_inc", "post_dec")


def split_function(tree) -> tuple:
    """(template, specs, pointer trees, name token, params, body) of a function_def."""
    kids = tree.children
    return kids[0], kids[1], kids[2:-3], kids[-3], kids[-2], kids[-1]


def assigned_names(tree) -> set[str]:
    """Names assigned directly (``x = ...``, ``x += ...``, ``x++``) anywhere in ``tree``."""
    names = set()
    for sub in tree.iter_subtrees():
        if sub.data in ASSIGNING:
            target = sub.children[0] if sub.data in ("assign", "post_inc", "post_dec") \
                else sub.children[-1]
            if isinstance(target, Tree) and target.data == "name":
                names.add(str(target.children[0]))
    return names


class Lowerer(ExprMixin, AssignMixin, CallMixin, SwitchMixin, StmtMixin):
    """Lowers one kernel. ``functions`` maps device function names to their overloads;
    ``globals_`` holds top-level constants; ``typedefs`` scalar typedefs."""

    def __init__(self, src: SourceMap, functions: dict[str, list[FunctionSym]],
                 globals_: dict[str, ConstSym], typedefs: dict[str, object],
                 launch: Launch) -> None:
        self.src = src
        self.functions = functions
        self.typedefs = typedefs
        self.launch = launch
        self.scopes: list[dict[str, object]] = [dict(globals_)]
        self.used: set[str] = set()
        self.out: list[Stmt] = []
        self.prologue: list[Stmt] = []
        self.buffers: dict[str, BufferInfo] = {}
        self.fn_stack: list[FnContext] = []
        self.labels = 0
        self.depth = 0
        self.offset = 0  # text offset that tree positions are relative to
        self.cur_loc: Loc | None = None
        self.dynamic_shared = None
        self.template_types: set[str] = set()
        self.last_qualifiers: set[str] = set()

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

    # --------------------------------------------------------------------- types

    def resolve_words(self, words: list[str], tree):
        for w in words:
            if w in ct.UNSUPPORTED_TYPES:
                raise self.error(f"{ct.UNSUPPORTED_TYPES[w]} not supported", tree,
                                 UnsupportedError)
            if w in self.template_types:
                raise self.error(f"template type parameter '{w}' has no type: give it one "
                                 f"in the spec, templates = {{ {w} = \"f32\" }}", tree)
        named = [w for w in words if w in self.typedefs or w in ct.NAMED_TYPES]
        if named:
            if len(words) != 1:
                raise self.error(f"conflicting type specifiers '{' '.join(words)}'", tree)
            return self.typedefs.get(named[0], ct.NAMED_TYPES.get(named[0]))
        if not words:
            raise self.error("missing type", tree)
        result = ct.combine_type_words(words)
        if isinstance(result, str):
            if result in ("long double",):
                raise self.error("long double not supported", tree, UnsupportedError)
            if result.startswith("conflicting"):
                raise self.error(result, tree)
            raise self.error(f"unknown type '{result}'", tree)
        return result

    def resolve_specs(self, specs, offset: int | None = None) -> ct.CType:
        """The CType of ``decl_specs``; qualifiers go to ``self.last_qualifiers``."""
        saved = self.offset
        if offset is not None:
            self.offset = offset
        try:
            words, quals = [], set()
            for spec in specs.children:
                if spec.data == "launch_bounds":
                    continue
                word = str(spec.children[0])
                (quals.add if spec.data == "qualifier" else words.append)(word)
            self.last_qualifiers = quals
            base = self.resolve_words(words, specs)
            return ct.CType(base, 0, "const" in quals or "constexpr" in quals)
        finally:
            self.offset = saved

    def resolve_type_name(self, tree) -> ct.CType:
        specs, *pointers = tree.children
        base = self.resolve_specs(specs)
        return ct.CType(base.base, len(pointers), base.const)

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

    def lower_kernel(self, tree, offset: int, template_values: dict[str, int]) -> Kernel:
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
        return Kernel(str(ident), tuple(kparams), Block(stmts, loc=self.loc_of(body)),
                      self.launch)

    def bind_template(self, template, values: dict[str, int]) -> None:
        for param in template.children:
            if param.data == "template_type":
                ident = str(param.children[0])
                given = values.get(ident)
                if isinstance(given, str) and given in SCALARS:  # spec: templates T = "f16"
                    self.typedefs[ident] = SCALARS[given]
                else:
                    self.template_types.add(ident)
                continue
            specs, ident = param.children[0], str(param.children[1])
            default = param.children[2] if len(param.children) > 2 else None
            t = self.resolve_specs(specs).base
            if ident in values:
                value = values[ident]
            elif default is not None:
                value = self.constant(default, f"default of template parameter '{ident}'")
            else:
                raise self.error(f"missing value for template parameter '{ident}' (give it "
                                 "in template_values / the spec)", param)
            self.bind(ident, ConstSym(ct.convert(Const(value, I32 if isinstance(value, int)
                                                       else ct.F32), t)))
            self.used.add(ident)

    def kernel_param(self, ptree, assigned: set[str]) -> list[Param]:
        # `declarator?` in the grammar: an unnamed parameter has no placeholder child.
        specs, declarator = ptree.children[0], next(iter(ptree.children[1:]), None)
        ctype = self.resolve_specs(specs)
        if declarator is None:
            if ctype.base is None:
                return []
            raise self.error("unnamed kernel parameter", ptree)
        pointers, is_ref, ident, dims = self.split_declarator(declarator)
        if is_ref or dims:
            raise self.error("reference or array kernel parameters not supported", ptree,
                             UnsupportedError)
        self.used.add(ident)
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
            return [Param(ident, ctype.base)]
        if len(pointers) > 1 or ctype.base is None:
            raise self.error(f"parameter '{ident}': only pointers to scalars or vectors are "
                             "supported", ptree, UnsupportedError)
        restrict = any(str(q.children[0]) in ("__restrict__", "__restrict", "restrict")
                       for q in pointers[0].children[1:])
        elem = ct.scalar_of(ctype.base)
        self.buffers[ident] = BufferInfo(elem, "global", ctype.const)
        sym = PtrSym(ident, ctype.base, offset_expr=Const(0, OFFSET_TYPE))
        if ident in assigned:
            sym.offset_var = self.fresh(ident + "_off")
            self.prologue.append(Declare(sym.offset_var, OFFSET_TYPE, Const(0, OFFSET_TYPE),
                                         loc=self.loc_of(ptree)))
        self.bind(ident, sym)
        return [Param(ident, PointerType(elem, "global", ctype.const, restrict))]

    # -------------------------------------------------------------- device functions

    def function_for(self, name: str, nargs: int, tree) -> FunctionSym:
        for fn in self.functions[name]:
            params = split_function(fn.tree)[4]
            count = len(params.children) if params is not None else 0
            if count == 1 and len(params.children[0].children) < 2:
                count = 0  # f(void)
            if count == nargs:
                return fn
        raise self.error(f"no overload of '{name}' takes {nargs} arguments", tree)

    def bind_argument(self, ptree, atree, offset: int, fname: str):
        """Evaluate one call argument (in the caller's scope) for parameter ``ptree``."""
        specs, declarator = ptree.children
        ctype = self.resolve_specs(specs, offset)
        saved = self.offset
        self.offset = offset
        try:
            pointers, is_ref, ident, dims = self.split_declarator(declarator)
        finally:
            self.offset = saved
        if is_ref:
            if not (isinstance(atree, Tree) and atree.data == "name"):
                raise self.error(f"argument for reference parameter '{ident}' of '{fname}' "
                                 "must be a local variable", atree, UnsupportedError)
            sym = self.lookup(str(atree.children[0]))
            if not isinstance(sym, VarSym):
                raise self.error(f"argument for reference parameter '{ident}' must be a "
                                 "local variable", atree, UnsupportedError)
            return ident, sym
        if pointers or dims:
            p = self.pointer(atree)
            return ident, PtrVal(p.root, p.offset, ctype.base or p.view)
        value = self.coerce(self.rvalue(atree), ctype.base, atree)
        return ident, (value, ctype.base)

    def inline_body(self, fn: FunctionSym, ret_type, bindings: list, body, call_tree):
        """Emit the body of ``fn`` with parameters bound; return its result value."""
        returns = sum(1 for t in body.iter_subtrees() if t.data == "return_stmt")
        last = body.children[-1] if body.children else None
        single_exit = returns == 0 or (returns == 1 and isinstance(last, Tree)
                                       and last.data == "return_stmt")
        result = self.fresh(f"{fn.name}_ret") if ret_type is not None else None
        done = None if single_exit else self.fresh(f"{fn.name}_done")
        if result:
            self.emit(Declare(result, ret_type, loc=self.cur_loc))
        if done:
            self.emit(Declare(done, BOOL, Const(False, BOOL), loc=self.cur_loc))
        scope: dict[str, object] = {}
        for ident, value in bindings:
            if isinstance(value, (VarSym, PtrSym)):
                scope[ident] = value
            elif isinstance(value, PtrVal):
                var = self.fresh(ident)
                self.emit(Declare(var, OFFSET_TYPE, ct.convert(value.offset, OFFSET_TYPE),
                                  loc=self.cur_loc))
                scope[ident] = PtrSym(value.root, value.view, var)
            else:
                expr, t = value
                var = self.fresh(ident)
                self.emit(Declare(var, t, expr, loc=self.cur_loc))
                scope[ident] = VarSym(var, t)
        saved = (self.scopes, self.offset, self.cur_loc)
        self.scopes = [self.scopes[0], scope]
        self.offset = fn.offset
        self.fn_stack.append(FnContext(fn.name, result, ret_type, done))
        try:
            self.lower_stmt_list(body.children)
        finally:
            self.fn_stack.pop()
            self.scopes, self.offset, self.cur_loc = saved
        if result is None:
            return Const(0, I32)
        return Var(result, ret_type)
