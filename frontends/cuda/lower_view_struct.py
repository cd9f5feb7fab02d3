"""Structs that hold no data and are used through a conversion to a pointer (a mixin of the
Lowerer).

CUDA code that templates over the element type cannot declare ``extern __shared__ T s[]``
(the declarations of different instances would clash), so it wraps the dynamic shared
memory in a struct with no data members whose conversion operator returns it as ``T*``::

    template <class T> struct Pool { __device__ operator T*() { extern __shared__ int m[];
                                                                return (T*)m; } };
    T* sdata = Pool<T>();

Such an object has no value but the pointer it converts to, so kir lowers ``Pool<T>()`` to
that pointer: the operator's body inlined like a ``__device__`` function returning a pointer,
the struct's template parameters bound to the arguments given. Recognized by structure (no
data members, a non-const ``operator X*()``), never by name. Structs with data members and
member functions stay refused where they are parsed.
"""

from __future__ import annotations

import re

from kir.frontends.cuda.lower_inline import PointerReturn
from kir.frontends.cuda.parser import parse_unit
from kir.frontends.cuda.program import template_parameters
from kir.frontends.cuda.scan import closing_bracket
from kir.frontends.cuda.values import TypeSym

# ``operator T *() {`` / ``operator const T*() const {``: the type, and whether it is const
_CONVERSION = re.compile(r"\boperator\s+((?:const\s+)?[A-Za-z_][\w:]*)\s*\*\s*\(\s*\)\s*"
                         r"(const\s*)?\{")


class ViewStruct:
    """A data-free struct converting to a pointer: its name, the unit's text offsets of the
    chosen ``operator X*()``'s body, ``X`` and the struct's template parameters."""

    def __init__(self, name: str, body_start: int, body_end: int, view: str,
                 params: tuple[str, ...], targs=None) -> None:
        self.name, self.body_start, self.body_end = name, body_start, body_end
        self.view, self.params, self.targs = view, params, targs  # targs: as written

    def __str__(self) -> str:
        return f"struct {self.name}"


class ViewStructMixin:
    """``S<T>()`` for a data-free struct with a conversion to a pointer; relies on the
    Lowerer."""

    def data_free_struct(self, name: str) -> tuple[object, str, tuple[str, ...]] | None:
        """The struct ``name``'s unit, text and template parameters when it holds no data
        (what both kinds of data-free struct, this module's and ``lower_functor``'s, start
        from), else None."""
        known = self.program.data_free
        if name not in known:
            unit = self.program.struct_units.get(name)
            text = self.src.text[unit.start:unit.end] if unit is not None else ""
            known[name] = (unit, text, template_parameters(self.src, unit)) \
                if unit is not None and data_free(text) else None
        return known[name]

    def struct_template_scope(self, struct, tree) -> dict[str, TypeSym]:
        """A data-free struct's template parameters bound to the arguments written."""
        targs = struct.targs
        args = [a for a in (targs.children if targs is not None else []) if a is not None]
        if len(args) != len(struct.params):
            raise self.error(f"{struct} takes {len(struct.params)} template argument(s), "
                             f"got {len(args)}", tree)
        return {param: TypeSym(self.template_arg(arg))
                for param, arg in zip(struct.params, args)}

    def view_struct(self, name: str, targs=None) -> ViewStruct | None:
        """The struct ``name`` (with the template arguments ``targs`` as written) as a
        :class:`ViewStruct`, or None when it holds data or has no conversion operator to a
        pointer."""
        found = self.data_free_struct(name)
        conversions = list(_CONVERSION.finditer(found[1])) if found is not None else []
        if not conversions:
            return None
        unit, _, params = found
        chosen = next((m for m in conversions if not m.group(2)), conversions[0])
        open_at = unit.start + chosen.end() - 1
        close_at = closing_bracket(self.src.text, open_at)
        if close_at < 0:
            return None
        view = chosen.group(1).replace("const", "").strip()
        return ViewStruct(name, open_at, close_at + 1, view, params, targs)

    def view_struct_pointer(self, struct: ViewStruct, tree):
        """The pointer ``struct<targs>()`` converts to: its operator's body inlined."""
        callee = self.struct_template_scope(struct, tree)
        body = parse_unit(self.src, struct.body_start, struct.body_end, "compound",
                          self.program.type_names | set(struct.params),
                          self.program.template_names)
        saved = self.scopes
        self.scopes = [self.scopes[0], callee]
        try:
            view = self.named_type(struct.view, tree)
        finally:
            self.scopes = saved
        fn = _Operator(f"{struct.name}_view", struct.body_start)
        return self.inline_body(fn, PointerReturn(view), [], body, tree, callee)


class _Operator:
    """What :meth:`inline_body` reads of a function: its name and text offset."""

    def __init__(self, name: str, offset: int) -> None:
        self.name, self.offset = name, offset


def data_free(text: str) -> bool:
    """Whether a struct's text declares member functions only: no data members (``static``
    members are not data of an object)."""
    open_at = text.find("{", text.find("struct"))
    close_at = closing_bracket(text, open_at) if open_at >= 0 else -1
    if close_at < 0:
        return False
    body = text[open_at + 1:close_at]
    while True:  # every function body becomes the end of its declaration
        flat = re.sub(r"\{[^{}]*\}", ";", body)
        if flat == body:
            break
        body = flat
    for segment in body.split(";"):
        words = re.sub(r"\b(public|private|protected)\s*:", "", segment).strip()
        if words and "(" not in words and not words.startswith("static"):
            return False
    return True
