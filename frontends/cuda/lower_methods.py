"""Member functions of structs with data (a mixin of the Lowerer).

Real kernels carry small structs with behaviour: an online-softmax accumulator with
``add(x)``, llm.c's ``Packed128`` with ``operator[]`` and ``static constexpr size``, a
vector type with ``dot``. A struct's values are one local per field (``lower_struct``), so a
member function is inlined like a ``__device__`` function whose scope also holds the
object: each field by its name (the object's own locals, so writes reach the object), the
struct's template parameters, its static constants, ``this`` (``this->m`` and ``*this``)
and its other member functions (called unqualified). Called as ``s.f(...)``,
``this->f(...)``, ``s[i]`` (``operator[]``), ``s(...)`` (``operator()``), or, for a
``static`` one, ``S::f(...)``. A member function returning a reference
(``T& operator[](int i) { return payload[i]; }``) yields the lvalue its single ``return``
names, so ``s[k] = v`` writes the field. Each member function is parsed on its first call
from its own text (``struct_text``), an operator's name read as ``index``/``call``/``op``.
"""

from __future__ import annotations

from kir.frontends.cuda.lower_struct_def import template_symbols
from kir.frontends.cuda.parser import parse_unit, qualified_suffixes
from kir.frontends.cuda.struct_text import PatchedSource, operator_word
from kir.frontends.cuda.values import (
    ConstSym,
    FunctionSym,
    PtrSym,
    PtrVal,
    RefSym,
    StructType,
    StructVal,
    TypeSym,
    VarSym,
)

from kir.errors import UnsupportedError
from kir.ir import Const, Expr, Var


class MethodRef:
    """A member function named inside another of the same struct (``zeros()`` calling
    ``constant(0.f)``): called on the same object, or as a static one."""

    def __init__(self, struct: StructType, name: str, this: StructVal | None) -> None:
        self.struct, self.name, self.this = struct, name, this


class MethodMixin:
    """``s.f(...)``, ``s[i]``, ``S::f(...)``, ``S::constant``; relies on the Lowerer."""

    def call_method(self, this: StructVal | None, struct: StructType, name: str,
                    arg_trees: list, tree, discard: bool = False, args: list | None = None):
        """Inline member function ``name`` of ``struct`` on object ``this`` (None for a
        static call); ``name`` is as written, or ``operator[]``/``operator()``; ``args``:
        the arguments already evaluated (an operator's operands), else from
        ``arg_trees``."""
        members = [m for m in self.struct_members(struct.base) if _same_name(m, name)]
        if not members:
            raise self.error(f"{struct} has no member function '{name}'", tree)
        if not any(m.has_body for m in members):
            raise self.error(f"member function '{struct.base}::{name}' is declared but not "
                             "defined inside the struct (kir reads member functions defined "
                             "in the struct only)", tree, UnsupportedError)
        if this is None and not all(m.static for m in members if m.has_body):
            raise self.error(f"member function '{struct.base}::{name}' is not static: call it "
                             "on an object", tree)
        if this is not None:
            this = self._object_of(this, tree)
        key = self._method_function(struct, name, members)
        return self.inline_call(key, arg_trees, tree, discard,
                                bound=self.method_scope(struct, this), args=args)

    def method_scope(self, struct: StructType, this: StructVal | None) -> dict[str, object]:
        """What a member function of ``struct`` sees besides its parameters."""
        scope = template_symbols(struct.template)
        scope[struct.base] = TypeSym(struct)  # the struct's own name, arguments implied
        for ident, value in struct.statics:
            scope[ident] = ConstSym(value)
        for member in self.struct_members(struct.base):
            if member.operator is None and member.name != struct.base:
                scope[member.name] = MethodRef(struct, member.name, this)
        if this is not None:
            scope["this"] = this
            for field, part in this.parts.items():
                if part is not None:
                    scope[field] = _field_symbol(part)
        return scope

    def member_constant(self, ident: str):
        """The value of ``S::name`` when ``S`` is a struct type with that static constant,
        else None."""
        found = self._qualified_member(ident)
        return found[0].static(found[1]) if found is not None else None

    def template_member(self, tree) -> tuple[StructType, str]:
        """The struct and member name of ``S<args>::member``."""
        name, targs, member = tree.children
        struct = self.named_type(str(name), tree, targs)
        if not isinstance(struct, StructType):
            raise self.error(f"'{name}<...>::' names a member of {struct}, which has none",
                             tree, UnsupportedError)
        return struct, str(member).lstrip(":")

    def static_method_call(self, name: str, arg_trees: list, tree, discard: bool):
        """``S::f(...)`` for a struct type ``S``, else None."""
        found = self._qualified_member(name)
        if found is None:
            return None
        return self.call_method(None, found[0], found[1], arg_trees, tree, discard)

    # ------------------------------------------------------------------ helpers

    def _qualified_member(self, name: str) -> tuple[StructType, str] | None:
        """``S::member`` as (the struct type ``S``, ``member``), or None when ``S`` names no
        struct type."""
        if "::" not in name:
            return None
        prefix, member = name.rsplit("::", 1)
        struct = self._struct_named(prefix)
        return (struct, member) if struct is not None else None

    def _struct_named(self, prefix: str) -> StructType | None:
        for candidate in qualified_suffixes(prefix):
            sym = self.lookup(candidate)
            known = sym.type if isinstance(sym, TypeSym) else self.typedefs.get(candidate)
            if known is None and candidate in self.program.struct_units:
                known = self.struct_type(candidate, None)
            if isinstance(known, StructType):
                return known
        return None

    def _object_of(self, this: StructVal, tree) -> StructVal:
        """The object a member function works on: ``this`` itself when it is stored (its
        fields are locals or memory), else a local copy of the computed value."""
        if _stored(this):
            return this
        return self.struct_local(this.type, f"{this.type.base}_obj", this, tree)

    def _method_function(self, struct: StructType, name: str, members: list) -> str:
        """The name under which ``struct``'s member function ``name`` (its overloads) sits in
        ``self.functions``, registered on first use."""
        made = self.__dict__.setdefault("_method_functions", {})
        if (struct.base, name) in made:
            return made[(struct.base, name)]
        operator = members[0].operator
        short = operator_word(operator) if operator else name
        key = f"{struct.base}_{short}"  # a C name: locals of the inlined body are named after it
        while key in self.functions:
            key += "_"
        self.functions[key] = [
            self.member_sym(struct, key, m, [(m.name_start, m.name_end, short)]
                            if m.operator else []) for m in members if m.has_body]
        made[(struct.base, name)] = key
        return key

    def member_sym(self, struct: StructType, key: str, member, patches: list) -> FunctionSym:
        """Member function ``member`` of ``struct`` as a ``__device__`` function named
        ``key``, parsed on first call from its text with ``patches`` applied (an operator's
        name as an identifier, a constructor as a ``void`` function); the struct's type
        parameters are type names there."""
        src = self.src
        patched = PatchedSource(src, patches)
        names = self.program.type_names | {p for p, v in struct.template
                                           if not isinstance(v, Const)}
        templates = self.program.template_names
        templated = bool(struct.template) or src.text.startswith("template", member.start)
        return FunctionSym(key, member.start,
                           lambda: parse_unit(patched, member.start, member.end,
                                              "function_def", names, templates), templated)


def _same_name(member, name: str) -> bool:
    if name.startswith("operator"):
        return member.operator == name[len("operator"):].replace(" ", "")
    return member.name == name


def _stored(value: StructVal) -> bool:
    for part in value.parts.values():
        if isinstance(part, StructVal):
            if not _stored(part):
                return False
        elif isinstance(part, Expr) and not isinstance(part, Var):
            return False
    return True


def _field_symbol(part):
    """How a field of the object is bound in a member function's scope."""
    if isinstance(part, Var):
        return VarSym(part.name, part.type)
    if isinstance(part, (PtrSym, StructVal)):
        return part
    if isinstance(part, PtrVal):  # an array member of a struct read over a buffer
        return PtrSym(part.root, part.view, offset_expr=part.offset)
    return RefSym(part)  # a member in memory (MemRef), an array member (ArrVal)


__all__ = ["MethodMixin", "MethodRef"]
