"""Lowering of CUDA declarations (a mixin of the Lowerer): scalars, vectors and pointers,
``auto``, references, cooperative groups, structs (see ``lower_struct``), local and
``__shared__`` arrays with their initializers, and dynamic shared memory.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_cg import Dim3Val
from kir.frontends.cuda.lower_cub_ops import OPERATOR_KINDS
from kir.frontends.cuda.lower_lambda import LambdaVal
from kir.frontends.cuda.lower_stmt import closed
from kir.frontends.cuda.values import (
    carries,
    FunctorStruct,
    FunctorVal,
    AUTO,
    OFFSET_TYPE,
    ArraySym,
    ArrVal,
    BufferInfo,
    CgType,
    CgVal,
    ConstSym,
    PtrSym,
    PtrVal,
    StructType,
    StructVal,
    VarSym,
    count_of,
)
from lark import Token, Tree

from kir.errors import LimitError, UnsupportedError
from kir.ir import Alloc, Const, Declare, MakeVector, Store
from kir.ir.types import I8, I32, U8, VectorType


# More elements than a thread's local memory holds (512 KiB on NVIDIA GPUs) for any element
# type: a thread's array larger than this is a mistake, not a kernel.
MAX_ARRAY_ELEMENTS = 1 << 20


class DeclMixin:
    """Declarations; emits into ``self.out`` (arrays of the block into ``self.prologue``)."""

    def _s_declaration(self, tree) -> None:
        specs, *inits = tree.children
        ctype = self.resolve_specs(specs)
        quals = self.last_qualifiers
        if "__constant__" in quals:
            self._unsupported("__constant__ memory", tree)
        for init_decl in inits:
            if init_decl.data == "brace_declarator":  # T x{a, b}: list-initialization
                declarator, *items = init_decl.children
                init = Tree("init_list", [i for i in items if i is not None], init_decl.meta)
            elif init_decl.data == "paren_declarator":  # T x(a, b): direct-initialization
                declarator, args = init_decl.children
                items = list(args.children)
                init = items[0] if len(items) == 1 and not isinstance(
                    ctype.base, StructType) else Tree("init_list", items, init_decl.meta)
            else:
                declarator, init = (init_decl.children + [None])[:2]
            self.declare(ctype, quals, declarator, init, init_decl)

    def declare(self, ctype, quals: set, declarator, init, tree) -> None:
        pointers, is_ref, ident, dims = self.split_declarator(declarator)
        self._declare(ctype, quals, pointers, is_ref, ident, dims, init, tree)
        if "volatile" in quals and (pointers or dims) and not is_ref:
            sym = self.lookup(ident)  # a volatile shared array, or a pointer into one
            root = sym.name if isinstance(sym, ArraySym) else getattr(sym, "root", None)
            self.volatile_root(root, ident, tree)

    def _declare(self, ctype, quals: set, pointers, is_ref, ident, dims, init, tree) -> None:
        shared = "__shared__" in quals
        base = ctype.base
        if base is None and not pointers:
            raise self.error(f"variable '{ident}' of type void", tree)
        if is_ref:
            return self._declare_reference(ident, init, tree, "const" in quals, base)
        if base is AUTO and not pointers and not dims:
            if init is None or isinstance(init, Tree) and init.data == "init_list":
                raise self.error(f"'auto {ident}' needs an initializer expression", tree)
            return self._declare_auto(ident, quals, init, tree)
        if base is AUTO and len(pointers) == 1 and not dims and init is not None \
                and not (isinstance(init, Tree) and init.data == "init_list"):
            return self._declare_auto(ident, quals, init, tree, pointer=True)  # auto* p = q
        if base is AUTO:
            self._unsupported("'auto' pointers and arrays", tree)
        if isinstance(base, CgType) and not pointers:
            return self._declare_group(ident, base, dims, init, tree)
        if isinstance(base, StructType) and not pointers:
            return self.declare_struct(ident, base, dims, quals, init, tree)
        if isinstance(base, FunctorStruct) and not pointers and not dims:
            value = self.operand(init) if init is not None and not (
                isinstance(init, Tree) and init.data == "init_list") else FunctorVal(base)
            if not isinstance(value, FunctorVal):
                raise self.error(f"'{ident}' of {base} initialized from something else", tree)
            self.bind(ident, value)  # a function object holds no data: nothing declared
            return
        given = None  # the initializer, when lowered already
        if isinstance(base, StructType):
            if len(pointers) != 1 or dims or shared or init is None:
                self._unsupported(f"pointers to structs ({base}) other than one initialized "
                                  "from a buffer or a local struct", tree)
            given = self.operand(init)
            if isinstance(given, StructVal):  # S* p = &s: p names the local struct itself
                self.bind(ident, given)
                return
        if pointers and shared and "extern" in quals and len(dims) == 1 and dims[0] is None:
            # extern __shared__ char* mem[]: llm.c's spelling of raw dynamic shared memory,
            # only ever cast to what it holds: its bytes
            return self._declare_array(ident, I8, dims, quals, init, tree)
        if pointers:
            if shared or dims:
                self._unsupported("arrays of pointers / shared pointers", tree)
            if len(pointers) > 1:
                self._unsupported("pointers to pointers", tree)
            sym = PtrSym(None, base if base is not None else I32, self.fresh(ident))
            decl_init = None
            if init is not None:
                p = self.pointer(init) if given is None else self.pointer_value(given, init)
                if ct.scalar_of(sym.view) in (I8, U8):
                    self.byte_pool_used(p.root, init)  # a byte pointer kept
                sym.root = p.root
                if base is None:  # void* p = ...: raw memory, seen as what it points into
                    sym.view = p.view
                if isinstance(p.view, StructType) and p.view.carries == sym.view:
                    sym.view = p.view  # const int* w = reinterpret_cast<const int*>(int8s)
                self.check_view(sym.view, p.root, tree)
                decl_init = ct.convert(p.offset, OFFSET_TYPE)
            self.emit(Declare(sym.offset_var, OFFSET_TYPE, decl_init, loc=self.cur_loc))
            self.bind(ident, sym)
            return
        if dims or shared:
            return self._declare_array(ident, base, dims, quals, init, tree)
        folds = self.null_folds
        if init is not None and isinstance(init, Tree) and init.data == "init_list":
            value = self._vector_init(base, init, tree)
        else:
            given = self.operand(init) if init is not None else None
            if carries(base, given):  # int4 v = *reinterpret_cast<const int4*>(bf16s)
                self.bind(ident, self.struct_local(given.type, ident, given, tree))
                return
            value = self.rvalue_of(given, init) if init is not None else None
            if value is not None:
                value = self.coerce(value, base, init)
        if value is not None and quals & {"const", "constexpr"} and closed(value):
            self.bind(ident, ConstSym(value, pointer_test=self.null_folds != folds))
            return
        name = self.fresh(ident)
        self.emit(Declare(name, base, value, loc=self.cur_loc))
        self.bind(ident, VarSym(name, base))

    def _declare_reference(self, ident: str, init, tree, const: bool, base) -> None:
        """``T& r = lvalue;``: ``r`` names the lvalue itself (a local, or the buffer or array
        element chosen now); a const reference to a value holds a copy."""
        if init is None:
            raise self.error(f"reference '{ident}' must be initialized", tree)
        if isinstance(init, Tree) and init.data == "name":
            sym = self.lookup(str(init.children[0]))
            if isinstance(sym, VarSym):
                self.bind(ident, sym)
                return
        value = self.operand(init)
        if isinstance(value, (StructVal, CgVal)):
            self.bind(ident, value)
            return
        bound = self.reference_to(value, init, ident, None, const,
                                  None if base is AUTO else base)
        if isinstance(bound, tuple):  # a const reference to a temporary: a copy
            expr, t = bound
            name = self.fresh(ident)
            self.emit(Declare(name, t, expr, loc=self.cur_loc))
            self.bind(ident, VarSym(name, t))
        else:
            self.bind(ident, bound)

    def _declare_auto(self, ident: str, quals: set, init, tree, pointer: bool = False) -> None:
        folds = self.null_folds
        value = self.operand(init)
        if pointer and not isinstance(value, (PtrVal, ArrVal)):  # (a struct would be copied)
            self._unsupported(f"'auto* {ident}' initialized from something other than a "
                              "pointer into a buffer or array", tree)
        if isinstance(value, (CgVal, Dim3Val, FunctorVal, LambdaVal)):
            self.bind(ident, value)
            return
        if isinstance(value, StructVal):
            self.bind(ident, self.struct_local(value.type, ident, value, tree))
            return
        if isinstance(value, (PtrVal, ArrVal)):
            p = self.as_pointer(value, init)
            sym = PtrSym(p.root, p.view, self.fresh(ident))
            self.emit(Declare(sym.offset_var, OFFSET_TYPE, ct.convert(p.offset, OFFSET_TYPE),
                              loc=self.cur_loc))
            self.bind(ident, sym)
            return
        expr = self._value(value, init)
        if quals & {"const", "constexpr"} and closed(expr):
            self.bind(ident, ConstSym(expr, pointer_test=self.null_folds != folds))
            return
        name = self.fresh(ident)
        self.emit(Declare(name, expr.type, expr, loc=self.cur_loc))
        self.bind(ident, VarSym(name, expr.type))

    def _declare_group(self, ident: str, t, dims: list, init, tree) -> None:
        if t.kind == "cub_storage":  # the lowering allocates each reduction's own storage
            if init is not None:
                raise self.error(f"'{ident}' ({t}) is not initialized", tree)
            self.bind(ident, CgVal(t))
            return
        if dims:
            self._unsupported("arrays of cooperative groups", tree)
        if init is None:
            value = CgVal(t) if t.kind in OPERATOR_KINDS else None
        else:
            value = self.operand(init)
        if not isinstance(value, CgVal):
            raise self.error(f"'{ident}' must be initialized with a {t} (e.g. "
                             "cg::this_thread_block())", tree)
        if t.kind not in ("group", value.type.kind) or t.size and t.size != value.type.size:
            raise self.error(f"'{ident}' is a {t} but is initialized with a {value.type}", tree)
        self.bind(ident, value)

    def _vector_init(self, base, init, tree):
        items = [self.rvalue(c) for c in init.children if c is not None]
        if not isinstance(base, VectorType):
            if len(items) != 1:
                raise self.error("braced initializer for a scalar", tree)
            return self.coerce(items[0], base, tree)
        if len(items) > base.count:
            raise self.error(f"too many initializers for {base}", tree)
        elems = [self.coerce(v, base.elem, tree) for v in items]
        elems += [ct.convert(Const(0, I32), base.elem)] * (base.count - len(elems))
        return MakeVector(tuple(elems), base)

    def array_sizes(self, ident: str, dims: list, tree, what: str = "array",
                    variable_length: bool = True) -> list[int]:
        """The sizes of an array declaration's dimensions, each a positive compile-time
        integer (a located error otherwise; ``what`` names the array's kind in it)."""
        sizes = []
        for d in dims:
            if d is None:
                raise self.error(f"{what} '{ident}' needs a size", tree)
            n = self.constant(d, "array size", variable_length=variable_length)
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                raise self.error(f"array size {n} of '{ident}' must be a positive integer", d)
            sizes.append(n)
        return sizes

    def check_array_elements(self, ident: str, sizes, tree) -> None:
        """Refuse a thread's array (a local, a struct's member) larger than any thread's
        memory holds: kir copies struct members and packs element by element, so such a size
        would be a billion statements, not an error. (Shared arrays meet the target's limit
        in the verifier, which names it.)"""
        total = 1
        for n in sizes:
            total *= n
        if total > MAX_ARRAY_ELEMENTS:
            raise self.error(f"array '{ident}' of {total} elements: larger than a GPU "
                             f"thread's memory (kir takes at most {MAX_ARRAY_ELEMENTS})",
                             tree, LimitError)

    def _declare_array(self, ident: str, base, dims: list, quals: set, init, tree) -> None:
        shared = "__shared__" in quals
        elem = ct.scalar_of(base)
        name = self.fresh(ident)
        if shared and "extern" in quals:
            if len(dims) != 1 or dims[0] is not None:
                raise self.error("extern __shared__ arrays must be declared as name[]", tree)
            if self.dynamic_shared is not None:
                first = self.dynamic_shared
                # declared again as the type it had before a cast retyped it (lower_pool)
                if first.elem != base and self.__dict__.get("_pool_declared") != base:
                    self._unsupported("several extern __shared__ arrays of different types",
                                      tree)
                self.bind(ident, first)
                return
            size = self.launch.shared_bytes // elem.nbytes
            sym = ArraySym(name, base, (size // count_of(base),), "shared")
            self.dynamic_shared = sym
            self.prologue.append(Alloc(name, elem, size, "shared", True, loc=self.cur_loc))
        else:
            if dims and dims[0] is None and isinstance(init, Tree) and init.data == "init_list":
                # float taps[] = {...}: the first size is the initializer's count
                count = len([c for c in init.children if c is not None])
                dims = [Tree("int_lit", [Token("INT_LIT", str(count))])] + list(dims[1:])
            sizes = self.array_sizes(ident, dims, tree)
            if not shared:
                self.check_array_elements(ident, sizes, tree)
            total = count_of(base)
            for n in sizes:
                total *= n
            space = "shared" if shared else "local"
            pairable = shared and len(sizes) == 1 and init is None  # (ping-pong buffers)
            merged = None
            if pairable:
                decl, merged = self.merged_shared(ident, base, total, tree)
            if merged is not None and merged[1] > 0:  # a name into the first's allocation
                root = self.shared_root_name(merged[0])
                if root is None:
                    raise self.error(f"'{ident}' shares its memory with an array declared "
                                     "in another scope", tree, UnsupportedError)
                self.bind(ident, PtrSym(root, base, offset_expr=Const(merged[1],
                                                                      OFFSET_TYPE)))
                return
            sym = ArraySym(name, base, tuple(sizes), space)
            length = merged[2] if merged is not None else total
            alloc = Alloc(name, elem, length, space, False, loc=self.cur_loc)
            (self.prologue if shared else self.out).append(alloc)
            if pairable:
                self.note_shared(name, decl)
        self.buffers[name] = BufferInfo(elem, sym.space)
        self.bind(ident, sym)
        if init is not None:
            if shared:
                raise self.error("__shared__ variables cannot have an initializer", tree)
            self._array_init(sym, init, tree)

    def _array_init(self, sym: ArraySym, init, tree) -> None:
        if not (isinstance(init, Tree) and init.data == "init_list"):
            raise self.error("array initializer must be a braced list", tree)
        flat = []
        stack = [init]
        while stack:  # flatten nested braces in order
            node = stack.pop()
            if isinstance(node, Tree) and node.data == "init_list":
                stack.extend(reversed([c for c in node.children if c is not None]))
            else:
                flat.append(self.rvalue(node))
        count = 1
        for n in sym.dims:
            count *= n
        if len(flat) > count:
            raise self.error("too many initializers", tree)
        zero = ct.convert(Const(0, I32), ct.scalar_of(sym.elem))
        step = count_of(sym.elem)
        for i in range(count):
            value = self.coerce(flat[i], sym.elem, tree) if i < len(flat) else (
                zero if step == 1 else MakeVector((zero,) * step, sym.elem))
            self.emit(Store(sym.name, Const(i * step, I32), value, loc=self.cur_loc))

    def check_view(self, view, root: str, tree) -> None:
        held = self.buffers[root].elem
        if isinstance(view, StructType):  # a struct over the buffer: cast-checked already
            if held in (I8, U8):
                return  # (a struct over bytes: any layout)
            view = view.scalars()[0]
        seen = ct.scalar_of(view)
        if seen != held and not ct.same_width_ints(seen, held):
            raise self.error(f"a {ct.scalar_of(view)} pointer into {self.buffers[root].elem} "
                             f"buffer '{root}'", tree, UnsupportedError)
