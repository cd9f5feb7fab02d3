"""Types for the CUDA lowering (a mixin of the Lowerer): type specifiers to types, typedefs
and ``using`` aliases, enums, and ``typename`` template parameters (struct definitions:
``lower_struct_def``).

A type here is a kir scalar or vector type, a :class:`StructType` (never in kir IR: its
values are one local per field), a :class:`CgType` (cooperative groups), ``AUTO`` or None
(void). Names are looked up innermost first: template parameters and local aliases (bound
in the lowering's scopes as :class:`TypeSym`), the file's typedefs and aliases, its structs,
then CUDA's builtin names. ``std::`` and ``cuda::std::`` qualifications are dropped.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.parser import CUB_HINT, normalize_name, qualified_suffixes
from kir.frontends.cuda.torch_types import TYPE_FUNCTIONS, accumulate_type
from kir.frontends.cuda.program import TYPE_TRAITS
from kir.frontends.cuda.values import (
    AUTO,
    CgType,
    ConstSym,
    FunctionName,
    TemplateName,
    TypeSym,
)
from lark import Token, Tree

from kir.errors import UnsupportedError
from kir.ir import Const
from kir.ir.types import BOOL, I32, SCALARS, ScalarType, VectorType

#: Cooperative-groups type names (normalized) and the kind of group or operator each is.
CG_TYPES = {"cg::thread_block": "block", "cg::thread_block_tile": "tile", "cg::grid_group": "grid",
            "cg::thread_group": "group", "cg::coalesced_group": "coalesced", "cg::plus": "plus",
            "cg::greater": "greater", "cg::less": "less"}


VOLATILE_HINT = (
    "a volatile kernel parameter points into global memory, which other blocks may change "
    "(a flag polled until it is set); kir has no such cross-block waits. Volatile shared "
    "memory (a warp's lanes exchanging values without barriers) is read")


class DisabledOverload(UnsupportedError):
    """A function whose ``enable_if_t`` condition fails for the template arguments given: an
    overload C++ drops, so another of the same name may be the one (frontends/cuda
    ``_lower`` tries them in order)."""


class TypeMixin:
    """Type resolution; relies on the Lowerer for scopes, errors and constants."""

    # ------------------------------------------------------------------ specifiers

    def refuse_volatile_memory(self, memory: bool, ident: str, tree,
                               quals: set | None = None) -> None:
        """A volatile pointer kernel parameter (``quals``, else the last declaration's) is
        refused: see VOLATILE_HINT (volatile shared memory: frontends/cuda/lockstep.py)."""
        if memory and "volatile" in (self.last_qualifiers if quals is None else quals):
            error = self.error(f"volatile pointer or array '{ident}' not supported", tree,
                               UnsupportedError)
            error.hint = VOLATILE_HINT
            raise error

    def resolve_specs(self, specs, offset: int | None = None) -> ct.CType:
        """The CType of ``decl_specs``; qualifiers go to ``self.last_qualifiers``."""
        saved = self.offset
        if offset is not None:
            self.offset = offset
        try:
            words, quals, targs, member = [], set(), None, None
            for spec in specs.children:
                if spec.data in ("launch_bounds", "align_spec"):
                    continue
                if spec.data == "qualifier":
                    quals.add(str(spec.children[0]))
                    continue
                if spec.data == "member_type":  # typename S<T>::Type
                    member = self.member_type(spec)
                    continue
                for child in spec.children:
                    if isinstance(child, Token):
                        if child.type != "STRUCT":
                            words.append(str(child))
                    elif isinstance(child, Tree) and child.data == "template_args":
                        targs = child
            if member is not None and words:
                raise self.error(f"conflicting type specifiers '{' '.join(words)}' and a "
                                 "member type", specs)
            base = member if member is not None else self.resolve_words(words, specs, targs)
            # set after resolving: a struct parsed on first use resolves its own fields
            self.last_qualifiers = quals
            return ct.CType(base, 0, "const" in quals or "constexpr" in quals)
        finally:
            self.offset = saved

    def resolve_words(self, words: list[str], tree, targs=None):
        for w in words:
            if w in ct.UNSUPPORTED_TYPES:
                raise self.error(f"{ct.UNSUPPORTED_TYPES[w]} not supported", tree,
                                 UnsupportedError)
        named = [w for w in words if self.is_type_word(w)]
        if named:
            if len(words) != 1:
                raise self.error(f"conflicting type specifiers '{' '.join(words)}'", tree)
            return self.named_type(named[0], tree, targs)
        if targs is not None:
            raise self.error(f"'{' '.join(words)}' is not a template", tree)
        if not words:
            raise self.error("missing type", tree)
        if words == ["auto"]:
            return AUTO
        result = ct.combine_type_words(words)
        if isinstance(result, str):
            if result in ("long double",):
                raise self.error("long double not supported", tree, UnsupportedError)
            if result.startswith("conflicting"):
                raise self.error(result, tree)
            raise self.error(f"unknown type '{result}'", tree)
        return result

    def is_type_word(self, word: str) -> bool:
        return word not in ct.KEYWORD_TYPES

    def named_type(self, word: str, tree, targs=None):
        """The type a (possibly qualified) type name stands for."""
        sym = self.lookup(word)
        if isinstance(sym, TemplateName):  # a template template parameter: what it names
            word, sym = sym.name, None
        if isinstance(sym, TypeSym):
            if sym.type is None:
                raise self.error(sym.missing, tree, UnsupportedError)
            return sym.type
        name = normalize_name(word)
        if name.startswith("cub::"):
            collective = self.cub_type(name, tree, targs)
            if collective is None:
                found = self.error(f"'{word}' is not a type kir knows", tree, UnsupportedError)
                found.hint = CUB_HINT
                raise found
            return collective
        if name in CG_TYPES or "cg::" + name in CG_TYPES and name in self.program.type_names:
            return self._cg_type(CG_TYPES.get(name) or CG_TYPES["cg::" + name], tree, targs)
        for candidate in qualified_suffixes(name):
            # data-free structs: a function object, or one converting to a pointer
            made = self.functor_struct(candidate, targs) or self.view_struct(candidate, targs)
            if made is not None:
                return made
        if targs is not None:
            for candidate in qualified_suffixes(name):
                if candidate in self.program.struct_units \
                        or candidate in self.program.specializations:
                    return self.struct_type(candidate, tree, targs)
            if name == "enable_if_t":
                return self._enabled_type(targs, tree)
            if name == "conditional_t":
                return self._conditional_type(targs, tree)
            if name in TYPE_FUNCTIONS:
                found = accumulate_type(name, [self.template_arg(a) for a in targs.children
                                               if a is not None])
                if isinstance(found, str):
                    raise self.error(found, tree)
                return found
            raise self.error(f"template type '{word}' not supported (only cooperative groups' "
                             "templates and the file's own structs)", tree, UnsupportedError)
        for candidate in qualified_suffixes(name):
            if candidate in self.typedefs:
                return self.typedefs[candidate]
            if candidate in self.program.broken:
                raise self.program.broken[candidate]
            if candidate in self.program.struct_units:
                return self.struct_type(candidate, tree)
            if candidate in ct.NAMED_TYPES:
                return ct.NAMED_TYPES[candidate]
        raise self.error(f"unknown type '{word}'", tree)

    def _enabled_type(self, targs, tree):
        """``std::enable_if_t<cond [, T]>``: T (void when not given) where ``cond`` holds; a
        function whose type it is does not exist otherwise (C++ drops the overload)."""
        args = [a for a in targs.children if a is not None]
        if not 1 <= len(args) <= 2:
            raise self.error("enable_if_t takes a condition and an optional type", tree)
        if not self.constant(args[0], "an enable_if_t condition"):
            raise self.error("enable_if_t's condition is false for these template arguments: "
                             "this function does not exist for them", tree, DisabledOverload)
        return self.template_arg(args[1]) if len(args) == 2 else None

    def _conditional_type(self, targs, tree):
        """``std::conditional_t<cond, A, B>``: A where the constant ``cond`` holds, else B."""
        args = [a for a in targs.children if a is not None]
        if len(args) != 3:
            raise self.error("conditional_t takes a condition and two types", tree)
        chosen = args[1] if self.constant(args[0], "a conditional_t condition") else args[2]
        return self.template_arg(chosen)

    def _cg_type(self, kind: str, tree, targs) -> CgType:
        args = [a for a in (targs.children if targs is not None else []) if a is not None]
        if kind == "tile":
            if len(args) != 1:
                raise self.error("thread_block_tile needs its size: thread_block_tile<32>", tree)
            size = self.constant(args[0], "a tile size")
            if size not in (1, 2, 4, 8, 16, 32):
                raise self.error(f"thread_block_tile<{size}>: tiles of 1 to 32 threads (a "
                                 "power of two) are supported", tree, UnsupportedError)
            return CgType("tile", int(size))
        return CgType(kind)

    def resolve_type_name(self, tree) -> ct.CType:
        specs, *pointers = tree.children
        base = self.resolve_specs(specs)
        return ct.CType(base.base, len(pointers), base.const)

    def template_arg(self, tree):
        """A template argument: a type (a ``type_name``), a struct template's name (for a
        template template parameter) or a constant expression's value."""
        named = self.template_name(tree)
        if named is not None:
            return named
        function = self.function_argument(tree)
        if function is not None:
            return function
        if isinstance(tree, Tree) and tree.data == "type_name":
            ctype = self.resolve_type_name(tree)
            if ctype.pointers:
                raise self.error("pointer template arguments not supported", tree,
                                 UnsupportedError)
            return ctype.base
        if isinstance(tree, Tree) and tree.data == "name" and self.names_type(tree):
            return self.named_type(str(tree.children[0]), tree)
        return Const(self.constant(tree, "a template argument"), I32)

    def function_argument(self, tree) -> FunctionName | None:
        """``tree`` as a :class:`FunctionName` when it names one of the file's
        ``__device__`` functions (``silu``, ``silu_kernel<scalar_t>``), else None."""
        if not (isinstance(tree, Tree) and tree.data in ("name", "template_id")):
            return None
        word = str(tree.children[0])
        name = self.function_name(word)
        if self.lookup(word) is not None or name not in self.functions:
            return None
        targs = tree.children[1] if tree.data == "template_id" else None
        given = tuple((self.template_arg(a), a) for a in
                      (targs.children if targs is not None else []) if a is not None)
        return FunctionName(name, given)

    def bind_function_param(self, param, value) -> None:
        """A function template parameter bound to ``value`` (a :class:`FunctionName`, or a
        spec's ``&name``)."""
        ident = function_param_name(param)
        if isinstance(value, str) and value.startswith("&"):
            value = FunctionName(self.function_name(value[1:]))
        if not isinstance(value, FunctionName) or value.name not in self.functions:
            what = f"'{value.name}' is not a __device__ function of this file" \
                if isinstance(value, FunctionName) else "missing value"
            raise self.error(f"{what} for function template parameter '{ident}' (give it: "
                             f"templates = {{ {ident} = {{ function = \"NAME\" }} }})", None)
        self.bind(ident, value)

    def template_name(self, tree) -> TemplateName | None:
        """``tree`` as a :class:`TemplateName` when it is the bare name of a struct template
        (or of a template template parameter), else None."""
        if not (isinstance(tree, Tree) and tree.data == "type_name" and len(tree.children) == 1
                and len(tree.children[0].children) == 1):
            return None
        words = [c for spec in tree.children[0].children for c in spec.children
                 if c is not None]
        if len(words) != 1 or not isinstance(words[0], Token):
            return None
        word = str(words[0])
        sym = self.lookup(word)
        if isinstance(sym, TemplateName):
            return sym
        unit = self.program.struct_units.get(normalize_name(word))
        if sym is None and unit is not None and self.src.text.startswith("template", unit.start):
            return TemplateName(normalize_name(word))
        return None

    def member_type(self, tree):
        """The type ``typename S<args>::Type`` names: a struct's member type alias (or a CUB
        collective's ``TempStorage``)."""
        name, targs, member = tree.children
        storage = self.cub_storage(self.named_type(str(name), tree, targs),
                                   str(member).lstrip(":"), tree)
        if storage is not None:
            return storage
        struct, member = self.template_member(tree)
        found = struct.member_type(member)
        if found is None:
            raise self.error(f"{struct} has no member type '{member}'", tree, UnsupportedError)
        return found

    def type_trait(self, name: str, targs, tree) -> Const | None:
        """The value of a ``<type_traits>`` query (``std::is_same_v<T, float>``), or None
        when ``name`` is not one."""
        name = normalize_name(name)
        if name not in TYPE_TRAITS:
            return None
        args = [self.template_arg(a) for a in
                (targs.children if targs is not None else []) if a is not None]
        kind = name.removesuffix("_v")
        if len(args) != (2 if kind == "is_same" else 1) or isinstance(args[0], Const):
            raise self.error(f"'{name}' takes {2 if kind == 'is_same' else 1} type(s)", tree)
        t = args[0]
        scalar = isinstance(t, ScalarType)
        value = {"is_same": lambda: t == args[1],
                 "is_floating_point": lambda: scalar and t.is_float,
                 "is_integral": lambda: scalar and not t.is_float,
                 "is_signed": lambda: scalar and (t.is_float or t.is_signed),
                 "is_unsigned": lambda: scalar and not t.is_float and not t.is_signed}[kind]()
        return Const(bool(value), BOOL)

    def names_type(self, tree) -> bool:
        return isinstance(self.lookup(str(tree.children[0])), TypeSym)

    # ------------------------------------------------------------ aliases and enums

    def declare_alias(self, tree, table: dict | None = None) -> None:
        """``typedef T name;`` or ``using name = T;``: into ``table`` (the file's typedefs)
        or, inside a function, the current scope."""
        if tree.data == "alias_decl":
            ident, type_tree = str(tree.children[0]), tree.children[1]
            ctype = self.resolve_type_name(type_tree)
            pointers = ctype.pointers
        elif len(tree.children) == 1 or not (isinstance(tree.children[-1], Tree)
                                             and tree.children[-1].data == "declarator"):
            # `typedef float real_t;` inside a function: the parser saw real_t as a type
            # name (it is one, afterwards), so it ends the specifiers
            specs = tree.children[0]
            last = specs.children[-1]
            if last.data != "type_word" or len(specs.children) < 2:
                raise self.error("typedef without a name", tree)
            ident = str(last.children[0])
            ctype = self.resolve_specs(Tree("decl_specs", specs.children[:-1], specs.meta))
            pointers = 0
        else:
            specs, declarator = tree.children[-2:]
            ctype = self.resolve_specs(specs)
            pointer_trees, is_ref, ident, dims = self.split_declarator(declarator)
            pointers = len(pointer_trees) + bool(is_ref) + len(dims)
        if pointers:
            raise self.error(f"typedef '{ident}' of a pointer, reference or array type not "
                             "supported", tree, UnsupportedError)
        if ctype.base is AUTO:
            raise self.error("'auto' in an alias", tree)
        if table is not None:
            table[ident] = ctype.base
        else:
            self.bind(ident, TypeSym(ctype.base))

    def declare_enum(self, tree, constants: dict, table: dict | None = None) -> None:
        """An enum's enumerators become integer constants (``Mode::A`` for a scoped enum)."""
        scoped, name, _base, listed = tree.children
        items = listed.children if listed is not None else []
        value = -1
        type_name = str(name) if name is not None else None
        for item in items:
            if item is None:
                continue
            ident = str(item.children[0])
            if len(item.children) > 1 and item.children[1] is not None:
                value = self.constant(item.children[1], f"the value of '{ident}'")
                if not isinstance(value, int) or isinstance(value, bool):
                    raise self.error(f"enumerator '{ident}' must be an integer", item)
            else:
                value += 1
            const = ConstSym(Const(int(value), I32))
            if scoped is None:
                constants[ident] = const
            if type_name is not None:
                constants[f"{type_name}::{ident}"] = const
        if type_name is not None and table is not None:
            table[type_name] = I32

def function_param_name(param) -> str:
    """The name of a function template parameter (``T (*ACT_FN)(const T&)``)."""
    return next(str(c) for c in param.children if isinstance(c, Token) and c.type == "IDENT")


def dtype_type(name: str) -> ScalarType | VectorType | None:
    """The kir type a spec dtype name stands for (``"f32"``), or None."""
    return SCALARS.get(name)


__all__ = ["CG_TYPES", "TypeMixin", "dtype_type"]
