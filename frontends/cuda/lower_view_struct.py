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
from kir.frontends.cuda.scan import closing_bracket
from kir.frontends.cuda.values import TypeSym

# ``operator T *() {`` / ``operator const T*() const {``: the type, and whether it is const
_CONVERSION = re.compile(r"\boperator\s+((?:const\s+)?[A-Za-z_][\w:]*)\s*\*\s*\(\s*\)\s*"
                         r"(const\s*)?\{")
_TEMPLATE_PARAMS = re.compile(r"(?:class|typename)\s+([A-Za-z_]\w*)")


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

    def view_struct(self, name: str, targs=None) -> ViewStruct | None:
        """The struct ``name`` (with the template arguments ``targs`` as written) as a
        :class:`ViewStruct`, or None when it holds data or has no conversion operator to a
        pointer."""
        unit = self.program.struct_units.get(name)
        if unit is None:
            return None
        text = self.src.text[unit.start:unit.end]
        params: tuple[str, ...] = ()
        if text.startswith("template"):
            header_end = text.find(">") + 1
            params = tuple(_TEMPLATE_PARAMS.findall(text[:header_end]))
        conversions = list(_CONVERSION.finditer(text))
        if not conversions:
            return None
        chosen = next((m for m in conversions if not m.group(2)), conversions[0])
        if not data_free(text):
            return None
        open_at = unit.start + chosen.end() - 1
        close_at = closing_bracket(self.src.text, open_at)
        if close_at < 0:
            return None
        view = chosen.group(1).replace("const", "").strip()
        return ViewStruct(name, open_at, close_at + 1, view, params, targs)

    def view_struct_pointer(self, struct: ViewStruct, tree):
        """The pointer ``struct<targs>()`` converts to: its operator's body inlined."""
        targs = struct.targs
        args = [a for a in (targs.children if targs is not None else []) if a is not None]
        if len(args) != len(struct.params):
            raise self.error(f"{struct} takes {len(struct.params)} template argument(s), "
                             f"got {len(args)}", tree)
        callee = {param: TypeSym(self.template_arg(arg)) for param, arg in
                  zip(struct.params, args)}
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


def member_span(text: str, at: int) -> tuple[int, int] | None:
    """The span of the member function whose name starts at ``at`` in a struct's text:
    from its first qualifier (after the previous member) to its body's closing brace."""
    start = max(text.rfind(c, 0, at) for c in ";{}") + 1
    while start < at and text[start].isspace():
        start += 1
    paren = text.find("(", text.find(")", at) + 1)  # the parameter list after "operator()"
    close = closing_bracket(text, paren) if paren >= 0 else -1
    body = text.find("{", close) if close >= 0 else -1
    end = closing_bracket(text, body) if body >= 0 else -1
    return (start, end + 1) if end >= 0 else None
