"""Inlining ``__device__`` function calls (a mixin of the Lowerer).

A call is lowered in three steps: its arguments are evaluated in the caller's scope, in
order; the overload is picked by argument count (default arguments fill the rest) and, among
overloads of one count, by argument types; then the callee's scope is built — ``template``
parameters from explicit arguments (``f<float, 4>(x)``), deduced from the arguments' types
or their defaults; parameters bound by value (a fresh local), by reference (the caller's
lvalue: a local, a buffer or array element whose index is fixed at the call, a struct) or
as pointers — and the body is lowered there. The call's value is a fresh result variable
(one per field for a struct).
"""

from __future__ import annotations

from dataclasses import dataclass

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_lambda import LambdaVal
from kir.frontends.cuda.straight_line import constant_of
from kir.frontends.cuda.lockstep import VolatilePtr
from kir.frontends.cuda.values import (
    LocalAddr,
    carries,
    FunctorStruct,
    FunctorVal,
    NULL_POINTER,
    OFFSET_TYPE,
    ArrVal,
    CgType,
    CgVal,
    ConstSym,
    FnContext,
    FunctionName,
    FunctionSym,
    MemRef,
    NullVal,
    PtrSym,
    PtrVal,
    RefSym,
    StructType,
    StructVal,
    TemplateName,
    TypeSym,
    VarSym,
)
from lark import Token, Tree

from kir.errors import KirError, UnsupportedError
from kir.ir import Component, Const, Declare, Expr, Var
from kir.ir.types import BOOL, I32, ScalarType, VectorType


@dataclass(frozen=True)
class ParamInfo:
    """A function parameter: name (None if unnamed), base type, whether it is a pointer (or
    array), a reference, const, and its default initializer tree (or None)."""

    ident: str | None
    base: object
    pointer: bool
    is_ref: bool
    const: bool
    default: object
    tree: object
    volatile: bool = False  # a volatile pointer (frontends/cuda/lockstep.py)


class InlineMixin:
    """Device function calls; relies on the Lowerer for scopes, types and emission."""

    def inline_call(self, name: str, arg_trees: list, tree, discard: bool, targs=None,
                    bound: dict | None = None, args: list | None = None, prologue=None):
        """Inline a ``__device__`` function call; its value is a fresh result variable.
        ``bound`` names the callee sees besides its parameters (a function object's
        template parameters, a member function's object); ``args`` the arguments when
        the caller has evaluated them already (an operator's operands); ``prologue(fn)``
        runs in the callee's scope before its body (a constructor's initializer list).
        A call that computes a constant from constants (``div_up(D, 4)``, a ``constexpr``
        function sizing an array or bounding a loop) is that constant, as C++ evaluates it
        at compile time (:func:`kir.frontends.cuda.straight_line.constant_of`)."""
        made, result = self.capture(lambda: self._inline(
            name, arg_trees, tree, discard, targs, bound, args, prologue))
        if made and isinstance(result, Expr):
            folded = constant_of(made, result)
            if folded is not None:
                return folded
        self.out.extend(made)
        return result

    def _inline(self, name: str, arg_trees: list, tree, discard: bool, targs, bound, args,
                prologue):
        from kir.frontends.cuda.lower import returns_reference, split_function

        if any(ctx.name == name for ctx in self.fn_stack):
            raise self.error(f"recursion ('{name}' calls itself) not supported", tree,
                             UnsupportedError)
        if args is None:
            args = [self.operand(a) for a in arg_trees]
        given = list(targs) if isinstance(targs, tuple) else [
            (self.template_arg(a), a) for a in
            (targs.children if targs is not None else []) if a is not None]
        fn = self.function_for(name, args, arg_trees, tree, bound)
        template, specs, pointers, _ident, params, body = split_function(fn.tree)
        if template is None and targs is not None:
            raise self.error(f"'{name}' is not a template", tree)
        param_trees = self.param_list(params)
        caller = (self.scopes, self.offset, self.cur_loc)
        callee: dict[str, object] = dict(bound or {})
        # errors binding the template arguments are the call's: located there, not in the
        # callee's text (whose offset the parameters' trees need)
        self.cur_loc = self.loc_of(tree)
        self.scopes, self.offset = [self.scopes[0], callee], fn.offset
        defaults = []
        try:
            if template is not None:
                self._bind_function_template(name, template, given, param_trees, args, tree)
            ret = self.resolve_specs(specs)
            if pointers and (len(pointers) > 1 or not isinstance(
                    ret.base, (ScalarType, VectorType))):
                raise self.error(f"__device__ function '{name}' returns a pointer to "
                                 f"{'a pointer' if len(pointers) > 1 else ret.base}", tree,
                                 UnsupportedError)
            infos = [self.param_info(p) for p in param_trees]
            for info in infos[len(args):]:
                defaults.append(self.bind_argument(info, self.operand(info.default),
                                                   info.default, name))
        finally:
            self.scopes, self.offset, self.cur_loc = caller
        bindings = [self.bind_argument(info, arg, atree, name)
                    for info, arg, atree in zip(infos, args, arg_trees)]
        if isinstance(ret.base, CgType) or ret.base is not None and not isinstance(
                ret.base, (ScalarType, VectorType, StructType)):
            raise self.error(f"__device__ function '{name}' returns {ret.base}", tree,
                             UnsupportedError)
        ret_type = PointerReturn(ret.base) if pointers else ret.base
        return self.inline_body(fn, ret_type, bindings + defaults, body, tree, callee,
                                reference=returns_reference(fn.tree), prologue=prologue)

    @staticmethod
    def param_list(params) -> list:
        from kir.frontends.cuda.lower import param_parts

        trees = list(params.children) if params is not None else []
        if len(trees) == 1 and param_parts(trees[0])[1] is None:
            specs = trees[0].children[0]
            words = [str(t) for s in specs.children for t in s.children
                     if isinstance(t, Token)]
            if words == ["void"]:
                return []  # f(void)
        return trees

    # ------------------------------------------------------------------- overloads

    def function_for(self, name: str, args: list, arg_trees: list, tree,
                     bound: dict | None = None) -> FunctionSym:
        """The overload of ``name`` that takes these arguments (``bound``: what the callee
        sees besides its parameters, a struct template's arguments for its members)."""
        viable, errors = self._by_count(name, args)
        if not viable:
            if errors:
                raise errors[0]
            raise self.error(f"no overload of '{name}' takes {len(args)} arguments", tree)
        if len(viable) == 1:
            return viable[0][0]
        scored = [(self._match_score(fn, params, args, bound), -k, fn)
                  for k, (fn, params) in enumerate(viable)]
        best = max(scored, key=lambda s: (s[0], s[1]))
        if best[0] < 0 and all(fn.template for fn, _params in viable):
            return viable[0][0]  # (templates kir cannot judge: the first, as before)
        if best[0] < 0:
            raise self.error(f"no overload of '{name}' takes arguments of these types", tree)
        return best[2]

    def overload_fits(self, name: str, args: list) -> bool:
        """Whether one of the file's overloads of ``name`` takes these arguments, by count
        and type (a file's overloads of a builtin leave the others to the builtin)."""
        return any(self._match_score(fn, params, args) >= 0
                   for fn, params in self._by_count(name, args)[0])

    def _by_count(self, name: str, args: list) -> tuple[list, list[KirError]]:
        """The overloads of ``name`` taking this many arguments, as (function, parameter
        trees), and the errors of those kir cannot read (others may still fit)."""
        from kir.frontends.cuda.lower import param_parts, split_function

        viable, errors = [], []
        for fn in self.functions[name]:
            try:
                params = self.param_list(split_function(fn.tree)[4])
            except KirError as exc:
                errors.append(exc)
                continue
            required = sum(1 for p in params if param_parts(p)[2] is None)
            if required <= len(args) <= len(params):
                viable.append((fn, params))
        return viable, errors

    def _match_score(self, fn: FunctionSym, params: list, args: list,
                     bound: dict | None = None) -> int:
        """How well arguments fit an overload's parameter types: 2 per exact match, 1 per
        arithmetic conversion, -1000 for a mismatch (a template parameter matches all). A
        member of a struct template is judged with the struct's arguments (``bound``):
        vLLM's ``PackedVec<T, N>::operator*=`` taking a ``PackedVec`` or a ``float``."""
        from kir.frontends.cuda.lower import param_parts

        if fn.template and not bound:
            return 0
        saved = (self.scopes, self.offset)
        self.scopes, self.offset = [self.scopes[0], dict(bound or {})], fn.offset
        score = 0
        try:
            for ptree, arg in zip(params, args):
                specs, declarator, _ = param_parts(ptree)
                ctype = self.resolve_specs(specs)
                pointer = declarator is not None and bool(self.split_declarator(declarator)[0])
                score += _fit(ctype.base, pointer, arg)
        except KirError:
            return 0 if fn.template else -1000  # (a member template's own parameters)
        finally:
            self.scopes, self.offset = saved
        return score

    # ------------------------------------------------------------------- templates

    def _bind_function_template(self, name: str, template, given: list, param_trees: list,
                                args: list, tree) -> None:
        """Bind a function template's parameters in the callee's (current) scope: explicit
        arguments (``given``: (value, tree) pairs, evaluated by the caller), then types
        deduced from the arguments, then defaults."""
        from kir.frontends.cuda.lower import param_parts

        if len(given) > len(template.children):
            raise self.error(f"too many template arguments for '{name}'", None)
        unbound = {}
        for k, param in enumerate(template.children):
            if param.data == "template_function":  # T (*F)(const T&): a function given
                self.bind_function_param(param, given[k][0] if k < len(given) else None)
                continue
            if param.data == "template_template":  # template <typename> class Op
                self._bind_template_template(name, param, given[k] if k < len(given) else None)
                continue
            is_type = param.data == "template_type"
            ident = str(param.children[0] if is_type else param.children[1])
            if k < len(given):
                value, _arg_tree = given[k]
                if isinstance(value, TemplateName):
                    raise self.error(f"template argument {k + 1} of '{name}' is the template "
                                     f"'{value.name}' without its arguments", None)
                if not is_type and isinstance(value, FunctionName):
                    # template <reduction_func_t f>, the type a function pointer's alias
                    # (llm.c's blockReduce<warpReduceSum>): the function, as T (*f)(T) is
                    self.bind_function_param(param, value)
                    continue
                if is_type == isinstance(value, Const):
                    what = "a type" if is_type else "a value"
                    raise self.error(f"template argument {k + 1} of '{name}' must be {what}",
                                     None)
                self.bind(ident, TypeSym(value) if is_type else self._template_const(
                    param, value))
            elif is_type:
                unbound[ident] = param
                self.bind(ident, TypeSym(None, f"cannot deduce template parameter '{ident}' "
                                         f"of '{name}': write {name}<...>(...)"))
            else:
                unbound[ident] = param
        for ptree, arg in zip(param_trees, args):
            specs, declarator, _ = param_parts(ptree)
            words = [str(t) for s in specs.children if s.data == "type_word"
                     for t in s.children if isinstance(t, Token)]
            if len(words) == 1 and words[0] in unbound \
                    and unbound[words[0]].data == "template_type":
                pointer = declarator is not None and bool(self.split_declarator(declarator)[0])
                found = _type_of(arg, pointer)
                sym = self.lookup(words[0])
                if found is not None and sym.type is None:
                    sym.type = found
        for ident, param in unbound.items():
            if param.data == "template_type":
                sym = self.lookup(ident)
                if sym.type is None and len(param.children) > 1 and param.children[1]:
                    sym.type = self.resolve_type_name(param.children[1]).base
            else:
                default = param.children[2] if len(param.children) > 2 else None
                if default is None:
                    raise self.error(f"cannot deduce template parameter '{ident}' of "
                                     f"'{name}': write {name}<...>(...)", None)
                value = Const(self.constant(default, f"default of '{ident}'"), I32)
                self.bind(ident, self._template_const(param, value))

    def _bind_template_template(self, name: str, param, given) -> None:
        ident = str(param.children[-1])
        if given is None:
            raise self.error(f"cannot deduce template template parameter '{ident}' of "
                             f"'{name}': write {name}<...>(...)", None)
        value, _arg_tree = given
        if not isinstance(value, TemplateName):
            raise self.error(f"template argument for '{ident}' of '{name}' must be the name "
                             "of a struct template", None)
        self.bind(ident, value)

    def _template_const(self, param, value: Const) -> ConstSym:
        t = self.resolve_specs(param.children[0]).base
        if not isinstance(t, ScalarType):
            raise self.error("template value parameters must be integers or bools", param,
                             UnsupportedError)
        return ConstSym(ct.convert(value, t))

    # -------------------------------------------------------------------- binding

    def param_info(self, ptree) -> ParamInfo:
        """A parameter's declared form, its types resolved in the current (callee) scope."""
        from kir.frontends.cuda.lower import param_parts

        specs, declarator, default = param_parts(ptree)
        ctype = self.resolve_specs(specs)
        const = "const" in self.last_qualifiers
        if declarator is None:
            return ParamInfo(None, ctype.base, False, False, const, default, ptree)
        pointers, is_ref, ident, dims = self.split_declarator(declarator)
        volatile = "volatile" in self.last_qualifiers and bool(pointers or dims)
        return ParamInfo(ident, ctype.base, bool(pointers or dims), is_ref, const, default,
                         ptree, volatile)

    def bind_argument(self, info: ParamInfo, arg, atree, fname: str):
        """Bind evaluated argument ``arg`` (lowered from ``atree`` in the current scope) to
        a parameter: (name, symbol to bind or (value, type) to declare)."""
        ident, base = info.ident, info.base
        if ident is None:
            return None, None  # an unnamed parameter: the argument is evaluated, not bound
        if isinstance(arg, LambdaVal):  # a lambda passed on: called where the callee calls it
            return ident, arg
        if isinstance(arg, FunctorVal) or isinstance(base, FunctorStruct):
            if not isinstance(arg, FunctorVal):
                raise self.error(f"argument for '{ident}' of '{fname}' is not a {base}", atree,
                                 UnsupportedError)
            return ident, arg
        if isinstance(arg, CgVal) or isinstance(base, CgType):
            if not isinstance(arg, CgVal):
                raise self.error(f"argument for '{ident}' of '{fname}' is not a {base}", atree,
                                 UnsupportedError)
            return ident, arg
        if info.pointer:
            if isinstance(arg, NullVal):
                return ident, RefSym(NULL_POINTER)
            if isinstance(arg, StructVal):  # f(&s): a pointer to a struct names the struct
                return ident, arg
            if isinstance(arg, LocalAddr):  # f(&x): the caller's local, written through it
                return ident, RefSym(arg)
            p = self.as_pointer(arg, atree)
            if p is None:
                raise self.error(f"argument for pointer parameter '{ident}' of '{fname}' is "
                                 "not a pointer", atree)
            if info.volatile and self.refuse_volatile_global(p.root, ident, atree):
                return ident, VolatilePtr(p.root, p.offset, base or p.view)
            return ident, PtrVal(p.root, p.offset, base or p.view)
        if isinstance(base, StructType) or isinstance(arg, StructVal) \
                and not isinstance(base, ScalarType):  # (a half member to a float: a value)
            return ident, self.struct_argument(base, arg, info.is_ref, ident, atree)
        if info.is_ref:
            return ident, self.reference_to(arg, atree, ident, fname, info.const, base)
        value = self.coerce(self.value_of(arg, atree), base, atree)
        return ident, (value, base)

    def reference_to(self, arg, atree, ident: str, fname: str | None, const: bool = False,
                     t=None):
        """What a reference parameter or variable binds to: the caller's lvalue (a local's
        symbol, or a memory element with its index fixed now); a const reference to a
        value binds a copy."""
        held = getattr(arg, "type", None)
        if const and t is not None and held is not None and held != t:
            # C++ binds a const T& to a temporary of T made from another type's value (a
            # half element passed to ggml's `const float& d`): the conversion happens here
            value = self.coerce(self.value_of(arg, atree), t, atree)
            return (value, value.type)
        if isinstance(arg, Var):
            sym = self.lookup(str(atree.children[0])) if isinstance(atree, Tree) \
                and atree.data == "name" else None
            return sym if isinstance(sym, VarSym) else RefSym(arg)
        if isinstance(arg, MemRef):
            return RefSym(self.fixed(arg))
        if isinstance(arg, Component) and isinstance(arg.vector, Var):
            return RefSym(arg)
        if const and isinstance(arg, Expr):
            value = arg if t is None else self.coerce(arg, t, atree)
            return (value, value.type)
        what = f"argument for reference parameter '{ident}' of '{fname}'" if fname else \
            f"reference '{ident}'"
        raise self.error(f"{what} must be bound to a variable or an element of a buffer or "
                         "array", atree, UnsupportedError)

    def fixed(self, ref: MemRef) -> MemRef:
        """``ref`` with its index computed once, now (a reference keeps naming the element
        it was bound to when the variables of its index change later)."""
        if isinstance(ref.index, Const):
            return ref
        var = self.fresh("ref_index")
        self.emit(Declare(var, ref.index.type, ref.index, loc=self.cur_loc))
        return MemRef(ref.buffer, Var(var, ref.index.type), ref.type)

    def _result_copy(self, value, name: str):
        """A deduced result held apart from the variables it was computed from (a lambda
        returning a captured variable returns its value at the call)."""
        if isinstance(value, StructVal):
            return self.struct_local(value.type, f"{name}_ret", value)
        if isinstance(value, (PtrVal, FunctorVal, CgVal)):
            return value
        expr = self.value_of(value, None)
        if isinstance(expr, Const):
            return expr
        var = self.fresh(f"{name}_ret")
        self.emit(Declare(var, expr.type, expr, loc=self.cur_loc))
        return Var(var, expr.type)

    def value_of(self, arg, atree) -> Expr:
        if isinstance(arg, MemRef):
            return self.load_ref(arg)
        return self._value(arg, atree)

    # ------------------------------------------------------------------------ body

    def inline_body(self, fn: FunctionSym, ret_type, bindings: list, body, call_tree,
                    callee: dict | None = None, reference: bool = False,
                    enclosing: list | None = None, prologue=None):
        """Emit the body of ``fn`` with parameters bound; return its result value. A
        function returning a reference (``reference``) must end in its only ``return``:
        its value is the lvalue that names (``return payload[i];``), not a copy. A lambda's
        body sees the scopes it was written in (``enclosing``) and may leave its result
        type to be deduced (``ret_type`` DEDUCED) from its one final ``return``."""
        from kir.frontends.cuda.lower_lambda import DEDUCED

        returns = sum(1 for t in _own_subtrees(body)
                      if t.data in ("return_stmt", "return_init"))
        last = body.children[-1] if body.children else None
        single_exit = returns == 0 or (returns == 1 and isinstance(last, Tree)
                                       and last.data in ("return_stmt", "return_init"))
        deduced = ret_type is DEDUCED
        if deduced and returns == 0:
            ret_type, deduced = None, False
        # a result taken from the one final `return expr;` itself, not through a variable
        ends_in_its_return = returns == 1 and single_exit and last.data == "return_stmt" \
            and last.children[-1] is not None
        if deduced and not ends_in_its_return:
            raise self.error("a lambda returning from several places needs its result type "
                             "written: [..](..) -> float { ... }", call_tree, UnsupportedError)
        if reference and not ends_in_its_return:
            raise self.error(f"'{fn.name}' returns a reference: kir inlines such a function "
                             "only when it ends in its one return statement", call_tree,
                             UnsupportedError)
        result = None
        if reference or deduced:
            ret_type = None  # no result variable: the returned lvalue is the value
        elif isinstance(ret_type, StructType):
            result = self.struct_local(ret_type, f"{fn.name}_ret")
        elif isinstance(ret_type, PointerReturn):  # a pointer variable; its buffer static
            result = PtrSym(None, ret_type.view, self.fresh(f"{fn.name}_ret_off"))
            self.emit(Declare(result.offset_var, OFFSET_TYPE, loc=self.cur_loc))
        elif ret_type is not None:
            result = self.fresh(f"{fn.name}_ret")
            self.emit(Declare(result, ret_type, loc=self.cur_loc))
        done = None if single_exit else self.fresh(f"{fn.name}_done")
        if done:
            self.emit(Declare(done, BOOL, Const(False, BOOL), loc=self.cur_loc))
        scope: dict[str, object] = dict(callee or {})
        for ident, value in bindings:
            if ident is None:
                continue
            if isinstance(value, (VarSym, PtrSym, RefSym, CgVal, StructVal, FunctorVal,
                                  LambdaVal)):
                scope[ident] = value
            elif isinstance(value, PtrVal):
                var = self.fresh(ident)
                self.emit(Declare(var, OFFSET_TYPE, ct.convert(value.offset, OFFSET_TYPE),
                                  loc=self.cur_loc))
                scope[ident] = PtrSym(value.root, value.view, var)
                if isinstance(value, VolatilePtr):  # stores into it: lockstep steps
                    self.volatile_root(value.root, ident, None, scope)
            else:
                expr, t = value
                var = self.fresh(ident)
                self.emit(Declare(var, t, expr, loc=self.cur_loc))
                scope[ident] = VarSym(var, t)
        saved = (self.scopes, self.offset, self.cur_loc)
        self.scopes = (enclosing or [self.scopes[0]]) + [scope]
        self.offset = fn.offset
        context = FnContext(fn.name, result, ret_type, done)
        self.fn_stack.append(context)
        try:
            if prologue is not None:
                prologue(fn)
            if reference or deduced:
                self.lower_stmt_list(body.children[:-1])
                self.cur_loc = self.loc_of(last)
                value = self.operand(last.children[-1])
                return value if reference else self._result_copy(value, fn.name)
            self.lower_stmt_list(body.children)
        finally:
            self.fn_stack.pop()
            self.scopes, self.offset, self.cur_loc = saved
        result = context.result  # (a carrier returned for a vector: its struct)
        if result is None:
            return Const(0, I32)
        if isinstance(result, StructVal):
            return result
        if isinstance(result, PtrSym):
            if result.root is None:
                raise self.error(f"'{fn.name}' returns no pointer into a buffer or array",
                                 call_tree, UnsupportedError)
            return PtrVal(result.root, Var(result.offset_var, OFFSET_TYPE), result.view)
        return Var(result, ret_type)


def _own_subtrees(body):
    """The subtrees of a function body, not those of lambdas written in it (their returns
    are theirs)."""
    stack = [body]
    while stack:
        tree = stack.pop()
        yield tree
        stack.extend(c for c in tree.children
                     if isinstance(c, Tree) and c.data != "lambda_expr")


class PointerReturn:
    """The return type of a ``__device__`` function returning a pointer to ``view``."""

    def __init__(self, view) -> None:
        self.view = view


def _type_of(arg, pointer: bool):
    """The type a template parameter takes from an argument (``T x`` or ``T* p``)."""
    if pointer:
        if isinstance(arg, PtrVal):
            return arg.view
        if isinstance(arg, ArrVal):
            return arg.sym.elem
        return None
    if isinstance(arg, (StructVal, FunctorVal, LambdaVal)):
        return arg.type
    if isinstance(arg, (Expr, MemRef)) and isinstance(arg.type, (ScalarType, VectorType)):
        return arg.type
    return None


def _fit(t, pointer: bool, arg) -> int:
    """Score of passing ``arg`` to a parameter of type ``t`` (see ``_match_score``)."""
    if pointer:
        if isinstance(arg, (PtrVal, ArrVal)):
            view = arg.view if isinstance(arg, PtrVal) else arg.sym.elem
            return 2 if view == t else 1 if ct.scalar_of(view) == ct.scalar_of(t) else -1000
        return 2 if isinstance(arg, NullVal) else -1000
    if isinstance(t, StructType) or isinstance(arg, StructVal):
        return 2 if isinstance(arg, StructVal) and (arg.type == t or carries(t, arg)) \
            else -1000
    if isinstance(t, CgType) or isinstance(arg, CgVal):
        return 2 if isinstance(arg, CgVal) and isinstance(t, CgType) else -1000
    at = arg.type if isinstance(arg, (Expr, MemRef)) else None
    if at is None:
        return -1000
    if at == t:
        return 2
    if isinstance(at, VectorType) or isinstance(t, VectorType):
        return -1000
    return 1
