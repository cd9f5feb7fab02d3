"""Constructors written in a struct (a mixin of the Lowerer).

``__device__ Acc() : m(-INFINITY), s(0.0f) {}`` and ``__device__ explicit Vec(float a) :
x(a), y(a) { ... }``: where C++ runs a constructor — a declaration without a value (a
user-written default constructor), ``S{a, b}`` / ``S s{a, b}`` / ``return {a, b}`` and
``S(a, b)`` — kir makes the struct's locals (default member initializers applied), assigns
the members the initializer list names, each from its expression evaluated with the
constructor's parameters bound, then inlines the constructor's body as a member function
of the new object. The constructor's text is parsed as a ``void`` function (its
``__device__`` read as ``void``, its name as a plain identifier, its initializer list
blanked); each initializer's expression is parsed from its own place in the file.
"""

from __future__ import annotations

import re

from kir.frontends.cuda.parser import error, parse_unit
from kir.frontends.cuda.struct_text import blank, initializer_items
from kir.frontends.cuda.values import FunctionSym, StructType, StructVal
from lark import Tree

from kir.errors import UnsupportedError
from kir.ir import Var

_DEVICE = re.compile(r"\b__device__\b")


class ConstructorMixin:
    """``S(...)``, ``S{...}``, ``S s;`` for a struct with constructors; relies on the
    Lowerer (struct locals, member functions, inlining)."""

    def construct(self, struct: StructType, arg_trees: list, tree, base: str = "obj",
                  args: list | None = None) -> StructVal:
        """A new ``struct`` made by the constructor that takes ``arg_trees``."""
        key = self._constructor_function(struct, tree)
        obj = self.struct_local(struct, base)
        members = {m.start: m for m in self.struct_members(struct.base)}

        def initializers(fn: FunctionSym) -> None:
            member = members[fn.offset]
            if member.init_list is not None:
                self._run_initializers(obj, member, tree)

        self.inline_call(key, arg_trees, tree, True, bound=self.method_scope(struct, obj),
                         args=args, prologue=initializers)
        return obj

    def _run_initializers(self, obj: StructVal, member, tree) -> None:
        """``: m(a), s{b}``: each member assigned its expression (parameters in scope), in
        the order the members are declared — C++'s order, whatever the list's."""
        text = self.src.text
        order = [name for name, _ in obj.type.fields]
        items = initializer_items(text, *member.init_list)
        for field, start, end in sorted(items, key=lambda item: order.index(item[0])
                                        if item[0] in order else -1):
            if obj.type.field(field) is None:
                raise error(f"{obj.type} has no member '{field}' to initialize", start - 1,
                            self.src)
            items = parse_unit(self.src, start, end, "args", self.program.type_names,
                               self.program.template_names).children \
                if text[start:end].strip() else []
            saved = self.offset
            self.offset = start
            try:
                part = obj.parts[field]
                if isinstance(part, StructVal):
                    value = self.construct(part.type, items, tree) \
                        if part.type.constructors else self.struct_from_list(part.type, items,
                                                                             tree)
                    self.assign_struct(part, value, tree)
                elif isinstance(part, Var) and len(items) == 1:
                    self.write(part, self.coerce(self.rvalue(items[0]), part.type, items[0]),
                               items[0])
                else:
                    raise error(f"initializer of member '{field}' (an array, a pointer or "
                                "several values) not supported", start - 1, self.src,
                                UnsupportedError)
            finally:
                self.offset = saved

    def _constructor_function(self, struct: StructType, tree) -> str:
        """The name under which ``struct``'s constructors sit in ``self.functions``."""
        made = self.__dict__.setdefault("_constructors", {})
        if struct.base in made:
            return made[struct.base]
        key = f"{struct.base}_init"
        while key in self.functions:
            key += "_"
        syms = []
        for m in self.struct_members(struct.base):
            if m.name != struct.base or not m.has_body:
                continue
            device = _DEVICE.search(self.src.text, m.start, m.name_start)
            if device is None:
                raise self.error(f"constructor of {struct} is not __device__", tree,
                                 UnsupportedError)
            patches = [(device.start(), device.end(), "void"),
                       (m.name_start, m.name_end, "c")]
            explicit = re.search(r"\bexplicit\b", self.src.text[m.start:m.name_start])
            if explicit:
                patches.append((m.start + explicit.start(), m.start + explicit.end(), ""))
            if m.init_list is not None:  # blanked here, run by construct()
                patches.append((m.init_list[0] - 1, m.init_list[1],
                                blank(self.src.text, m.init_list[0] - 1, m.init_list[1])))
            syms.append(self.member_sym(struct, key, m, patches))
        if not syms:
            raise self.error(f"{struct} has no constructor kir can read", tree,
                             UnsupportedError)
        self.functions[key] = syms
        made[struct.base] = key
        return key

    def constructor_arguments(self, tree) -> list:
        """The arguments of ``S(a, b)``: a comma expression's operands."""
        if tree is None:
            return []
        if isinstance(tree, Tree) and tree.data == "comma":
            return self.constructor_arguments(tree.children[0]) + [tree.children[1]]
        return [tree]


__all__ = ["ConstructorMixin"]
