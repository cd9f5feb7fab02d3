"""Function objects: data-free structs with a call operator (a mixin of the Lowerer).

C++ kernels pass operations as objects: ``template <typename T> struct MaxOp { __device__ T
operator()(const T& a, const T& b) const { return a > b ? a : b; } };`` then
``warp_reduce(v, MaxOp<float>())`` or ``Op()(a, b)`` inside a template. Such an object holds
no data, so kir keeps it as a :class:`FunctorVal` (bound to names, passed to inlined
functions, deducing their ``typename Op``) and a call of it inlines the struct's
``operator()`` like a ``__device__`` function, the struct's template parameters bound to its
arguments. Recognized by structure (no data members, an ``operator()`` member), never by
name. The operator's text is parsed with ``operator()`` read as a plain function name of
the same length, so positions and locations stay the file's own.
"""

from __future__ import annotations

import re

from kir.frontends.cuda.parser import parse_unit
from kir.frontends.cuda.scan import closing_bracket
from kir.frontends.cuda.struct_text import PatchedSource
from kir.frontends.cuda.values import FunctionSym, FunctorStruct, FunctorVal

# ``operator()`` / ``operator ()`` followed by its parameter list
_CALL = re.compile(r"\boperator\s*\(\s*\)\s*\(")
_NAME = "kir_call"  # what ``operator()`` is read as (padded to the same length)


class FunctorMixin:
    """Function objects; relies on the Lowerer (types, inlining, scopes)."""

    def functor_struct(self, name: str, targs=None) -> FunctorStruct | None:
        """The struct ``name`` as a :class:`FunctorStruct`, or None when it holds data or
        has no call operator."""
        found = self.data_free_struct(name)
        call = _CALL.search(found[1]) if found is not None else None
        if call is None:
            return None
        unit, text, params = found
        span = _member_span(text, call.start())
        if span is None:
            return None
        return FunctorStruct(name, unit.start + span[0], unit.start + span[1], params, targs)

    def call_functor(self, value: FunctorVal, arg_trees: list, tree, discard: bool,
                     args: list | None = None):
        """``op(a, b)``: the struct's ``operator()`` inlined on the arguments (``args`` when
        the caller has evaluated them already)."""
        struct = value.struct
        bound = self.struct_template_scope(struct, tree)
        made = self.__dict__.setdefault("_functor_calls", {})  # struct -> function name
        name = made.get(struct.name)
        if name is None:  # a C name (locals are named after it), none of the file's own
            name = f"{struct.name}_call"
            while name in self.functions:
                name += "_"
            made[struct.name] = name
            text = self.src.text[struct.start:struct.end]
            call = _CALL.search(text)
            src = PatchedSource(self.src, [(struct.start + call.start(),
                                            struct.start + call.end() - 1, _NAME)])
            names = self.program.type_names | set(struct.params)
            self.functions[name] = [FunctionSym(
                name, struct.start,
                lambda: parse_unit(src, struct.start, struct.end, "function_def", names,
                                   self.program.template_names))]
        return self.inline_call(name, arg_trees, tree, discard, bound=bound, args=args)


def _member_span(text: str, at: int) -> tuple[int, int] | None:
    """The span of the ``operator()`` starting at ``at`` in a struct's text: from its first
    qualifier (after the previous member) to its body's closing brace."""
    start = max(text.rfind(c, 0, at) for c in ";{}") + 1
    while start < at and text[start].isspace():
        start += 1
    paren = text.find("(", text.find(")", at) + 1)  # the parameter list after "operator()"
    close = closing_bracket(text, paren) if paren >= 0 else -1
    body = text.find("{", close) if close >= 0 else -1
    end = closing_bracket(text, body) if body >= 0 else -1
    return (start, end + 1) if end >= 0 else None
