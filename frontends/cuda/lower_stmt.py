"""Lowering of CUDA statements and declarations (a mixin of the Lowerer).

Loops get labels L0, L1, ... in the order they appear in the (inlined) kernel body. A C
``for`` becomes a kir ``For`` when it has one loop variable declared in its init, a
condition without side effects and an update that only assigns the loop variable; other
``for``s become a ``While`` (rejecting ``continue``, which would skip the update).
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_cg import Dim3Val
from kir.frontends.cuda.values import (
    AUTO,
    OFFSET_TYPE,
    ArraySym,
    ArrVal,
    BufferInfo,
    CgType,
    CgVal,
    ConstSym,
    PtrSym,
    PtrVal,
    StructType,
    StructVal,
    VarSym,
    count_of,
)
from lark import Tree

from kir.errors import UnsupportedError
from kir.ir import (
    Alloc,
    Assign,
    Binary,
    Block,
    Break,
    Cast,
    Const,
    Continue,
    Declare,
    For,
    If,
    MakeVector,
    Return,
    Select,
    Store,
    Unary,
    Var,
    While,
)
from kir.ir.types import BOOL, I8, I32, U8, VectorType

MAX_NESTING = 1000  # statement levels (an `if` with a block counts two)
LOOPS = ("for_stmt", "while_stmt", "do_stmt")


def contains(tree, kinds: tuple[str, ...], stop: tuple[str, ...] = ()) -> bool:
    """Whether ``tree`` has a subtree whose rule is in ``kinds`` (not looking inside
    subtrees in ``stop``). Iterative."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, Tree):
            continue
        if node.data in kinds:
            return True
        if node is not tree and node.data in stop:
            continue
        stack.extend(node.children)
    return False


def closed(expr) -> bool:
    """Whether ``expr`` is built from constants only (a const variable initialised with it
    can be used as a constant)."""
    return all(isinstance(n, (Const, Binary, Unary, Cast, Select)) for n in expr.walk())


def pragma_value(tree) -> tuple[bool, object]:
    """(True, args tree) when ``tree`` is the statement ``__pragma_unroll__(...)``."""
    if isinstance(tree, Tree) and tree.data == "expr_stmt":
        call = tree.children[0]
        if (isinstance(call, Tree) and call.data == "call" and isinstance(call.children[0], Tree)
                and call.children[0].data == "name"
                and str(call.children[0].children[0]) == "__pragma_unroll__"):
            return True, call.children[1]
    return False, None


class StmtMixin:
    """Statement lowering; emits into ``self.out``."""

    def lower_stmt_list(self, stmts: list) -> None:
        unroll = None
        for k, stmt in enumerate(stmts):
            is_pragma, args = pragma_value(stmt)
            if is_pragma:
                unroll = 0 if args is None else self.constant(args.children[0], "unroll count")
                continue
            self.lower_stmt(stmt, unroll)
            unroll = None
            fn = self.fn_stack[-1] if self.fn_stack else None
            if (fn is not None and fn.done and k + 1 < len(stmts)
                    and contains(stmt, ("return_stmt",))):
                # Statements after a possible early return run only if it did not happen.
                rest, _ = self.capture(lambda: self.lower_stmt_list(stmts[k + 1:]))
                if rest:
                    self.emit(If(Unary("!", Var(fn.done, BOOL), BOOL), Block(tuple(rest))))
                return

    def lower_stmt(self, tree, unroll=None) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"statements nested more than {MAX_NESTING} deep", tree)
        saved = self.cur_loc
        self.cur_loc = self.loc_of(tree)
        try:
            handler = getattr(self, "_s_" + tree.data, None)
            if handler is None:
                self.operand(tree, discard=True)
            elif tree.data == "for_stmt":
                handler(tree, unroll)
            else:
                handler(tree)
        finally:
            self.depth -= 1
            self.cur_loc = saved

    def _s_compound(self, tree) -> None:
        self.push_scope()
        try:
            self.lower_stmt_list(tree.children)
        finally:
            self.pop_scope()

    def _s_expr_stmt(self, tree) -> None:
        self.operand(tree.children[0], discard=True)

    def _s_empty_stmt(self, tree) -> None:
        pass

    def _s_break_stmt(self, tree) -> None:
        self.emit(Break(loc=self.cur_loc))

    def _s_continue_stmt(self, tree) -> None:
        self.emit(Continue(loc=self.cur_loc))

    def _s_return_init(self, tree) -> None:
        """``return {a, b};``: a struct or vector built from the list."""
        fn = self.fn_stack[-1] if self.fn_stack else None
        if fn is None or fn.result is None:
            raise self.error("'return {...}' outside a function returning a value", tree)
        items = [c for c in tree.children[1:] if c is not None]
        if isinstance(fn.result, StructVal):
            self.assign_struct(fn.result, self.struct_from_list(fn.result.type, items, tree),
                               tree)
        else:
            value = self._vector_init(fn.result_type, Tree("init_list", items), tree)
            self.emit(Assign(fn.result, value, loc=self.cur_loc))
        self._returned(fn)

    def _returned(self, fn) -> None:
        if fn.done:
            self.emit(Assign(fn.done, Const(True, BOOL), loc=self.cur_loc))
            if fn.loop_depth:
                self.emit(Break(loc=self.cur_loc))

    def _s_return_stmt(self, tree) -> None:
        value_tree = tree.children[1]
        if not self.fn_stack:
            if value_tree is not None:
                raise self.error("a __global__ function cannot return a value", tree)
            self.emit(Return(loc=self.cur_loc))
            return
        fn = self.fn_stack[-1]
        if value_tree is not None and isinstance(fn.result, StructVal):
            self.assign_struct(fn.result, self.struct_value(fn.result.type, value_tree),
                               value_tree)
        elif value_tree is not None:
            value = self.rvalue(value_tree)
            if fn.result is None:
                raise self.error(f"void function '{fn.name}' returns a value", tree)
            self.emit(Assign(fn.result, self.coerce(value, fn.result_type, value_tree),
                             loc=self.cur_loc))
        elif fn.result is not None:
            raise self.error(f"function '{fn.name}' must return a value", tree)
        if fn.done:
            self.emit(Assign(fn.done, Const(True, BOOL), loc=self.cur_loc))
            if fn.loop_depth:
                self.emit(Break(loc=self.cur_loc))

    def _unsupported(self, what: str, tree) -> None:
        raise self.error(f"{what} not supported", tree, UnsupportedError)

    def _s_typedef_stmt(self, tree) -> None:
        self.declare_alias(tree)

    def _s_alias_decl(self, tree) -> None:
        self.declare_alias(tree)

    def _s_using_namespace(self, tree) -> None:
        pass  # names are resolved by their last part anyway

    def _s_static_assert_stmt(self, tree) -> None:
        pass  # checked by the C++ compiler; nothing happens at run time

    def _s_goto_stmt(self, tree) -> None:
        self._unsupported("goto", tree)

    def _s_label_stmt(self, tree) -> None:
        self._unsupported("labels (goto targets)", tree)

    def _s_case_stmt(self, tree) -> None:  # switches: kir.frontends.cuda.lower_switch
        self._unsupported("case labels outside a switch's own block", tree)

    # ----------------------------------------------------------------- control flow

    def block_of(self, tree) -> Block:
        """Lower one statement (usually a compound) into its own Block and scope."""
        return self.scoped_block(lambda: self.lower_stmt(tree))

    def scoped_block(self, lower) -> Block:
        """What ``lower()`` emits, in a scope of its own, as one Block."""
        self.push_scope()
        try:
            stmts, _ = self.capture(lower)
        finally:
            self.pop_scope()
        return Block(tuple(stmts))

    def condition(self, tree) -> tuple[list, object]:
        stmts, (value, _decided) = self.capture(lambda: self.truth_of(tree))
        return stmts, value

    def _s_if_stmt(self, tree) -> None:
        cond_tree, then_tree, else_tree = (tree.children[1:] + [None])[:3]
        loc = self.cur_loc
        stmts, (cond, decided) = self.capture(lambda: self.truth_of(cond_tree))
        self.out.extend(stmts)
        if decided:  # a pointer test: only the branch it selects is lowered
            live = then_tree if cond.value else else_tree
            if live is not None:
                self.push_scope()
                try:
                    self.lower_stmt(live)
                finally:
                    self.pop_scope()
            return
        then = self.block_of(then_tree)
        orelse = self.block_of(else_tree) if else_tree is not None else None
        self.emit(If(cond, then, orelse, loc=loc))

    def loop_body(self, tree) -> Block:
        fn = self.fn_stack[-1] if self.fn_stack else None
        if fn:
            fn.loop_depth += 1
        try:
            return self.block_of(tree)
        finally:
            if fn:
                fn.loop_depth -= 1

    def after_loop(self, tree) -> None:
        """Inside a device function's loop, a return in an inner loop leaves the outer."""
        fn = self.fn_stack[-1] if self.fn_stack else None
        if fn and fn.done and fn.loop_depth and contains(tree, ("return_stmt",)):
            self.emit(If(Var(fn.done, BOOL), Block((Break(loc=self.cur_loc),))))

    def _s_while_stmt(self, tree) -> None:
        _kw, cond_tree, body_tree = tree.children
        loc = self.cur_loc
        stmts, cond = self.condition(cond_tree)
        body = self.loop_body(body_tree)
        if stmts:
            # `while (i-- > 0)`: evaluate the condition's effects at the top of each pass.
            exit_ = If(Unary("!", cond, BOOL) if cond.type == BOOL else cond,
                       Block((Break(loc=loc),)))
            body = Block(tuple(stmts) + (exit_,) + body.stmts)
            cond = Const(True, BOOL)
        self.emit(While(cond, body, True, loc=loc))
        self.after_loop(tree)

    def _s_do_stmt(self, tree) -> None:
        _do, body_tree, _while, cond_tree = tree.children
        loc = self.cur_loc
        body = self.loop_body(body_tree)
        stmts, cond = self.condition(cond_tree)
        if stmts:
            raise self.error("do/while condition with side effects", cond_tree,
                             UnsupportedError)
        self.emit(While(cond, body, False, loc=loc))
        self.after_loop(tree)

    def _s_for_stmt(self, tree, unroll=None) -> None:
        _kw, init_tree, cond_tree, update_tree, body_tree = tree.children
        loc = self.cur_loc
        self.push_scope()
        try:
            init, _ = self.capture(lambda: self.lower_stmt(init_tree))
            cond_stmts, cond = ([], Const(True, BOOL)) if cond_tree is None else \
                self.condition(cond_tree)
            update, _ = ([], None) if update_tree is None else self.capture(
                lambda: self.operand(update_tree, discard=True))
            var = init[0] if len(init) == 1 and isinstance(init[0], Declare) else None
            canonical = (var is not None and var.init is not None and not cond_stmts
                         and not isinstance(var.type, VectorType)
                         and all(isinstance(s, Assign) and s.name == var.name for s in update)
                         and len(update) <= 1)
            if canonical:
                label = self.next_label()
                body = self.loop_body(body_tree)
                step = update[0].value if update else Var(var.name, var.type)
                self.emit(For(label, var.name, var.type, var.init, cond, step, body,
                              unroll=unroll, loc=loc))
            else:
                if update and contains(body_tree, ("continue_stmt",), LOOPS):
                    raise self.error("'continue' in a for loop that is not in canonical "
                                     "form (one loop variable declared in its init)", tree,
                                     UnsupportedError)
                if cond_stmts:
                    raise self.error("for-loop condition with side effects", cond_tree,
                                     UnsupportedError)
                body = self.loop_body(body_tree)
                self.out.extend(init)
                self.emit(While(cond, Block(body.stmts + tuple(update)), True, loc=loc))
        finally:
            self.pop_scope()
        self.after_loop(tree)

    # ----------------------------------------------------------------- declarations

    def _s_declaration(self, tree) -> None:
        specs, *inits = tree.children
        ctype = self.resolve_specs(specs)
        quals = self.last_qualifiers
        if "__constant__" in quals:
            self._unsupported("__constant__ memory", tree)
        for init_decl in inits:
            if init_decl.data == "brace_declarator":  # T x{a, b}: list-initialization
                declarator, *items = init_decl.children
                init = Tree("init_list", [i for i in items if i is not None], init_decl.meta)
            else:
                declarator, init = (init_decl.children + [None])[:2]
            self.declare(ctype, quals, declarator, init, init_decl)

    def declare(self, ctype, quals: set, declarator, init, tree) -> None:
        pointers, is_ref, ident, dims = self.split_declarator(declarator)
        shared = "__shared__" in quals
        base = ctype.base
        if base is None and not pointers:
            raise self.error(f"variable '{ident}' of type void", tree)
        if is_ref:
            return self._declare_reference(ident, init, tree, "const" in quals, base)
        if base is AUTO and not pointers and not dims:
            if init is None or isinstance(init, Tree) and init.data == "init_list":
                raise self.error(f"'auto {ident}' needs an initializer expression", tree)
            return self._declare_auto(ident, quals, init, tree)
        if base is AUTO:
            self._unsupported("'auto' pointers and arrays", tree)
        if isinstance(base, CgType) and not pointers:
            return self._declare_group(ident, base, dims, init, tree)
        if isinstance(base, StructType) and not pointers:
            return self.declare_struct(ident, base, dims, quals, init, tree)
        if isinstance(base, StructType):
            self._unsupported(f"pointers to structs ({base})", tree)
        if pointers:
            if shared or dims:
                self._unsupported("arrays of pointers / shared pointers", tree)
            if len(pointers) > 1:
                self._unsupported("pointers to pointers", tree)
            sym = PtrSym(None, base if base is not None else I32, self.fresh(ident))
            decl_init = None
            if init is not None:
                p = self.pointer(init)
                if ct.scalar_of(sym.view) in (I8, U8):
                    self.byte_pool_used(p.root, init)  # a byte pointer kept
                sym.root = p.root
                self.check_view(sym.view, p.root, tree)
                decl_init = ct.convert(p.offset, OFFSET_TYPE)
            self.emit(Declare(sym.offset_var, OFFSET_TYPE, decl_init, loc=self.cur_loc))
            self.bind(ident, sym)
            return
        if dims or shared:
            return self._declare_array(ident, base, dims, quals, init, tree)
        if init is not None and isinstance(init, Tree) and init.data == "init_list":
            value = self._vector_init(base, init, tree)
        else:
            value = self.rvalue(init) if init is not None else None
            if value is not None:
                value = self.coerce(value, base, init)
        if value is not None and quals & {"const", "constexpr"} and closed(value):
            self.bind(ident, ConstSym(value))
            return
        name = self.fresh(ident)
        self.emit(Declare(name, base, value, loc=self.cur_loc))
        self.bind(ident, VarSym(name, base))

    def _declare_reference(self, ident: str, init, tree, const: bool, base) -> None:
        """``T& r = lvalue;``: ``r`` names the lvalue itself (a local, or the buffer or array
        element chosen now); a const reference to a value holds a copy."""
        if init is None:
            raise self.error(f"reference '{ident}' must be initialized", tree)
        if isinstance(init, Tree) and init.data == "name":
            sym = self.lookup(str(init.children[0]))
            if isinstance(sym, VarSym):
                self.bind(ident, sym)
                return
        value = self.operand(init)
        if isinstance(value, (StructVal, CgVal)):
            self.bind(ident, value)
            return
        bound = self.reference_to(value, init, ident, None, const,
                                  None if base is AUTO else base)
        if isinstance(bound, tuple):  # a const reference to a temporary: a copy
            expr, t = bound
            name = self.fresh(ident)
            self.emit(Declare(name, t, expr, loc=self.cur_loc))
            self.bind(ident, VarSym(name, t))
        else:
            self.bind(ident, bound)

    def _declare_auto(self, ident: str, quals: set, init, tree) -> None:
        value = self.operand(init)
        if isinstance(value, (CgVal, Dim3Val)):
            self.bind(ident, value)
            return
        if isinstance(value, StructVal):
            self.bind(ident, self.struct_local(value.type, ident, value, tree))
            return
        if isinstance(value, (PtrVal, ArrVal)):
            p = self.as_pointer(value, init)
            sym = PtrSym(p.root, p.view, self.fresh(ident))
            self.emit(Declare(sym.offset_var, OFFSET_TYPE, ct.convert(p.offset, OFFSET_TYPE),
                              loc=self.cur_loc))
            self.bind(ident, sym)
            return
        expr = self._value(value, init)
        if quals & {"const", "constexpr"} and closed(expr):
            self.bind(ident, ConstSym(expr))
            return
        name = self.fresh(ident)
        self.emit(Declare(name, expr.type, expr, loc=self.cur_loc))
        self.bind(ident, VarSym(name, expr.type))

    def _declare_group(self, ident: str, t, dims: list, init, tree) -> None:
        if dims:
            self._unsupported("arrays of cooperative groups", tree)
        if init is None:
            value = CgVal(t) if t.kind in ("plus", "greater", "less") else None
        else:
            value = self.operand(init)
        if not isinstance(value, CgVal):
            raise self.error(f"'{ident}' must be initialized with a {t} (e.g. "
                             "cg::this_thread_block())", tree)
        if t.kind not in ("group", value.type.kind) or t.size and t.size != value.type.size:
            raise self.error(f"'{ident}' is a {t} but is initialized with a {value.type}", tree)
        self.bind(ident, value)

    def _vector_init(self, base, init, tree):
        items = [self.rvalue(c) for c in init.children if c is not None]
        if not isinstance(base, VectorType):
            if len(items) != 1:
                raise self.error("braced initializer for a scalar", tree)
            return self.coerce(items[0], base, tree)
        if len(items) > base.count:
            raise self.error(f"too many initializers for {base}", tree)
        elems = [self.coerce(v, base.elem, tree) for v in items]
        elems += [ct.convert(Const(0, I32), base.elem)] * (base.count - len(elems))
        return MakeVector(tuple(elems), base)

    def _declare_array(self, ident: str, base, dims: list, quals: set, init, tree) -> None:
        shared = "__shared__" in quals
        elem = ct.scalar_of(base)
        name = self.fresh(ident)
        if shared and "extern" in quals:
            if len(dims) != 1 or dims[0] is not None:
                raise self.error("extern __shared__ arrays must be declared as name[]", tree)
            if self.dynamic_shared is not None:
                first = self.dynamic_shared
                if first.elem != base:
                    self._unsupported("several extern __shared__ arrays of different types",
                                      tree)
                self.bind(ident, first)
                return
            size = self.launch.shared_bytes // elem.nbytes
            sym = ArraySym(name, base, (size // count_of(base),), "shared")
            self.dynamic_shared = sym
            self.prologue.append(Alloc(name, elem, size, "shared", True, loc=self.cur_loc))
        else:
            sizes = []
            for d in dims:
                if d is None:
                    raise self.error(f"array '{ident}' needs a size", tree)
                n = self.constant(d, "array size", variable_length=True)
                if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                    raise self.error(f"array size {n} of '{ident}' must be a positive integer",
                                     d)
                sizes.append(n)
            total = count_of(base)
            for n in sizes:
                total *= n
            space = "shared" if shared else "local"
            sym = ArraySym(name, base, tuple(sizes), space)
            alloc = Alloc(name, elem, total, space, False, loc=self.cur_loc)
            (self.prologue if shared else self.out).append(alloc)
        self.buffers[name] = BufferInfo(elem, sym.space)
        self.bind(ident, sym)
        if init is not None:
            if shared:
                raise self.error("__shared__ variables cannot have an initializer", tree)
            self._array_init(sym, init, tree)

    def _array_init(self, sym: ArraySym, init, tree) -> None:
        if not (isinstance(init, Tree) and init.data == "init_list"):
            raise self.error("array initializer must be a braced list", tree)
        flat = []
        stack = [init]
        while stack:  # flatten nested braces in order
            node = stack.pop()
            if isinstance(node, Tree) and node.data == "init_list":
                stack.extend(reversed([c for c in node.children if c is not None]))
            else:
                flat.append(self.rvalue(node))
        count = 1
        for n in sym.dims:
            count *= n
        if len(flat) > count:
            raise self.error("too many initializers", tree)
        zero = ct.convert(Const(0, I32), ct.scalar_of(sym.elem))
        step = count_of(sym.elem)
        for i in range(count):
            value = self.coerce(flat[i], sym.elem, tree) if i < len(flat) else (
                zero if step == 1 else MakeVector((zero,) * step, sym.elem))
            self.emit(Store(sym.name, Const(i * step, I32), value, loc=self.cur_loc))

    def check_view(self, view, root: str, tree) -> None:
        if ct.scalar_of(view) != self.buffers[root].elem:
            raise self.error(f"a {ct.scalar_of(view)} pointer into {self.buffers[root].elem} "
                             f"buffer '{root}'", tree, UnsupportedError)
