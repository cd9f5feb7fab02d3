"""Ampere's warp-wide intrinsics (a mixin of the Lowerer): ``__reduce_{add,min,max}_sync``
(warp reductions of integers), ``__reduce_{and,or,xor}_sync`` (of unsigned bits), and
``__match_any_sync`` / ``__match_all_sync`` (which lanes hold the same value), written with
kir's warp reductions and shuffles so every target computes them. As kir's other warp
operations, the full mask only (CUDA Programming Guide, "Warp Reduce Functions" and "Warp
Match Functions")."""

from __future__ import annotations

from kir.errors import UnsupportedError
from kir.frontends.cuda import ctypes_ as ct
from kir.ir import (Assign, Block, Call, Const, Declare, Expr, For, If, Select, Shuffle, Var,
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
        if name in WARP_REDUCES and not self._is_constant(arg_trees[0]):
            # __reduce_add_sync(peers, v) over the group __match_any_sync found
            return self._group_reduce(WARP_REDUCES[name], self.rvalue(arg_trees[0]),
                                      self.rvalue(arg_trees[1]), arg_trees[1])
        mask = self.constant(arg_trees[0], "the warp mask")
        if mask != FULL_MASK:
            raise self.error(f"{name} over a partial mask ({mask:#x}) not supported: kir's warp "
                             "operations cover the whole warp (use 0xffffffff)", arg_trees[0],
                             UnsupportedError)
        value = self.rvalue(arg_trees[1])
        if not (isinstance(value.type, ScalarType) and value.type.is_int):
            raise self.error(f"{name} of a {value.type} value (CUDA's overloads take integers)",
                             arg_trees[1], UnsupportedError)
        if name in WARP_REDUCES:
            return self._warp_reduce(WARP_REDUCES[name], value)
        if name == "__match_any_sync":
            return self._match_any(value)
        return self._match_all(value, arg_trees[2], tree)

    def _warp_reduce(self, op: str, value: Expr) -> Expr:
        if op in ("sum", "min", "max"):  # int stays int, anything else is unsigned
            t = I32 if value.type.is_signed and value.type.nbytes <= 4 else U32
            return WarpReduce(op, ct.convert(value, t), t)
        acc = self._temp(ct.convert(value, U32))
        for offset in (16, 8, 4, 2, 1):  # a butterfly: every lane ends with the whole
            acc = self._temp(ct.binary(op, acc, Shuffle("xor", acc, Const(offset, I32), U32)))
        return acc

    def _is_constant(self, tree) -> bool:
        stmts, value = self.capture(lambda: self.rvalue(tree))
        return not stmts and isinstance(value, Const)

    def _group_reduce(self, op: str, mask: Expr, value: Expr, value_tree) -> Expr:
        """A reduction over the lanes a run-time mask names (each lane of a group passing
        the group's mask, as after ``__match_any_sync``): every lane's value broadcast in
        turn and combined where its bit is set. The shuffles need the whole warp, as kir's
        warp operations do (the verifier refuses them under lane-divergent control)."""
        if not (isinstance(value.type, ScalarType) and value.type.is_int):
            raise self.error(f"a warp reduction of a {value.type} value (CUDA's overloads "
                             "take integers)", value_tree, UnsupportedError)
        t = I32 if op in ("sum", "min", "max") and value.type.is_signed \
            and value.type.nbytes <= 4 else U32
        mine, bits = self._temp(ct.convert(value, t)), self._temp(ct.convert(mask, U32))
        acc, lane = self.fresh("group"), self.fresh("group_lane")
        start = {"sum": 0, "&": 0xFFFFFFFF, "|": 0, "^": 0, "min": None, "max": None}[op]
        self.emit(Declare(acc, t, mine if start is None else Const(start, t),
                          loc=self.cur_loc))
        theirs = self.fresh("group_value")
        member = ct.binary("!=", ct.binary("&", ct.binary(">>", bits, ct.convert(
            Var(lane, I32), U32)), Const(1, U32)), Const(0, U32))
        combined = {"sum": lambda a, b: ct.binary("+", a, b),
                    "min": lambda a, b: Call("min", (a, b), t),
                    "max": lambda a, b: Call("max", (a, b), t)}.get(
            op, lambda a, b: ct.binary(op, a, b))(Var(acc, t), Var(theirs, t))
        body = (  # the shuffle by every lane, then kept where the lane is in the group
            Declare(theirs, t, Shuffle("idx", mine, Var(lane, I32), t), loc=self.cur_loc),
            Assign(acc, Select(member, combined, Var(acc, t), t), loc=self.cur_loc))
        self.emit(For(self.next_label(), lane, I32, Const(0, I32),
                      ct.binary("<", Var(lane, I32), Const(32, I32)),
                      ct.binary("+", Var(lane, I32), Const(1, I32)), Block(body),
                      loc=self.cur_loc))
        return Var(acc, t)

    def _match_any(self, value: Expr) -> Expr:
        """The lanes whose value equals this lane's: each lane's value broadcast in turn."""
        mine = self._temp(value)
        peers, lane = self.fresh("peers"), self.fresh("match_lane")
        self.emit(Declare(peers, U32, Const(0, U32), loc=self.cur_loc))
        theirs = Shuffle("idx", mine, Var(lane, I32), mine.type)
        bit = ct.binary("<<", Const(1, U32), ct.convert(Var(lane, I32), U32))
        body = If(ct.binary("==", theirs, mine),
                  Block((Assign(peers, ct.binary("|", Var(peers, U32), bit),
                                loc=self.cur_loc),)), loc=self.cur_loc)
        self.emit(For(self.next_label(), lane, I32, Const(0, I32),
                      ct.binary("<", Var(lane, I32), Const(32, I32)),
                      ct.binary("+", Var(lane, I32), Const(1, I32)), Block((body,)),
                      loc=self.cur_loc))
        return Var(peers, U32)

    def _match_all(self, value: Expr, pred_tree, tree) -> Expr:
        """The full mask, and ``*pred`` true, when every lane holds the same value; else 0
        and false."""
        mine = self._temp(value)
        first = Shuffle("idx", mine, Const(0, I32), mine.type)
        differs = ct.convert(ct.binary("!=", mine, first), I32)
        same = self._temp(ct.binary("==", WarpReduce("max", differs, I32), Const(0, I32)))
        self.write(self._pointee(pred_tree), ct.convert(same, I32), tree)
        return Select(same, Const(FULL_MASK, U32), Const(0, U32), U32)


__all__ = ["WARP_MATCHES", "WARP_REDUCES", "WarpSyncMixin"]
