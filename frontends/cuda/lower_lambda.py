"""Lambdas in device code (a mixin of the Lowerer).

``auto load = [&](int k) { return x[base + k] * scale; };`` then ``load(i)``: a lambda is
a :class:`LambdaVal` (no data of its own in kir, like a function object) bound to its name,
passed to inlined functions (a ``typename F`` deduces to it) and inlined where it is
called, its body seeing the scopes where it was written. Captures follow C++: by reference
(``&``, ``&x``) the enclosing variables themselves; by copy (``=``, ``x``, ``x = expr``)
each variable's value when the lambda was made, held in a local then (a by-copy capture
cannot be assigned unless the lambda is ``mutable``, as C++ says). The result's type is the
one written after ``->``, else the single return statement's (a lambda returning from
several places needs ``-> type``).
"""

from __future__ import annotations

import dataclasses

from kir.frontends.cuda.values import (
    AUTO,
    OFFSET_TYPE,
    ConstSym,
    FunctionSym,
    PtrSym,
    VarSym,
)
from lark import Token, Tree

from kir.ir import Const, Declare, Var


class LambdaType:
    """The type a ``typename F`` parameter deduces from a lambda argument."""

    def __str__(self) -> str:
        return "a lambda"


LAMBDA_TYPE = LambdaType()


class LambdaVal:
    """A lambda: its parse tree, the scopes it was written in, its by-copy captures (name
    -> symbol of the copy) and the text offset its tree's positions use."""

    def __init__(self, tree, scopes: list, copies: dict, offset: int) -> None:
        self.tree, self.scopes, self.copies, self.offset = tree, scopes, copies, offset
        self.type = LAMBDA_TYPE


class LambdaMixin:
    """``[captures](params) -> T { body }``; relies on the Lowerer (scopes, inlining)."""

    def _x_lambda_expr(self, tree, discard) -> LambdaVal:
        captures, _params, _mutable, _ret, body = _parts(tree)
        copies: dict[str, object] = {}
        listed = captures.children if captures is not None else []
        copy_all = any(c.data == "capture_all_copy" for c in listed)
        for capture in listed:
            if capture.data in ("capture_copy", "capture_init"):
                ident = str(capture.children[0])
                if capture.data == "capture_init":
                    copies[ident] = self._copy_of(ident, self.rvalue(capture.children[1]))
                elif ident != "this":
                    copies[ident] = self._captured(ident, capture)
        if copy_all:  # [=]: every enclosing variable the body names, copied now
            for ident in _names_in(body):
                if ident not in copies and isinstance(self.lookup(ident), (VarSym, PtrSym)):
                    copies[ident] = self._captured(ident, body)
        return LambdaVal(tree, list(self.scopes), copies, self.offset)

    def call_lambda(self, lam: LambdaVal, arg_trees: list, tree, discard: bool,
                    args: list | None = None):
        """Inline lambda ``lam`` on the arguments (evaluated here, in the caller's scope)."""
        _captures, params, _mutable, ret_tree, body = _parts(lam.tree)
        if args is None:
            args = [self.operand(a) for a in arg_trees]
        caller = (self.scopes, self.offset, self.cur_loc)
        self.cur_loc = self.loc_of(tree)
        self.scopes, self.offset = lam.scopes + [dict(lam.copies)], lam.offset
        try:
            param_trees = self.param_list(params.children[0]) if params is not None else []
            if len(param_trees) != len(args):
                raise self.error(f"the lambda takes {len(param_trees)} argument(s), "
                                 f"{len(args)} given", None)
            infos = [self.param_info(p) for p in param_trees]
            ret = self.resolve_type_name(ret_tree).base if ret_tree is not None else DEDUCED
        finally:
            self.scopes, self.offset, self.cur_loc = caller
        bindings = []
        for info, arg, atree in zip(infos, args, arg_trees or [None] * len(args)):
            if info.base is AUTO:  # a generic lambda's `auto x`: the argument's type
                info = dataclasses.replace(info, base=getattr(arg, "type", None))
            bindings.append(self.bind_argument(info, arg, atree, "the lambda"))
        fn = FunctionSym("lambda", lam.offset, lambda: lam.tree)
        return self.inline_body(fn, ret, bindings, body, tree, dict(lam.copies),
                                enclosing=lam.scopes)

    def _captured(self, ident: str, where) -> object:
        sym = self.lookup(ident)
        if sym is None:
            raise self.error(f"the lambda captures '{ident}', which is not a variable here",
                             where)
        if isinstance(sym, VarSym):
            return self._copy_of(ident, Var(sym.name, sym.type))
        if isinstance(sym, PtrSym) and sym.offset_var is not None:  # where it points now
            copy = self.fresh(f"{ident}_copy")
            self.emit(Declare(copy, OFFSET_TYPE, Var(sym.offset_var, OFFSET_TYPE),
                              loc=self.cur_loc))
            return PtrSym(sym.root, sym.view, copy)
        return sym  # constants, arrays (a copy of an array is not taken: by reference)

    def _copy_of(self, ident: str, value) -> object:
        if isinstance(value, Const):
            return ConstSym(value)
        name = self.fresh(f"{ident}_copy")
        self.emit(Declare(name, value.type, value, loc=self.cur_loc))
        return VarSym(name, value.type)


class _Deduced:
    """The return type of a lambda without ``-> T``: its single return's."""


DEDUCED = _Deduced()


def _parts(tree) -> tuple:
    """(captures, params, mutable token, return type tree, body) of a ``lambda_expr``."""
    kids = list(tree.children)
    body = kids[-1]
    captures = kids[0] if isinstance(kids[0], Tree) and kids[0].data == "lambda_captures" \
        else None
    params = next((k for k in kids if isinstance(k, Tree) and k.data == "lambda_params"), None)
    mutable = next((k for k in kids if isinstance(k, Token) and k.type == "LAMBDA_MUTABLE"),
                   None)
    ret = next((k for k in kids if isinstance(k, Tree) and k.data == "type_name"), None)
    return captures, params, mutable, ret, body


def _names_in(tree) -> list[str]:
    """The plain names a body uses, in order, once each."""
    seen: dict[str, None] = {}
    for sub in tree.iter_subtrees_topdown():
        if sub.data == "name" and isinstance(sub.children[0], Token):
            seen.setdefault(str(sub.children[0]), None)
    return list(seen)


__all__ = ["DEDUCED", "LAMBDA_TYPE", "LambdaMixin", "LambdaVal"]
