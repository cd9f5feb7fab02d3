"""CUB's block and warp scans on kir's own operations (a mixin of the Lowerer).

Offsets from counts (MoE routing's tokens per expert, stream compaction, radix sorts) are
written with ``cub::BlockScan<T, N>(storage).ExclusiveSum(count, offset)``. The collective
is a compile-time value as CUB's reductions are (frontends/cuda/lower_cub.py); its methods
write their result into the output argument, as CUB does:

- ``ExclusiveSum(in, out [, aggregate])``, ``InclusiveSum(in, out [, aggregate])``;
- ``ExclusiveScan(in, out, initial, op [, aggregate])``, ``InclusiveScan(in, out, op [,
  aggregate])`` with ``op`` one of CUB's (or libcu++'s) plus, maximum, minimum.

``cub::BlockScan<T, X [, algorithm, Y, Z]>`` becomes a shuffle-up scan within each warp, each
warp's total in a shared array (one per call), a barrier, the totals scanned by the same
steps in every warp, and each thread's warp prefix combined with its own result; the
aggregate is the last total, given to every thread. CUB requires the block to have exactly
the threads the collective is sized for; an ``Assert`` stops a launch that has not.
``cub::WarpScan<T [, W]>`` is the scan within each logical warp of ``W`` lanes. A block prefix
callback, arrays of items per thread and other methods are refused where they are used.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_cg import block_threads
from kir.frontends.cuda.lower_cub import collective_name
from kir.frontends.cuda.lower_cub_ops import Operator
from kir.frontends.cuda.values import CgType

from kir.errors import UnsupportedError
from kir.ir import Assert, Barrier, Block, Call, Const, Expr, If, Load, Select, Shuffle, Store
from kir.ir.nodes import WARP
from kir.ir.types import I32, U32, ScalarType

#: (inclusive, has an initial value, has an operator) of each scan method
SCAN_METHODS = {"ExclusiveSum": (False, False, False), "InclusiveSum": (True, False, False),
                "ExclusiveScan": (False, True, True), "InclusiveScan": (True, False, True)}


class CubScanMixin:
    """CUB's BlockScan and WarpScan; relies on the Lowerer and CubMixin's helpers."""

    def cub_scan_method(self, collective: CgType, method: str, arg_trees: list, tree) -> Expr:
        """``collective.method(in, out, ...)``: writes ``out`` (and the aggregate)."""
        name = collective_name(collective)
        if not isinstance(collective.elem, ScalarType):
            raise self.error(f"{name} of {collective.elem} not supported (scans of scalars)",
                             tree, UnsupportedError)
        if method not in SCAN_METHODS:
            raise self.error(f"{name}'s '{method}' not supported (kir reads "
                             f"{', '.join(SCAN_METHODS)})", tree, UnsupportedError)
        inclusive, has_initial, has_op = SCAN_METHODS[method]
        fixed = 2 + has_initial + has_op
        self._arity(method, arg_trees, fixed, fixed + 1, tree)
        value = self.rvalue(arg_trees[0])
        if not isinstance(value.type, ScalarType):
            raise self.error(f"{name} of something other than one scalar per thread",
                             arg_trees[0], UnsupportedError)
        value = self._cub_temp(ct.convert(value, collective.elem))
        initial = self._cub_temp(ct.convert(self.rvalue(arg_trees[2]), collective.elem)) \
            if has_initial else None
        op = self._cub_operator(arg_trees[fixed - 1]) if has_op else "sum"
        if collective.kind == "cub_warp_scan":
            result, total = self._cub_warp_scan(collective, value, op, inclusive, initial)
        else:
            result, total = self._cub_block_scan(collective, value, op, inclusive, initial)
        self.write(self._cub_output(arg_trees[1], name), result, arg_trees[1])
        if len(arg_trees) > fixed:
            self.write(self._cub_output(arg_trees[fixed], name), total, arg_trees[fixed])
        return Const(0, I32)

    def _cub_output(self, tree, name: str):
        target = self.operand(tree)
        if not isinstance(target, Expr):  # a prefix callback object, an array of items
            raise self.error(f"{name}: outputs are one scalar per thread (a block prefix "
                             "callback or an array of items per thread is not supported)",
                             tree, UnsupportedError)
        return target

    # ------------------------------------------------------------------ lowering

    def _cub_combine1(self, op: Operator, a: Expr, b: Expr) -> Expr:
        return self._cub_combine(op, (a,), (b,), a.type)[0]

    def _cub_scan_steps(self, value: Expr, op: Operator, rank: Expr, width: int) -> Expr:
        """The inclusive scan of ``value`` over each group of ``width`` lanes (``rank`` a
        lane's place in its group): shuffle-up steps of 1, 2, 4, ..., each over the whole
        warp (Metal's only span), taken only from a source in the lane's own group."""
        acc = value
        step = 1
        while step < width:
            other = self._cub_temp(Shuffle("up", acc, Const(step, I32), value.type, WARP))
            acc = self._cub_temp(Select(ct.binary(">=", rank, Const(step, I32)),
                                        self._cub_combine1(op, acc, other), acc, value.type))
            step *= 2
        return acc

    def _cub_exclusive(self, op: Operator, before: Expr, first: Expr, seed: Expr) -> Expr:
        """A thread's exclusive result: ``seed`` (0 for a sum) combined with what the threads
        before it combine to (``before``, undefined for the ``first`` thread)."""
        seeded = self._cub_combine1(op, seed, before)
        return self._cub_temp(Select(first, seed, seeded, seed.type))

    def _cub_warp_scan(self, collective: CgType, value: Expr, op: Operator, inclusive: bool,
                       initial):
        width = collective.size
        t = value.type
        _tid, lane = self._cub_thread()
        rank = self._cub_temp(ct.binary("&", lane, Const(width - 1, I32)))
        scanned = self._cub_scan_steps(value, op, rank, width)
        last = ct.binary("+", ct.binary("-", lane, rank), Const(width - 1, I32))
        total = self._cub_temp(Shuffle("idx", scanned, last, t, WARP))
        if inclusive:
            return scanned, total
        before = self._cub_temp(Shuffle("up", scanned, Const(1, I32), t, WARP))
        seed = initial if initial is not None else ct.convert(Const(0, I32), t)
        return self._cub_exclusive(op, before, ct.binary("==", rank, Const(0, I32)), seed), total

    def _cub_block_scan(self, collective: CgType, value: Expr, op: Operator, inclusive: bool,
                        initial):
        threads = collective.size
        t = value.type
        loc = self.cur_loc
        self.emit(Assert(ct.binary("==", block_threads(), Const(threads, U32)),
                         f"{collective} runs in blocks of exactly {threads} threads", loc=loc))
        tid, lane = self._cub_thread()
        scanned = self._cub_scan_steps(value, op, lane, WARP)
        before_in_warp = self._cub_temp(Shuffle("up", scanned, Const(1, I32), t, WARP))
        warps = -(-threads // WARP)
        if warps == 1:
            total = self._cub_temp(Shuffle("idx", scanned, Const(threads - 1, I32), t, WARP))
            block_inclusive, before = scanned, before_in_warp
        else:
            totals = self._cub_shared(t, warps)
            last = ct.binary("||", ct.binary("==", lane, Const(WARP - 1, I32)),
                             ct.binary("==", tid, Const(threads - 1, I32)))
            self.emit(If(last, Block((Store(totals, ct.binary(">>", tid, Const(5, I32)),
                                            scanned, loc=loc),)), loc=loc))
            self.emit(Barrier("block", loc=loc))
            # (lanes past the last total only feed lanes above them, never asked for)
            warp_totals = self._cub_scan_steps(
                self._cub_temp(Load(totals, self._cub_slot(lane, warps), t)), op, lane, WARP)
            total = self._cub_temp(Shuffle("idx", warp_totals, Const(warps - 1, I32), t, WARP))
            warp = self._cub_temp(ct.binary(">>", tid, Const(5, I32)))
            previous = Call("max", (ct.binary("-", warp, Const(1, I32)), Const(0, I32)), I32)
            prefix = self._cub_temp(Shuffle("idx", warp_totals, previous, t, WARP))
            later_warp = ct.binary(">", warp, Const(0, I32))
            block_inclusive = self._cub_temp(Select(
                later_warp, self._cub_combine1(op, prefix, scanned), scanned, t))
            within = Select(later_warp, self._cub_combine1(op, prefix, before_in_warp),
                            before_in_warp, t)
            before = self._cub_temp(Select(ct.binary(">", lane, Const(0, I32)), within,
                                           prefix, t))
        if inclusive:
            return block_inclusive, total
        seed = initial if initial is not None else ct.convert(Const(0, I32), t)
        return self._cub_exclusive(op, before, ct.binary("==", tid, Const(0, I32)), seed), total
