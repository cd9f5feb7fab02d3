"""Lowering of CUDA statements (a mixin of the Lowerer; declarations: ``lower_decl``).

Loops get labels L0, L1, ... in the order they appear in the (inlined) kernel body. A C
``for`` becomes a kir ``For`` when it has one loop variable declared in its init, a
condition without side effects and an update that only assigns the loop variable; other
``for``s become a ``While`` (rejecting ``continue``, which would skip the update).
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_struct import StructArrVal
from kir.frontends.cuda.parser import normalize_name
from kir.frontends.cuda.pointer_choice import PointerChoice
from kir.frontends.cuda.values import (
    AUTO,
    ArrVal,
    MemRef,
    PtrSym,
    RefSym,
    StructVal,
    VarSym,
    carries,
)
from lark import Tree

from kir.errors import UnsupportedError
from kir.ir import (
    Assign,
    Binary,
    Block,
    Break,
    Cast,
    Const,
    Continue,
    Declare,
    Expr,
    For,
    If,
    Return,
    Select,
    Unary,
    Var,
    While,
)
from kir.ir.types import BOOL, I32, ScalarType, VectorType

MAX_NESTING = 1000  # statement levels (an `if` with a block counts two)
LOOPS = ("for_stmt", "while_stmt", "do_stmt")


def signed_step(var: str, type_, update: Expr) -> Expr:
    """A signed loop counter stepped by an unsigned amount (``i += blockDim.x``,
    ``i += warp.size()``: C computes ``(int)((unsigned)i + step)``) as ``i + (int)step``.
    The two are the same bits (addition modulo 2^32), and the second is the counted form
    rules recognize (``i = i + step``); any other update is returned as it is."""
    if not (isinstance(update, Cast) and update.type == type_ and isinstance(type_, ScalarType)
            and type_.is_int and type_.name.startswith("i")):
        return update
    total = update.value
    if not (isinstance(total, Binary) and total.op == "+" and isinstance(total.type, ScalarType)
            and total.type.name == "u" + type_.name[1:]):
        return update
    counter = Cast(Var(var, type_), total.type)
    if total.left == counter:
        amount = total.right
    elif total.right == counter:
        amount = total.left
    else:
        return update
    if isinstance(amount, Const) and isinstance(amount.value, int) \
            and 0 <= amount.value < 2 ** (type_.bits - 1):
        amount = Const(amount.value, type_)
    else:
        amount = Cast(amount, type_)
    return Binary("+", Var(var, type_), amount, type_)


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


_LOOPS = ("for_stmt", "range_for_stmt", "while_stmt")


def attach_unbraced_pragmas(stmts: list) -> list:
    """``for (...) #pragma unroll for (...) body`` without braces: the preprocessor's pragma
    statement parses as the outer loop's whole body and the inner loop as the statement
    after it. Give the outer loop both (the pragma and the loop it marks) as its body."""
    out: list = []
    for stmt in reversed(stmts):
        if (out and isinstance(stmt, Tree) and stmt.data in _LOOPS
                and pragma_value(stmt.children[-1])[0]):
            pragma = stmt.children[-1]
            body = Tree("compound", [pragma, out.pop(0)], pragma.meta)
            stmt = Tree(stmt.data, [*stmt.children[:-1], body], stmt.meta)
        out.insert(0, stmt)
    return out


class StmtMixin:
    """Statement lowering; emits into ``self.out``."""

    def lower_stmt_list(self, stmts: list) -> None:
        stmts = attach_unbraced_pragmas(stmts)
        unroll = None
        for k, stmt in enumerate(stmts):
            is_pragma, args = pragma_value(stmt)
            if is_pragma:
                unroll = 0 if args is None else self.constant(args.children[0], "unroll count")
                continue
            mark = len(self.out)
            try:
                self.lower_stmt(stmt, unroll)
            except PointerChoice as choice:  # a pointer into one of two buffers
                if choice.tried:
                    raise
                del self.out[mark:]
                if self.choose_pointer(stmts, k, choice):
                    return
                raise
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
            elif tree.data in ("for_stmt", "range_for_stmt"):
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
        if value_tree is not None and isinstance(fn.result, PtrSym):  # returns a pointer
            self.set_pointer(fn.result, self.pointer(value_tree), value_tree)
        elif value_tree is not None and isinstance(fn.result, StructVal):
            self.assign_struct(fn.result, self.struct_value(fn.result.type, value_tree),
                               value_tree)
        elif value_tree is not None and carries(fn.result_type, value := self.operand(
                value_tree)):
            self.return_carrier(fn, value, value_tree)
        elif value_tree is not None:
            value = self.rvalue_of(value, value_tree)
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

    def _s_namespace_alias(self, tree) -> None:
        """``namespace cg = cooperative_groups;`` in a function body (llm.c's kernels): the
        frontend reads cooperative groups as ``cg::`` already. Other aliases would rename
        names kir resolves by their last part, so they are refused."""
        alias, target = (str(t) for t in tree.children[-2:])
        if alias == "cg" and normalize_name(target + "::x") == "cg::x":
            return
        raise self.error(f"namespace alias '{alias} = {target}' inside a function not "
                         "supported (kir reads 'namespace cg = cooperative_groups' only; "
                         "qualify the names instead)", tree, UnsupportedError)

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
            self._lower_branch(then_tree if cond.value else else_tree)
            return
        then = self.block_of(then_tree)
        orelse = self.block_of(else_tree) if else_tree is not None else None
        self.emit(If(cond, then, orelse, loc=loc))

    def _s_if_constexpr_stmt(self, tree) -> None:
        """``if constexpr``: the condition is a constant, and only the branch it selects is
        lowered (C++ does not instantiate the other, which may not compile here)."""
        cond_tree, then_tree, else_tree = (tree.children[1:] + [None])[:3]
        self._lower_branch(then_tree if self.constant(cond_tree, "an 'if constexpr' condition")
                           else else_tree)

    def _lower_branch(self, live) -> None:
        """The one branch of an ``if`` decided while lowering, in its own scope."""
        if live is not None:
            self.push_scope()
            try:
                self.lower_stmt(live)
            finally:
                self.pop_scope()

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

    def _s_range_for_stmt(self, tree, unroll=None) -> None:
        """``for (T v : arr)`` / ``for (auto& v : arr)`` over an array of known size: a
        counted loop over its elements, ``v`` a copy of each or (a reference) the element
        itself."""
        _kw, specs, declarator, range_tree, body_tree = tree.children
        loc = self.cur_loc
        arr = self.operand(range_tree)
        if not isinstance(arr, ArrVal) and not isinstance(arr, StructArrVal):
            raise self.error("range-based for over something other than an array of known "
                             "size not supported", range_tree, UnsupportedError)
        sym = arr.sym
        count = sym.dims[arr.used]
        pointers, is_ref, ident, dims = self.split_declarator(declarator)
        if pointers or dims:
            raise self.error("range-based for variable must be a value or a reference",
                             declarator, UnsupportedError)
        t = self.resolve_specs(specs).base
        var = self.fresh("range_i")
        label = self.next_label()  # before the body's loops: labels follow the source
        fn = self.fn_stack[-1] if self.fn_stack else None
        self.push_scope()
        if fn:
            fn.loop_depth += 1
        try:
            def body() -> None:
                item = self.element(arr, Var(var, I32), tree)
                if is_ref or not isinstance(item, MemRef):
                    self.bind(ident, RefSym(item) if not isinstance(item, StructVal) else item)
                else:
                    value = self.value_of(item, tree)
                    value = value if t is AUTO else self.coerce(value, t, tree)
                    name = self.fresh(ident)
                    self.emit(Declare(name, value.type, value, loc=self.cur_loc))
                    self.bind(ident, VarSym(name, value.type))
                self.lower_stmt(body_tree)
            stmts, _ = self.capture(body)
        finally:
            if fn:
                fn.loop_depth -= 1
            self.pop_scope()
        self.emit(For(label, var, I32, Const(0, I32),
                      ct.binary("<", Var(var, I32), Const(count, I32)),
                      ct.binary("+", Var(var, I32), Const(1, I32)), Block(tuple(stmts)),
                      unroll=unroll, loc=loc))
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
                step = signed_step(var.name, var.type, update[0].value) if update \
                    else Var(var.name, var.type)
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
