"""Cooperative groups (``namespace cg = cooperative_groups``) on kir's own operations (a
mixin of the Lowerer).

Groups are compile-time values (:class:`CgVal`), never IR: a ``thread_block`` is the block,
a ``thread_block_tile<N>`` (``tiled_partition<N>(block)``) is an aligned group of N lanes of
a warp. Their methods become what the CUDA library does underneath: ``sync()`` a barrier
(block) or ``__syncwarp`` (tile); ``thread_rank()`` the linear thread index or the lane
within the tile; ``meta_group_rank()``/``meta_group_size()`` the tile's index and count in
the block; ``shfl*`` shuffles of width N; ``cg::reduce(tile, v, cg::plus<T>())`` (or
``greater``/``less``) a warp reduction for N = 32 and an xor-shuffle butterfly for smaller
tiles; ``inclusive_scan``/``exclusive_scan`` a shuffle-up scan. Grid-wide synchronization
is refused.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.values import CgType, CgVal
from lark import Tree

from kir.errors import UnsupportedError
from kir.ir import Barrier, Binary, Call, Const, Declare, Expr, Select, Shuffle, Special, Var
from kir.ir import WarpReduce
from kir.ir.nodes import WARP
from kir.ir.types import BOOL, I32, U32, ScalarType

#: Reduction operator objects: the warp reduction and C operator each stands for.
OPERATORS = {"plus": "sum", "greater": "max", "less": "min"}


class Dim3Val:
    """``group_index()``, ``thread_index()``, ``group_dim()``: read as ``.x``, ``.y``, ``.z``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind


def linear_thread() -> Expr:
    """``threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)`` (u32)."""
    def s(kind: str, axis: str) -> Expr:
        return Special(kind, axis)
    inner = Binary("+", s("thread", "y"), Binary("*", s("block_dim", "y"), s("thread", "z"),
                                                  U32), U32)
    return Binary("+", s("thread", "x"), Binary("*", s("block_dim", "x"), inner, U32), U32)


def block_threads() -> Expr:
    return Binary("*", Binary("*", Special("block_dim", "x"), Special("block_dim", "y"), U32),
                  Special("block_dim", "z"), U32)


class CgMixin:
    """Cooperative-groups calls and methods; relies on the Lowerer."""

    def cg_call(self, name: str, arg_trees: list, tree, targs=None):
        """A ``cg::`` function (``name`` without its ``cg::``), or None if it is not one."""
        if name == "this_thread_block":
            self._arity(name, arg_trees, 0, 0, tree)
            return CgVal(CgType("block"))
        if name == "this_grid":
            self._arity(name, arg_trees, 0, 0, tree)
            return CgVal(CgType("grid"))
        if name == "tiled_partition":
            return self._tiled_partition(arg_trees, tree, targs)
        if name == "sync":
            self._arity(name, arg_trees, 1, 1, tree)
            return self.cg_method(self._group(arg_trees[0]), "sync", [], tree)
        if name in ("reduce", "inclusive_scan", "exclusive_scan"):
            low = 2 if name == "exclusive_scan" or name == "inclusive_scan" else 3
            self._arity(f"cg::{name}", arg_trees, low, 3, tree)
            group = self._group(arg_trees[0])
            value = self.rvalue(arg_trees[1])
            op = self._operator(arg_trees[2]) if len(arg_trees) > 2 else "sum"
            if name == "reduce":
                return self._reduce(group, value, op, tree)
            return self._scan(group, value, op, name == "inclusive_scan", tree)
        return None

    def _group(self, tree) -> CgType:
        value = self.operand(tree)
        if not isinstance(value, CgVal) or value.type.kind in OPERATORS:
            raise self.error("expected a cooperative group", tree)
        return value.type

    def _operator(self, tree) -> str:
        value = self.operand(tree)
        if isinstance(value, CgVal) and value.type.kind in OPERATORS:
            return OPERATORS[value.type.kind]
        raise self.error("reduction operator must be cg::plus<T>(), cg::greater<T>() or "
                         "cg::less<T>()", tree, UnsupportedError)

    def _tiled_partition(self, arg_trees: list, tree, targs) -> CgVal:
        given = [a for a in (targs.children if targs is not None else []) if a is not None]
        if given:
            self._arity("tiled_partition<N>", arg_trees, 1, 1, tree)
            size = self.constant(given[0], "a tile size")
        else:
            self._arity("tiled_partition", arg_trees, 2, 2, tree)
            size = self.constant(arg_trees[1], "a tile size")
        parent = self._group(arg_trees[0])
        if parent.kind not in ("block", "tile"):
            raise self.error(f"tiled_partition of a {parent} not supported", tree,
                             UnsupportedError)
        if size not in (1, 2, 4, 8, 16, 32):
            raise self.error(f"tiles of {size} threads not supported (a power of two up to 32)",
                             tree, UnsupportedError)
        return CgVal(CgType("tile", int(size)))

    # ------------------------------------------------------------------- methods

    def cg_method(self, group: CgType, method: str, arg_trees: list, tree):
        """``group.method(args)``."""
        kind, size = group.kind, group.size
        if kind == "grid":
            if method in ("thread_rank",):
                self._arity(method, arg_trees, 0, 0, tree)
                blocks = Binary("+", Special("block", "x"), Binary(
                    "*", Special("grid_dim", "x"), Binary(
                        "+", Special("block", "y"), Binary("*", Special("grid_dim", "y"),
                                                           Special("block", "z"), U32), U32),
                    U32), U32)
                return ct.binary("+", ct.binary("*", ct.convert(blocks, ct.U64),
                                                ct.convert(block_threads(), ct.U64)),
                                 ct.convert(linear_thread(), ct.U64))
            raise self.error(f"grid group '{method}()' not supported (no grid-wide "
                             "synchronization in kir)", tree, UnsupportedError)
        if kind not in ("block", "tile"):
            raise self.error(f"{group} has no supported method '{method}'", tree,
                             UnsupportedError)
        if method == "sync":
            self._arity(method, arg_trees, 0, 0, tree)
            self.emit(Barrier("block" if kind == "block" else "warp", loc=self.cur_loc))
            return Const(0, I32)
        if method == "thread_rank":
            self._arity(method, arg_trees, 0, 0, tree)
            if kind == "block":
                return linear_thread()
            return self._tile_rank(size)
        if method in ("size", "num_threads"):
            self._arity(method, arg_trees, 0, 0, tree)
            return block_threads() if kind == "block" else Const(size, U32)
        if kind == "block" and method in ("group_index", "thread_index", "group_dim",
                                          "dim_threads"):
            self._arity(method, arg_trees, 0, 0, tree)
            return Dim3Val({"group_index": "block", "thread_index": "thread",
                            "group_dim": "block_dim", "dim_threads": "block_dim"}[method])
        if kind == "tile":
            return self._tile_method(size, method, arg_trees, tree)
        raise self.error(f"{group} method '{method}()' not supported", tree, UnsupportedError)

    def _tile_rank(self, size: int) -> Expr:
        lane = Special("lane")
        return lane if size == WARP else Binary("%", lane, Const(size, U32), U32)

    def _tile_method(self, size: int, method: str, arg_trees: list, tree):
        if method == "meta_group_rank":
            self._arity(method, arg_trees, 0, 0, tree)
            if size == WARP:
                return Special("warp")
            return Binary("/", linear_thread(), Const(size, U32), U32)
        if method == "meta_group_size":
            self._arity(method, arg_trees, 0, 0, tree)
            return Binary("/", Binary("+", block_threads(), Const(size - 1, U32), U32),
                          Const(size, U32), U32)
        modes = {"shfl": "idx", "shfl_down": "down", "shfl_up": "up", "shfl_xor": "xor"}
        if method in modes:
            self._arity(method, arg_trees, 2, 2, tree)
            value = self.rvalue(arg_trees[0])
            lane = self.rvalue(arg_trees[1])
            if not ct.index_type_ok(lane.type):
                raise self.error("shuffle lane must be an integer", arg_trees[1])
            return self.warp_shuffle(modes[method], value, lane, size)
        if method in ("any", "all", "ballot"):
            if size != WARP:
                raise self.error(f"{method}() on a tile of {size} not supported (whole warps "
                                 "only)", tree, UnsupportedError)
            self._arity(method, arg_trees, 1, 1, tree)
            return self._vote_value("__" + method + "_sync", arg_trees[0])
        raise self.error(f"thread_block_tile method '{method}()' not supported", tree,
                         UnsupportedError)

    # ---------------------------------------------------------- collectives

    def _reduce(self, group: CgType, value: Expr, op: str, tree) -> Expr:
        if group.kind != "tile":
            raise self.error("cg::reduce over a whole block not supported (reduce over a "
                             "tiled_partition<32> and combine the warps)", tree,
                             UnsupportedError)
        if not isinstance(value.type, ScalarType) or value.type == BOOL:
            raise self.error(f"cg::reduce of a {value.type} value not supported", tree,
                             UnsupportedError)
        if group.size == WARP:
            return WarpReduce(op, value, value.type)
        acc = self._temp(value)
        offset = group.size // 2
        while offset:
            other = Shuffle("xor", acc, Const(offset, I32), value.type, group.size)
            acc = self._temp(self._combine(op, acc, other))
            offset //= 2
        return acc

    def _scan(self, group: CgType, value: Expr, op: str, inclusive: bool, tree) -> Expr:
        if group.kind != "tile" or op != "sum" and not inclusive:
            raise self.error("cg scans over a tile (exclusive scans with cg::plus only)", tree,
                             UnsupportedError)
        if not isinstance(value.type, ScalarType) or value.type == BOOL:
            raise self.error(f"cg scan of a {value.type} value not supported", tree,
                             UnsupportedError)
        rank = self._temp(self._tile_rank(group.size))
        acc = self._temp(value)
        step = 1
        while step < group.size:
            # every lane shuffles (outside the select, whose arms run on their lanes only)
            other = self._temp(self.warp_shuffle("up", acc, Const(step, I32), group.size))
            keep = Binary(">=", rank, Const(step, U32), BOOL)
            acc = self._temp(Select(keep, self._combine(op, acc, other), acc, value.type))
            step *= 2
        if inclusive:
            return acc
        before = self._temp(self.warp_shuffle("up", acc, Const(1, I32), group.size))
        first = Binary("==", rank, Const(0, U32), BOOL)
        return self._temp(Select(first, ct.convert(Const(0, I32), value.type), before,
                                 value.type))

    def _combine(self, op: str, a: Expr, b: Expr) -> Expr:
        if op == "sum":
            return ct.binary("+", a, b)
        return Call(op, (a, b), a.type)

    def _temp(self, value: Expr, prefix: str = "cg") -> Expr:
        if isinstance(value, (Var, Const, Special)):
            return value
        name = self.fresh(prefix)
        self.emit(Declare(name, value.type, value, loc=self.cur_loc))
        return Var(name, value.type)

    def dim3_member(self, value: Dim3Val, field: str, tree) -> Expr:
        if field not in ("x", "y", "z"):
            raise self.error(f"dim3 has no member '{field}'", tree)
        return Special(value.kind, field)


def is_cg_value(value) -> bool:
    return isinstance(value, (CgVal, Dim3Val))


__all__ = ["CgMixin", "Dim3Val", "Tree"]
