"""Struct definitions in the CUDA lowering (a mixin of the Lowerer).

A struct's text is parsed the first time a type names it, and again for each other list of
template arguments (``Packed128<float>`` and ``Packed128<int>`` are two types, the name with
its arguments their identity). What is read: data members (scalars, vectors, nested structs,
arrays, pointers), ``static const``/``constexpr`` members with a constant value (named as
``S::size``, ``s.size`` or plainly inside the struct), and where the member functions are
(``struct_text.member_functions``: their spans are blanked for this parse; each is parsed
when first called, see ``lower_methods``), default member initializers, member types
(``using Type = float4;``), and which constructors it has (run by ``lower_constructors``).
An explicit specialization (``template <> struct S<float>``) is the definition for its
arguments; a primary template may then be declared only.
"""

from __future__ import annotations

import re

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_stmt import closed
from kir.frontends.cuda.parser import parse_unit, template_header_length
from kir.frontends.cuda.program import template_parameters
from kir.frontends.cuda.scan import closing_bracket
from kir.frontends.cuda.struct_text import PatchedSource, blank, member_functions
from kir.frontends.cuda.values import (
    AUTO,
    CgType,
    ConstSym,
    FieldArray,
    FieldPointer,
    StructType,
    TypeSym,
)
from lark import Tree

from kir.errors import KirError, UnsupportedError
from kir.ir import Const

MAX_STRUCT_DEPTH = 16


class StructDefMixin:
    """Struct definitions to :class:`StructType`; relies on the Lowerer."""

    def struct_members(self, name: str) -> list:
        """The member functions of the file's struct ``name`` (read once per file); none for
        a struct the file does not define (a carrier kir made for an ``int4``)."""
        known = self.program.methods
        if name not in known:
            unit = self.program.struct_units.get(name)
            known[name] = [] if unit is None else \
                member_functions(self.src.text[unit.start:unit.end], unit.start)
        return known[name]

    def struct_type(self, name: str, tree, targs=None) -> StructType:
        """The StructType of the file's struct ``name`` with template arguments ``targs``
        (as written, evaluated in the current scope), parsed on first use."""
        program = self.program
        text = program.src.text
        unit = program.struct_units.get(name)
        if unit is None:  # a template declared only, used through its specializations
            return self._specialized_only(name, targs, tree)
        header_end = unit.start + template_header_length(text[unit.start:unit.end]) \
            if text.startswith("template", unit.start) else -1
        if header_end < 0 and targs is not None:
            raise self.error(f"struct '{name}' is not a template", tree)
        params = set(template_parameters(program.src, unit))
        template = self._struct_template(name, unit.start, header_end, targs, tree, params) \
            if header_end >= 0 else {}
        key = name if header_end < 0 else _instance_name(name, template.values())
        if key in program.struct_types:
            return program.struct_types[key]
        if self.__dict__.setdefault("_struct_depth", 0) > MAX_STRUCT_DEPTH:
            raise self.error(f"struct '{name}' nests more than {MAX_STRUCT_DEPTH} deep", tree)
        members = self.struct_members(name)
        special = self._specialization(name, template, tree) if template else None
        if special is not None:  # template <> struct Name<these arguments>: its own text
            (def_tree, unit), template, members = special, {}, []
        else:
            def_tree = self._parse_struct(unit, header_end, params, members)
        return self._read_struct(name, key, def_tree, unit, template, members)

    def _specialized_only(self, name: str, targs, tree) -> StructType:
        """``S<args>`` for a struct template whose primary is only declared: the
        specialization written for ``args``."""
        values = {f"#{k}": self.template_arg(a) for k, a in enumerate(
            targs.children if targs is not None else []) if a is not None}
        key = _instance_name(name, values.values())
        if key in self.program.struct_types:
            return self.program.struct_types[key]
        special = self._specialization(name, values, tree)
        if special is None:
            raise self.error(f"no specialization of struct template '{name}' for {key}", tree,
                             UnsupportedError)
        def_tree, unit = special
        return self._read_struct(name, key, def_tree, unit, {}, [])

    def _read_struct(self, name: str, key: str, def_tree, unit, template: dict,
                     members: list) -> StructType:
        """The StructType ``key`` read from a parsed definition (in ``unit``, its template
        parameters bound to ``template``), kept for the next use of ``key``."""
        saved = (self.scopes, self.offset, self.cur_loc)
        self._struct_depth = self.__dict__.get("_struct_depth", 0) + 1
        try:
            self.scopes, self.offset = [self.scopes[0], template_symbols(template.items())], \
                unit.start
            self.cur_loc = self.loc_of(def_tree)
            fields, statics, defaults, types = self._struct_members_of(name, def_tree)
            align = self._declared_alignment(unit)
        finally:
            self._struct_depth -= 1
            self.scopes, self.offset, self.cur_loc = saved
        constructors = [m for m in members if m.name == name and m.has_body]
        text = self.program.src.text
        struct = StructType(key, fields, name, tuple(template.items()), statics,
                            bool(constructors),
                            any(_takes_nothing(text, m.name_end) for m in constructors),
                            defaults, types, align=align)
        self.program.struct_types[key] = struct
        return struct

    def _declared_alignment(self, unit) -> int:
        """The alignment the struct's head declares (``struct alignas(16) P {``, or an
        expression of its template parameters: ``alignas(sizeof(T) * Size)``), evaluated in
        the struct's template scope; 0 when it declares none or kir cannot evaluate it."""
        program = self.program
        text = program.src.text
        head_end = text.find("{", unit.start)
        found = _ALIGNMENT.search(text, unit.start, head_end)
        close = closing_bracket(text, found.end() - 1) if found is not None else -1
        if not 0 <= close < head_end:
            return 0
        params = set(template_parameters(program.src, unit))
        saved = self.offset
        try:
            tree = parse_unit(program.src, found.end(), close, "args",
                              program.type_names | params, program.template_names)
            self.offset = found.end()
            value = self.constant(tree.children[0], "the struct's alignment")
        except KirError:
            return 0  # (the alignment only lets kir move packs as vectors; none is safe)
        finally:
            self.offset = saved
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def _parse_struct(self, unit, header_end: int, params: set[str], members: list):
        """A struct unit's definition parsed with its member functions and template header
        blanked (``header_end`` -1 without one)."""
        program, text = self.program, self.program.src.text
        hidden = [(m.start, m.end, blank(text, m.start, m.end)) for m in members]
        if header_end >= 0:
            hidden.append((unit.start, header_end, blank(text, unit.start, header_end)))
        def_tree = parse_unit(PatchedSource(program.src, hidden), unit.start, unit.end,
                              "top_decl", program.type_names | params, program.template_names)
        return def_tree.children[0] if def_tree.data == "top_decl" else def_tree

    def _specialization(self, name: str, template: dict, tree):
        """(definition, unit) of the explicit specialization of struct template ``name``
        for these template values, or None when none is written for them."""
        text = self.program.src.text
        for unit in self.program.specializations.get(name, []):
            header_end = unit.start + template_header_length(text[unit.start:unit.end])
            if text[unit.start:header_end].replace(" ", "") != "template<>":
                raise _located(self.program.src, unit.start, f"partial specialization of "
                               f"struct template '{name}' not supported")
            if member_functions(text[unit.start:unit.end], unit.start):
                raise _located(self.program.src, unit.start, f"member functions of a "
                               f"specialization of '{name}' not supported")
            def_tree = self._parse_struct(unit, header_end, set(), [])
            targs = next((c for c in def_tree.children
                          if isinstance(c, Tree) and c.data == "template_args"), None)
            saved = self.offset
            self.offset = unit.start
            try:
                given = [self.template_arg(a) for a in targs.children if a is not None]
            finally:
                self.offset = saved
            if [_arg_text(v) for v in given] == [_arg_text(v) for v in template.values()]:
                return def_tree, unit
        return None

    def _struct_template(self, name: str, start: int, header_end: int, targs,
                         tree, params: set[str]) -> dict[str, object]:
        """A struct template's parameters bound to ``targs`` (then their defaults): each a
        type or a ``Const``."""
        program = self.program
        header = parse_unit(program.src, start, header_end, "template_header",
                            program.type_names | params,
                            program.template_names)
        given = [(self.template_arg(a), a) for a in
                 (targs.children if targs is not None else []) if a is not None]
        saved = self.scopes
        self.scopes = [self.scopes[0], {}]
        try:
            self._bind_function_template(name, header, given, [], [], tree)
            bound = self.scopes[1]
        finally:
            self.scopes = saved
        values: dict[str, object] = {}
        for param, sym in bound.items():
            if isinstance(sym, TypeSym) and sym.type is None:
                raise self.error(f"struct template '{name}' needs its template arguments: "
                                 f"write {name}<...>", tree)
            values[param] = sym.type if isinstance(sym, TypeSym) else sym.value
        return values

    def _struct_members_of(self, name: str, tree) -> tuple[tuple, tuple, tuple, tuple]:
        fields: list[tuple[str, object]] = []
        statics: list[tuple[str, object]] = []
        defaults: list[tuple[str, object]] = []
        types: list[tuple[str, object]] = []
        for decl in tree.children:
            if isinstance(decl, Tree) and decl.data in ("alias_decl", "member_typedef"):
                types.append(self._member_alias(decl))
                continue
            if not (isinstance(decl, Tree) and decl.data == "declaration"):
                continue
            specs, *inits = decl.children
            ctype = self.resolve_specs(specs)
            quals = set(self.last_qualifiers)
            if "static" in quals and quals & {"const", "constexpr"} and not ctype.pointers:
                statics.extend(self._static_member(name, ctype.base, inits))
                continue
            if quals & {"static", "__shared__", "__constant__"}:
                raise self.error(f"static members of struct '{name}' not supported (only "
                                 "'static constexpr' constants)", decl, UnsupportedError)
            for init_decl in inits:
                field = self._data_member(name, ctype, init_decl)
                fields.append(field)
                default = self._default_member_value(name, field, init_decl)
                if default is not None:
                    defaults.append((field[0], default))
        if not fields and not types and not statics:
            raise self.error(f"struct '{name}' has no data members", tree, UnsupportedError)
        return tuple(fields), tuple(statics), tuple(defaults), tuple(types)

    def _member_alias(self, tree) -> tuple[str, object]:
        """``using Type = float4;`` or ``typedef float4 Type;`` in a struct: (name, type),
        also bound at once for the members after it."""
        if tree.data == "alias_decl":
            ident, ctype = str(tree.children[0]), self.resolve_type_name(tree.children[1])
        else:
            ctype = self.resolve_specs(tree.children[0])
            pointers, _ref, ident, dims = self.split_declarator(tree.children[1])
            ctype = ct.CType(ctype.base, len(pointers) + len(dims), ctype.const)
        if ctype.pointers:
            raise self.error(f"member type '{ident}' of a pointer type not supported", tree,
                             UnsupportedError)
        self.bind(ident, TypeSym(ctype.base))
        return ident, ctype.base

    def _default_member_value(self, name: str, field, init_decl) -> Const | None:
        """A data member's default initializer (``float m = -INFINITY;``, ``int n{0};``):
        a constant the member takes wherever the struct is made without a value for it."""
        if init_decl.data == "brace_declarator":
            items = [i for i in init_decl.children[1:] if i is not None]
            init = items[0] if len(items) == 1 else None
            if len(items) > 1:
                raise self.error(f"default member initializer of '{field[0]}' with several "
                                 "values not supported", init_decl, UnsupportedError)
        else:
            init = (init_decl.children + [None])[1]
        if init is None:
            return None
        ident, t = field
        if not isinstance(t, (ct.ScalarType, ct.VectorType)) or isinstance(
                init, Tree) and init.data == "init_list":
            raise self.error(f"default member initializer of '{ident}' (a {t}) not supported: "
                             "only scalar and vector members take one", init, UnsupportedError)
        stmts, value = self.capture(lambda: self.coerce(self.rvalue(init), t, init))
        if stmts or not closed(value):
            raise self.error(f"default member initializer of '{ident}' in struct '{name}' "
                             "must be a compile-time constant", init, UnsupportedError)
        return value

    def _static_member(self, name: str, base, inits: list) -> list[tuple[str, Const]]:
        """``static constexpr int size = 4;``: constants, bound at once (later members
        may use them, as ``T payload[size];`` does)."""
        out = []
        for init_decl in inits:
            declarator, init = (init_decl.children + [None])[:2]
            ident = self.split_declarator(declarator)[2]
            if init is None or not isinstance(base, ct.ScalarType):
                raise self.error(f"static member '{ident}' of struct '{name}' must be a "
                                 "scalar constant with its value", init_decl, UnsupportedError)
            stmts, value = self.capture(lambda: self.coerce(self.rvalue(init), base, init))
            if stmts or not closed(value) or not isinstance(value, Const):
                raise self.error(f"static member '{ident}' of struct '{name}' must have a "
                                 "compile-time constant value", init, UnsupportedError)
            self.bind(ident, ConstSym(value))
            out.append((ident, value))
        return out

    def _data_member(self, name: str, ctype, init_decl) -> tuple[str, object]:
        declarator, init = (init_decl.children + [None])[:2]
        pointers, is_ref, ident, dims = self.split_declarator(declarator)
        if len(pointers) > 1 or is_ref or (pointers and dims):
            raise self.error(f"member '{ident}' of struct '{name}': references, pointers to "
                             "pointers and arrays of pointers not supported", init_decl,
                             UnsupportedError)
        base = ctype.base
        if base is None or base is AUTO or isinstance(base, CgType):
            raise self.error(f"member '{ident}' of struct '{name}' has type {base}", init_decl,
                             UnsupportedError)
        if pointers:
            if isinstance(base, StructType):
                raise self.error(f"member '{ident}' of struct '{name}': pointers to structs "
                                 "not supported", init_decl, UnsupportedError)
            return ident, FieldPointer(base, ctype.const)
        if dims:
            if isinstance(base, StructType):
                raise self.error("arrays of structs inside a struct not supported", init_decl,
                                 UnsupportedError)
            sizes = tuple(int(self.constant(d, "array size")) for d in dims if d is not None)
            if len(sizes) != len(dims) or any(n <= 0 for n in sizes):
                raise self.error(f"array member '{ident}' needs positive sizes", init_decl)
            self.check_array_elements(ident, sizes, init_decl)
            return ident, FieldArray(base, sizes)
        return ident, base


def template_symbols(pairs) -> dict[str, object]:
    """A struct's template parameters as scope symbols: a type's ``TypeSym``, a value's
    ``ConstSym``."""
    return {param: ConstSym(v) if isinstance(v, Const) else TypeSym(v) for param, v in pairs}


def _located(src, offset: int, message: str) -> UnsupportedError:
    loc = src.loc(offset)
    return UnsupportedError(message, loc, source_line=src.source_line(loc))


_ALIGNMENT = re.compile(r"\b(?:alignas|__align__)\s*\(")


def _takes_nothing(text: str, name_end: int) -> bool:
    """Whether the parameter list after a function's name is empty (or ``void``)."""
    open_at = text.find("(", name_end)
    close_at = text.find(")", open_at)
    return text[open_at + 1:close_at].strip() in ("", "void")


def _instance_name(name: str, values) -> str:
    """A struct template's instance as kir names it (``Pack<f32, 4>``): its identity."""
    return f"{name}<{', '.join(map(_arg_text, values))}>"


def _arg_text(value) -> str:
    return str(value.value).lower() if isinstance(value, Const) else str(value)


__all__ = ["MAX_STRUCT_DEPTH", "StructDefMixin", "template_symbols"]
