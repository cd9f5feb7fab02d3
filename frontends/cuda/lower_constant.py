"""``__constant__`` memory in the CUDA lowering (a mixin of the Lowerer).

A file-scope ``__constant__ float c_filter[9];`` is filled by the host before the launch
(``cudaMemcpyToSymbol``), so to kir it is one more input of the kernels that read it: the
first read makes it a kernel parameter named as the symbol, after the declared ones — a
read-only buffer for an array, a scalar for a scalar, one argument per field for a struct
(as a struct parameter's, :mod:`kir.frontends.cuda.lower_struct`). The spec gives it like
any argument (``c_filter = { dtype = "f32", shape = [9] }``), and the emitted kernels take it
as an input, which on Apple GPUs and in MLX is what constant data is anyway. A
``__constant__`` declared with its values (``= {0.25f, 0.5f, 0.25f}``) is a constant of the
kernel: a scalar is folded, an array becomes a local table.
"""

from __future__ import annotations

import math
import re

from lark import Tree

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.parser import parse_unit
from kir.frontends.cuda.values import (
    ArraySym,
    BufferInfo,
    MemRef,
    RefSym,
    StructType,
    VarSym,
)

from kir.errors import UnsupportedError
from kir.ir import Const, Param
from kir.ir.types import I32, PointerType, ScalarType, VectorType


class ConstantMixin:
    """File-scope ``__constant__`` symbols bound on first use; relies on the Lowerer."""

    def bind_constant(self, ident: str) -> bool:
        """Bind the file's ``__constant__`` ``ident`` in the outermost scope (adding the
        kernel parameters it becomes to ``self.implicit_params``); False when the file has
        no such symbol."""
        program = self.program
        unit = program.constants.get(ident) if program is not None else None
        if unit is None or ident in self.constants_bound:
            return False
        self.constants_bound.add(ident)
        text = program.src.text
        elsewhere = text[:unit.start] + " " * (unit.end - unit.start) + text[unit.end:]
        written = "__device__" in text[unit.start:unit.end].split("=", 1)[0] \
            and _written(elsewhere, ident)
        tree = parse_unit(program.src, unit.start, unit.end, "top_decl", program.type_names,
                          program.template_names)
        decl = tree.children[0] if tree.data == "top_decl" else tree
        saved = (self.scopes, self.offset, self.cur_loc, self.out)
        self.scopes, self.offset, self.out = [self.scopes[0]], unit.start, []
        try:
            self.cur_loc = self.loc_of(decl)
            specs, *inits = decl.children
            ctype = self.resolve_specs(specs)
            quals = set(self.last_qualifiers)
            for init_decl in inits:
                declarator, init = (init_decl.children + [None])[:2]
                pointers, is_ref, name, dims = self.split_declarator(declarator)
                if name != ident:
                    continue
                if pointers or is_ref:
                    raise self.error(f"__constant__ pointer or reference '{ident}' not "
                                     "supported", init_decl, UnsupportedError)
                if written:
                    self._scratch_parameter(ident, ctype.base, dims, init, init_decl)
                elif init is not None:  # values in the source: a constant of the kernel
                    self.declare(ctype, (quals - {"__constant__", "__device__"}) | {"const"},
                                 declarator,
                                 init, init_decl)
                else:
                    self._constant_parameter(ident, ctype.base, dims, init_decl)
            self.prologue.extend(self.out)
        finally:
            self.scopes, self.offset, self.cur_loc, self.out = saved
        return True

    def _scratch_parameter(self, ident: str, base, dims: list, init, tree) -> None:
        """A ``__device__`` variable the kernel writes (a counter of the blocks done): a
        workspace buffer the launch names (``Launch.scratch``), zero at every launch. CUDA
        keeps it between launches; a kernel that works more than once resets it itself
        (the last block sets the counter back to 0), and then a zero start is the same."""
        zero = init is None or isinstance(base, ScalarType) and self._starts_at_zero(init)
        if not isinstance(base, ScalarType) or not zero:
            what = "not zero" if isinstance(base, ScalarType) else f"of type {base}"
            error = self.error(
                f"'{ident}' is a __device__ variable the file's code writes, and its start is "
                f"{what}: kir gives such a variable a zero-filled workspace at every launch",
                tree, UnsupportedError)
            error.hint = (f"start '{ident}' at 0, or pass it to the kernel as a buffer "
                          "argument (the spec then says its contents)")
            raise error
        sizes = self.array_sizes(ident, dims, tree, "__device__ array",
                                 variable_length=False) if dims else []
        elem = ct.scalar_of(base)
        self.used.add(ident)
        self.buffers[ident] = BufferInfo(elem, "global", False)
        if sizes:
            self.bind(ident, ArraySym(ident, base, tuple(sizes), "global"))
        else:
            self.bind(ident, RefSym(MemRef(ident, Const(0, I32), elem)))
        self.implicit_params.append(Param(ident, PointerType(elem, "global", False, False),
                                          loc=self.loc_of(tree)))
        self.scratch.append((ident, str(math.prod(sizes) if sizes else 1)))

    def _starts_at_zero(self, init) -> bool:
        """Whether an initializer (``= 0``, ``= {0, 0u}``) is zeros: each value lowered and
        folded as any other expression of the file."""
        if isinstance(init, Tree) and init.data == "init_list":
            return all(self._starts_at_zero(item) for item in init.children)
        return ct.const_value(self.rvalue(init)) == 0

    def _constant_parameter(self, ident: str, base, dims: list, tree) -> None:
        """``__constant__`` memory the host fills: a kernel parameter."""
        if isinstance(base, StructType):
            if dims:
                raise self.error(f"__constant__ array of structs '{ident}' not supported",
                                 tree, UnsupportedError)
            self.implicit_params.extend(self.struct_kernel_param(ident, base, False, tree))
            return
        if not isinstance(base, (ScalarType, VectorType)):
            raise self.error(f"__constant__ '{ident}' of type {base} not supported", tree,
                             UnsupportedError)
        self.used.add(ident)
        if not dims:
            if isinstance(base, VectorType):
                raise self.error(f"__constant__ vector '{ident}' not supported (declare it "
                                 "as an array of its elements)", tree, UnsupportedError)
            self.bind(ident, VarSym(ident, base))
            self.implicit_params.append(Param(ident, base, loc=self.loc_of(tree)))
            return
        sizes = self.array_sizes(ident, dims, tree, "__constant__ array", variable_length=False)
        elem = ct.scalar_of(base)
        self.buffers[ident] = BufferInfo(elem, "global", True)
        self.bind(ident, ArraySym(ident, base, tuple(sizes), "global"))
        self.implicit_params.append(Param(ident, PointerType(elem, "global", True, False),
                                          loc=self.loc_of(tree)))


def _written(text: str, ident: str) -> bool:
    """Whether code in ``text`` assigns, increments or atomically updates ``ident`` (or an
    element of it)."""
    name = re.escape(ident)
    return re.search(rf"(?<![\w.>])(?:{name}\s*(?:\[[^\]]*\]\s*)*(?:[-+*/%&|^]|<<|>>)?=(?!=)"
                     rf"|{name}\s*(?:\[[^\]]*\]\s*)*(?:\+\+|--)|(?:\+\+|--)\s*{name}\b"
                     rf"|atomic\w*\s*\(\s*&?\s*{name}\b)", text) is not None
