"""CUB's block and warp reductions on kir's own operations (a mixin of the Lowerer).

Inference engines reduce across a block with CUB rather than writing the reduction out::

    using BlockReduce = cub::BlockReduce<float, 1024>;
    __shared__ typename BlockReduce::TempStorage store;
    float total = BlockReduce(store).Reduce(v, cub::Sum{}, blockDim.x);

The collective, its ``TempStorage`` and the operators ``cub::Sum``/``Max``/``Min`` (or
libcu++'s ``cuda::std::plus``, ``cuda::maximum``, ``cuda::minimum``) are compile-time
values (:class:`CgType`/:class:`CgVal`, as cooperative groups are), never IR; ``Sum(v [,
valid])`` and ``Reduce(v, op [, valid])`` become what CUB does underneath:

- ``cub::BlockReduce<T, X [, algorithm, Y, Z]>``: a shuffle-down tree within each warp, the
  warps' partials in a shared array (one per call, in place of the ``TempStorage``), a
  barrier, and the partials reduced by the same tree in every warp and broadcast from its
  lane 0 — so every thread gets the total, where CUB defines it in thread 0 only (a
  refinement: a kernel correct under CUB is correct under kir). ``valid`` counts the
  threads (from the first) whose values count; an ``Assert`` stops a launch whose block
  has more threads than the collective is sized for (or, without ``valid``, a different
  number: CUB reads partials no warp wrote).
- ``cub::WarpReduce<T [, W]>``: the same tree over each logical warp of ``W`` lanes
  (``valid`` counting from its first lane), broadcast from that warp's first lane; a whole
  warp without ``valid`` is kir's ``WarpReduce``.

A value that is a struct of scalars (``cub::KeyValuePair`` reduced by ``cub::ArgMax``) moves
as its fields, each shuffled and stored on its own (lower_cub_ops.py: values and operators,
a function object or lambda of the user's inlined at every step). Only
thread 0's (lane 0's) result is defined in CUB, so values of invalid threads never reach it:
each tree step adds a source lane only when that lane is counted. Other CUB collectives
and methods are refused where they are used, with what to write instead.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_cg import block_threads, linear_thread
from kir.frontends.cuda.lower_cub_ops import PICKERS, Operator, Parts, key_value_pair
from kir.frontends.cuda.values import BufferInfo, CgType, CgVal

from kir.errors import UnsupportedError
from kir.ir import (
    Alloc,
    Assert,
    Barrier,
    Block,
    Call,
    Const,
    Expr,
    If,
    Load,
    Select,
    Shuffle,
    Store,
    WarpReduce,
)
from kir.ir.nodes import WARP
from kir.ir.types import I32, U32

#: CUB's collectives kir reads, and the CgType kind of each (scans: lower_cub_scan.py)
COLLECTIVES = {"cub::BlockReduce": "cub_block", "cub::WarpReduce": "cub_warp",
               "cub::BlockScan": "cub_block_scan", "cub::WarpScan": "cub_warp_scan"}
COLLECTIVE_KINDS = frozenset(COLLECTIVES.values())
_BLOCK_WIDE = ("cub_block", "cub_block_scan")
#: CUB's reduction operators, read as cooperative groups' (sum, max, min)
CUB_OPERATORS = {"cub::Sum": "plus", "cub::Max": "greater", "cub::Min": "less"}
_NAMES = {kind: name for name, kind in COLLECTIVES.items()}


def collective_name(collective: CgType) -> str:
    """``cub::BlockScan`` ...: the CUB name of a collective's type."""
    return _NAMES[collective.kind]


class CubMixin:
    """CUB's types and BlockReduce / WarpReduce (scans: CubScanMixin); relies on the
    Lowerer (and CgMixin's helpers)."""

    def cub_type(self, name: str, tree, targs):
        """The collective, operator or ``cub::KeyValuePair`` struct a ``cub::`` type name
        stands for, or None when it is not one kir reads."""
        if name in CUB_OPERATORS:
            return CgType(CUB_OPERATORS[name])
        if name in PICKERS:
            return CgType(PICKERS[name])
        kind = COLLECTIVES.get(name)
        args = [a for a in (targs.children if targs is not None else []) if a is not None]
        if name == "cub::KeyValuePair":
            if len(args) != 2:
                raise self.error("cub::KeyValuePair needs its key and value types: "
                                 "cub::KeyValuePair<int, float>", tree)
            return self.cub_element(name, key_value_pair(*(self.template_arg(a)
                                                           for a in args)), tree)
        if kind is None:
            return None
        usage = f"{name}<float, 256>" if kind in _BLOCK_WIDE else f"{name}<float>"
        if not args or kind in _BLOCK_WIDE and len(args) < 2:
            raise self.error(f"{name} needs its template arguments: {usage}", tree)
        elem = self.cub_element(name, self.template_arg(args[0]), tree)
        if kind not in _BLOCK_WIDE:
            width = self.constant(args[1], "a logical warp size") if len(args) > 1 else WARP
            if width not in (1, 2, 4, 8, 16, 32):
                raise self.error(f"{name} of {width} lanes not supported (a power of two up "
                                 "to 32)", tree, UnsupportedError)
            return CgType(kind, int(width), elem)
        threads = self.constant(args[1], "a block size")
        for extent in args[3:5]:  # BLOCK_DIM_Y, BLOCK_DIM_Z (args[2] is the algorithm)
            threads *= self.constant(extent, "a block size")
        if not 1 <= threads <= 1024:
            raise self.error(f"{name} of {threads} threads (a block has 1 to 1024)", tree)
        return CgType(kind, int(threads), elem)

    def cub_storage(self, collective, member: str, tree) -> CgType | None:
        """``typename C::TempStorage`` of a collective ``C``, or None when ``C`` is not one."""
        if not (isinstance(collective, CgType) and collective.kind in COLLECTIVE_KINDS):
            return None
        if member != "TempStorage":
            raise self.error(f"{_NAMES[collective.kind]} has no member type '{member}' kir "
                             "reads (only TempStorage)", tree, UnsupportedError)
        return CgType("cub_storage")

    def cub_construct(self, collective: CgType, value, tree) -> CgVal:
        """``C(storage)``: the collective, over storage the lowering allocates itself."""
        if not (isinstance(value, CgVal) and value.type.kind == "cub_storage"):
            raise self.error(f"{_NAMES[collective.kind]} is constructed from a TempStorage "
                             f"(e.g. {_NAMES[collective.kind]}<...>(temp_storage))", tree)
        return CgVal(collective)

    def cub_method(self, collective: CgType, method: str, arg_trees: list, tree) -> Expr:
        """``collective.Sum(v [, valid])`` or ``.Reduce(v, op [, valid])``; a scan's methods
        in lower_cub_scan.py."""
        if collective.kind in ("cub_block_scan", "cub_warp_scan"):
            return self.cub_scan_method(collective, method, arg_trees, tree)
        name = _NAMES[collective.kind]
        if method == "Sum":
            self._arity(method, arg_trees, 1, 2, tree)
            op, rest = "sum", arg_trees[1:]
        elif method == "Reduce":
            self._arity(method, arg_trees, 2, 3, tree)
            op, rest = self._cub_operator(arg_trees[1]), arg_trees[2:]
        else:
            raise self.error(f"{name}'s '{method}' not supported (kir reads Sum and Reduce)",
                             tree, UnsupportedError)
        parts = self.cub_parts(arg_trees[0], collective.elem, name)
        valid = self._cub_temp(ct.convert(self.rvalue(rest[0]), I32)) if rest else None
        if collective.kind == "cub_warp":
            total = self._cub_warp(collective, parts, op, valid)
        else:
            total = self._cub_block(collective, parts, op, valid)
        return self.cub_value(total, collective.elem)

    # ------------------------------------------------------------------ lowering

    def _cub_temp(self, value: Expr) -> Expr:
        return self._temp(value, "cub")

    def _cub_thread(self) -> tuple[Expr, Expr]:
        """The thread's linear index in its block and its lane in its warp (i32 locals)."""
        tid = self._cub_temp(ct.convert(linear_thread(), I32))
        return tid, self._cub_temp(ct.binary("&", tid, Const(WARP - 1, I32)))

    def _cub_shared(self, t, count: int) -> str:
        """A fresh shared array of ``count`` ``t`` (one per collective call)."""
        name = self.fresh("cub_partials")
        self.prologue.append(Alloc(name, t, count, "shared", False, loc=self.cur_loc))
        self.buffers[name] = BufferInfo(t, "shared")
        return name

    @staticmethod
    def _cub_slot(lane: Expr, warps: int) -> Expr:
        """The per-warp slot a lane reads in a second step: its own, the last one past it
        (in bounds; such lanes' values are never counted)."""
        return Call("min", (lane, Const(warps - 1, I32)), I32) if warps < WARP else lane

    def _cub_tree(self, parts: Parts, op: Operator, elem, width: int, counted) -> Parts:
        """Shuffle-down steps over ``width`` lanes: the first lane of each group of ``width``
        ends with the reduction of the lanes for which ``counted(offset)`` holds at each
        step's source (all lanes when it is None). The shuffles span the whole warp (Metal's
        only span): what a group's first lane reads never leaves its group."""
        acc = parts
        offset = width // 2
        while offset:
            # every lane shuffles (outside the select, whose arms run on their lanes only)
            other = tuple(self._cub_temp(Shuffle("down", a, Const(offset, I32), a.type, WARP))
                          for a in acc)
            combined = self._cub_combine(op, acc, other, elem)
            if counted is not None:
                keep = self._cub_temp(counted(offset))
                combined = tuple(Select(keep, c, a, a.type) for c, a in zip(combined, acc))
            acc = tuple(self._cub_temp(c) for c in combined)
            offset //= 2
        return acc

    def _cub_broadcast(self, parts: Parts, lane: Expr) -> Parts:
        return tuple(self._cub_temp(Shuffle("idx", p, lane, p.type, WARP)) for p in parts)

    def _cub_warp(self, collective: CgType, parts: Parts, op: Operator, valid) -> Parts:
        width = collective.size
        if width == WARP and valid is None and isinstance(op, str):
            return (self._cub_temp(WarpReduce(op, parts[0], parts[0].type)),)
        _tid, lane = self._cub_thread()
        rank = self._cub_temp(ct.binary("&", lane, Const(width - 1, I32)))
        counted = None if valid is None else \
            (lambda offset: ct.binary("<", ct.binary("+", rank, Const(offset, I32)), valid))
        first = self._cub_tree(parts, op, collective.elem, width, counted)
        return self._cub_broadcast(first, ct.binary("-", lane, rank))

    def _cub_block(self, collective: CgType, parts: Parts, op: Operator, valid) -> Parts:
        threads = collective.size
        loc = self.cur_loc
        launched = block_threads()
        if valid is None:
            self.emit(Assert(ct.binary("==", launched, Const(threads, U32)),
                             f"{collective} runs in blocks of exactly {threads} threads unless "
                             "Reduce/Sum is given how many are valid", loc=loc))
            count: Expr = Const(threads, I32)
        else:
            self.emit(Assert(ct.binary("<=", launched, Const(threads, U32)),
                             f"{collective} runs in blocks of at most {threads} threads",
                             loc=loc))
            count = valid
        tid, lane = self._cub_thread()
        counted = None if valid is None and threads % WARP == 0 else \
            (lambda offset: ct.binary("<", ct.binary("+", tid, Const(offset, I32)), count))
        warp_totals = self._cub_tree(parts, op, collective.elem, WARP, counted)

        warps = -(-threads // WARP)
        # one shared array of the warps' partials per part
        slots = [self._cub_shared(p.type, warps) for p in parts]
        writes = ct.binary("&&", ct.binary("==", lane, Const(0, I32)),
                           ct.binary("<", tid, count))
        warp = ct.binary(">>", tid, Const(5, I32))
        self.emit(If(writes, Block(tuple(Store(slot, warp, total, loc=loc)
                                         for slot, total in zip(slots, warp_totals))),
                     loc=loc))
        self.emit(Barrier("block", loc=loc))
        if warps == 1:
            return tuple(self._cub_temp(Load(slot, Const(0, I32), p.type))
                         for slot, p in zip(slots, parts))
        written = self._cub_temp(ct.binary(">>", ct.binary("+", count, Const(WARP - 1, I32)),
                                           Const(5, I32)))
        slot_of_lane = self._cub_slot(lane, warps)
        partials = tuple(self._cub_temp(Load(slot, slot_of_lane, p.type))
                         for slot, p in zip(slots, parts))
        total = self._cub_tree(partials, op, collective.elem, WARP, lambda offset: ct.binary(
            "<", ct.binary("+", lane, Const(offset, I32)), written))
        return self._cub_broadcast(total, Const(0, I32))
