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

from kir.frontends.cuda.lower_view_struct import (
    _TEMPLATE_PARAMS,
    data_free,
    member_span,
)
from kir.frontends.cuda.parser import parse_unit
from kir.frontends.cuda.values import FunctionSym, FunctorStruct, FunctorVal, TypeSym

from kir.errors import UnsupportedError

# ``operator()`` / ``operator ()`` followed by its parameter list
_CALL = re.compile(r"\boperator\s*\(\s*\)\s*\(")
_NAME = "kir_call"  # what ``operator()`` is read as (padded to the same length)


class _PatchedSource:
    """The file's text with one ``operator()`` read as a function name of equal length."""

    def __init__(self, src, start: int, end: int) -> None:
        self._src = src
        self.text = src.text[:start] + _NAME.ljust(end - start) + src.text[end:]

    def loc(self, offset: int):
        return self._src.loc(offset)

    def source_line(self, loc):
        return self._src.source_line(loc)


class FunctorMixin:
    """Function objects; relies on the Lowerer (types, inlining, scopes)."""

    def functor_struct(self, name: str, targs=None) -> FunctorStruct | None:
        """The struct ``name`` as a :class:`FunctorStruct`, or None when it holds data or
        has no call operator."""
        unit = self.program.struct_units.get(name)
        if unit is None:
            return None
        text = self.src.text[unit.start:unit.end]
        found = _CALL.search(text)
        if found is None or not data_free(text):
            return None
        span = member_span(text, found.start())
        if span is None:
            return None
        params: tuple[str, ...] = ()
        if text.startswith("template"):
            params = tuple(_TEMPLATE_PARAMS.findall(text[:text.find(">") + 1]))
        return FunctorStruct(name, unit.start + span[0], unit.start + span[1], params, targs)

    def call_functor(self, value: FunctorVal, arg_trees: list, tree, discard: bool):
        """``op(a, b)``: the struct's ``operator()`` inlined on the arguments."""
        struct = value.struct
        written = [a for a in (struct.targs.children if struct.targs is not None else [])
                   if a is not None]
        if len(written) != len(struct.params):
            raise self.error(f"{struct} takes {len(struct.params)} template argument(s), "
                             f"got {len(written)}", tree, UnsupportedError)
        bound = {param: TypeSym(self.template_arg(arg))
                 for param, arg in zip(struct.params, written)}
        made = self.__dict__.setdefault("_functor_calls", {})  # struct -> function name
        name = made.get(struct.name)
        if name is None:  # a C name (locals are named after it), none of the file's own
            name = f"{struct.name}_call"
            while name in self.functions:
                name += "_"
            made[struct.name] = name
            text = self.src.text[struct.start:struct.end]
            call = _CALL.search(text)
            src = _PatchedSource(self.src, struct.start + call.start(),
                                 struct.start + call.end() - 1)
            names = self.program.type_names | set(struct.params)
            self.functions[name] = [FunctionSym(
                name, struct.start,
                lambda: parse_unit(src, struct.start, struct.end, "function_def", names,
                                   self.program.template_names))]
        return self.inline_call(name, arg_trees, tree, discard, bound=bound)
