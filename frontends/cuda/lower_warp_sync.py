"""Ampere's warp-wide intrinsics (a mixin of the Lowerer): ``__reduce_{add,min,max}_sync``
(warp reductions of integers), ``__reduce_{and,or,xor}_sync`` (of unsigned bits), and
``__match_any_sync`` / ``__match_all_sync`` (which lanes hold the same value), written with
kir's warp reductions and shuffles so every target computes them. As kir's other warp
operations, the full mask only (CUDA Programming Guide, "Warp Reduce Functions" and "Warp
Match Functions")."""

from __future__ import annotations

from kir.errors import UnsupportedError
from kir.frontends.cuda import ctypes_ as ct
from kir.ir import (Assign, Block, Const, Declare, Expr, For, If, Select, Shuffle, Var,
                    WarpReduce)
from kir.ir.types import I32, U32, ScalarType

FULL_MASK = 0xFFFFFFFF
# name -> the reduction (kir's WarpReduce op, or a bitwise operator combined by shuffles)
WARP_REDUCES = {"__reduce_add_sync": "sum", "__reduce_min_sync": "min",
                "__reduce_max_sync": "max", "__reduce_and_sync": "&",
                "__reduce_or_sync": "|", "__reduce_xor_sync": "^"}
WARP_MATCHES = ("__match_any_sync", "__match_all_sync")


class WarpSyncMixin:
    """Warp reduce and match intrinsics; relies on the Lowerer (operands, temporaries,
    labels, writes through pointers)."""

    def warp_sync_call(self, name: str, arg_trees: list, tree) -> Expr:
        """One of :data:`WARP_REDUCES` or :data:`WARP_MATCHES`."""
        low = 3 if name == "__match_all_sync" else 2
        self._arity(name, arg_trees, low, low, tree)
        stmts, mask = self.capture(lambda: self.rvalue(arg_trees[0]))
        if name in WARP_REDUCES and (stmts or not isinstance(mask, Const)):
            # __reduce_add_sync(peers, v) over the group __match_any_sync found
            for stmt in stmts:
                self.emit(stmt)
            value = self._integer_value(name, arg_trees[1])
            return self._group_reduce(WARP_REDUCES[name], mask, value)
        if stmts or not isinstance(mask, Const):
            raise self.error("the warp mask must be a compile-time constant", arg_trees[0],
                             UnsupportedError)
        if mask.value != FULL_MASK:
            raise self.error(f"{name} over a partial mask ({mask.value:#x}) not supported: kir's "
                             "warp operations cover the whole warp (use 0xffffffff)",
                             arg_trees[0], UnsupportedError)
        value = self._integer_value(name, arg_trees[1])
        if name in WARP_REDUCES:
            return self._warp_reduce(WARP_REDUCES[name], value)
        if name == "__match_any_sync":
            return self._match_any(value)
        return self._match_all(value, arg_trees[2], tree)

    def _integer_value(self, name: str, tree) -> Expr:
        value = self.rvalue(tree)
        if not (isinstance(value.type, ScalarType) and value.type.is_int):
            raise self.error(f"{name} of a {value.type} value (CUDA's overloads take integers)",
                             tree, UnsupportedError)
        return value

    def _warp_reduce(self, op: str, value: Expr) -> Expr:
        t = _reduced_type(op, value)
        if op in ("sum", "min", "max"):
            return WarpReduce(op, ct.convert(value, t), t)
        acc = self._temp(ct.convert(value, t))
        for offset in (16, 8, 4, 2, 1):  # a butterfly: every lane ends with the whole
            acc = self._temp(ct.binary(op, acc, Shuffle("xor", acc, Const(offset, I32), t)))
        return acc

    def _group_reduce(self, op: str, mask: Expr, value: Expr) -> Expr:
        """A reduction over the lanes a run-time mask names (each lane of a group passing
        the group's mask, as after ``__match_any_sync``): every lane's value broadcast in
        turn and combined where its bit is set. The shuffles need the whole warp, as kir's
        warp operations do (the verifier refuses them under lane-divergent control)."""
        t = _reduced_type(op, value)
        mine, bits = self._temp(ct.convert(value, t)), self._temp(ct.convert(mask, U32))
        acc, theirs = self.fresh("group"), self.fresh("group_value")
        start = {"sum": 0, "&": 0xFFFFFFFF, "|": 0, "^": 0}.get(op)
        self.emit(Declare(acc, t, mine if start is None else Const(start, t),
                          loc=self.cur_loc))
        if op in ("sum", "min", "max"):
            combined = self._combine(op, Var(acc, t), Var(theirs, t))
        else:
            combined = ct.binary(op, Var(acc, t), Var(theirs, t))

        def body(lane: Var) -> tuple:  # the shuffle by every lane, kept where in the group
            member = ct.binary("!=", ct.binary("&", ct.binary(">>", bits, ct.convert(
                lane, U32)), Const(1, U32)), Const(0, U32))
            return (Declare(theirs, t, Shuffle("idx", mine, lane, t), loc=self.cur_loc),
                    Assign(acc, Select(member, combined, Var(acc, t), t), loc=self.cur_loc))

        self._each_lane("group_lane", body)
        return Var(acc, t)

    def _match_any(self, value: Expr) -> Expr:
        """The lanes whose value equals this lane's: each lane's value broadcast in turn."""
        mine = self._temp(value)
        peers = self.fresh("peers")
        self.emit(Declare(peers, U32, Const(0, U32), loc=self.cur_loc))

        def body(lane: Var) -> tuple:
            bit = ct.binary("<<", Const(1, U32), ct.convert(lane, U32))
            return (If(ct.binary("==", Shuffle("idx", mine, lane, mine.type), mine),
                       Block((Assign(peers, ct.binary("|", Var(peers, U32), bit),
                                     loc=self.cur_loc),)), loc=self.cur_loc),)

        self._each_lane("match_lane", body)
        return Var(peers, U32)

    def _each_lane(self, base: str, body) -> None:
        """``for (lane = 0; lane < 32; ++lane) { body(lane) }``: every lane of the warp in
        turn (the statements ``body`` builds for the counter)."""
        lane = self.fresh(base)
        counter = Var(lane, I32)
        self.emit(For(self.next_label(), lane, I32, Const(0, I32),
                      ct.binary("<", counter, Const(32, I32)),
                      ct.binary("+", counter, Const(1, I32)), Block(body(counter)),
                      loc=self.cur_loc))

    def _match_all(self, value: Expr, pred_tree, tree) -> Expr:
        """The full mask, and ``*pred`` true, when every lane holds the same value; else 0
        and false."""
        mine = self._temp(value)
        first = Shuffle("idx", mine, Const(0, I32), mine.type)
        differs = ct.convert(ct.binary("!=", mine, first), I32)
        same = self._temp(ct.binary("==", WarpReduce("max", differs, I32), Const(0, I32)))
        self.write(self._pointee(pred_tree), ct.convert(same, I32), tree)
        return Select(same, Const(FULL_MASK, U32), Const(0, U32), U32)


def _reduced_type(op: str, value: Expr):
    """What a reduction computes in: int for a signed value of at most 32 bits summed or
    compared (CUDA's int overloads), unsigned otherwise (and for the bitwise ones)."""
    signed = value.type.is_signed and value.type.nbytes <= 4
    return I32 if op in ("sum", "min", "max") and signed else U32


__all__ = ["WARP_MATCHES", "WARP_REDUCES", "WarpSyncMixin"]
