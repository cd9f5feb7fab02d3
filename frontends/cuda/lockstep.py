"""Volatile shared memory as warp-synchronous code means it (a mixin of the Lowerer).

Pre-Volta kernels let a warp's lanes exchange values through ``volatile`` shared memory with
no barrier — the unrolled tail of the classic shared-memory reduction::

    __device__ void warpReduce(volatile float* sdata, unsigned tid) {
        sdata[tid] += sdata[tid + 32];
        sdata[tid] += sdata[tid + 16]; ...
    }
    if (tid < 32) warpReduce(sdata, tid);

That code relies on the lanes running in lockstep: every lane's loads of a statement happen
before any lane's store, and the next statement after all of them. kir's output does not
keep lanes in step by itself (an emitted tail read its neighbours' later values), so a
store into shared memory through a volatile pointer or array becomes that step explicitly:
the value computed, a warp barrier, the store, a warp barrier (CUDA ``__syncwarp()``, Metal
``simdgroup_barrier``) — what NVIDIA asks of such code since Volta, correct on every target.

Which stores: every store into a shared array a volatile pointer or array in scope points
into (a helper's ``volatile float*`` parameter, a ``volatile float* vs = s;`` local, a
``volatile __shared__`` array) — by the array, so a store through another name for it in
that scope is a step too (an extra barrier, never a missing one). The barriers need the
whole warp: a store some lanes of a warp may skip (``if (threadIdx.x == 0)``; the analysis
knows ``if (tid < 32)`` is whole warps) keeps no barriers, and lanes exchanging values
through it unsynchronized are a race the interpreter stops.
Volatile global memory (a flag other blocks poll) is refused where it is declared.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.values import OFFSET_TYPE, MemRef, PtrVal

from kir.errors import UnsupportedError
from kir.ir import Barrier, Block, Const, Declare, Expr, Kernel, Store, Var
from kir.ir.verify import lane_divergent

# The scope entry holding the shared arrays volatile names point into (not an identifier)
_ROOTS = " volatile roots"
_GLOBAL_HINT = ("volatile global memory is how blocks poll each other's flags; kir has no "
                "such cross-block waits. Volatile shared memory (a warp's lanes exchanging "
                "values) is read")


@dataclass
class VolatilePtr(PtrVal):
    """A pointer argument bound to a ``volatile`` pointer parameter."""


class LockstepMixin:
    """Volatile shared memory; relies on the Lowerer (scopes, buffers, emission)."""

    def volatile_root(self, root: str | None, ident: str, tree, scope=None) -> None:
        """``ident``, a volatile pointer or array, points into ``root``: stores into a shared
        ``root`` are lockstep steps while ``scope`` (the current one) lasts; a global
        ``root`` is refused; a thread's own (local) memory needs nothing."""
        if self.refuse_volatile_global(root, ident, tree):
            (scope if scope is not None else self.scopes[-1]).setdefault(_ROOTS,
                                                                        set()).add(root)

    def refuse_volatile_global(self, root: str | None, ident: str, tree) -> bool:
        """Refuse a volatile pointer into global memory; whether ``root`` is shared."""
        info = self.buffers.get(root) if root is not None else None
        if info is None or info.space == "local":
            return False
        if info.space != "shared":
            error = self.error(f"volatile pointer '{ident}' into global memory not supported",
                               tree, UnsupportedError)
            error.hint = _GLOBAL_HINT
            raise error
        return True

    def in_lockstep(self, root: str) -> bool:
        """Whether stores into ``root`` are lockstep steps here."""
        return any(root in scope.get(_ROOTS, ()) for scope in self.scopes)

    def lockstep_store(self, target: MemRef, value: Expr) -> None:
        """``target = value`` as one lockstep step of the warp (see the module doc)."""
        loc = self.cur_loc
        index, stored = target.index, value
        if not isinstance(index, (Var, Const)):
            name = self.fresh("step_at")
            self.emit(Declare(name, OFFSET_TYPE, ct.convert(index, OFFSET_TYPE), loc=loc))
            index = Var(name, OFFSET_TYPE)
        if not isinstance(stored, (Var, Const)):
            name = self.fresh("step")
            self.emit(Declare(name, stored.type, stored, loc=loc))
            stored = Var(name, stored.type)
        steps = (Barrier("warp", loc=loc), Barrier("warp", loc=loc))
        self.__dict__.setdefault("lockstep_barriers", set()).update(id(b) for b in steps)
        self.emit(steps[0])
        self.emit(Store(target.buffer, index, stored, loc=loc))
        self.emit(steps[1])

    def settle_lockstep(self, kernel: Kernel) -> Kernel:
        """``kernel`` without the lockstep barriers of stores that some lanes of a warp may
        skip (``if (threadIdx.x == 0) vs[0] = t;``): a warp barrier there would wait for
        lanes that never come. Such a store is a plain one; lanes that do exchange values
        through it unsynchronized are then a race the interpreter stops, with both named."""
        steps = self.__dict__.get("lockstep_barriers", set())
        divergent: set[int] = set()
        while steps - divergent:
            bad = lane_divergent(kernel, lambda s: id(s) in steps and id(s) not in divergent)
            if bad is None:
                break
            divergent.add(id(bad[0]))
        if not divergent:
            return kernel
        return dataclasses.replace(kernel, body=_without(kernel.body, divergent))


def _without(block: Block, ids: set[int]) -> Block:
    """``block`` without the statements whose ``id`` is in ``ids``, at any depth."""
    def rebuilt(stmt):
        kids = stmt.children()
        if not any(isinstance(k, Block) for k in kids):
            return stmt
        return stmt.with_children([_without(k, ids) if isinstance(k, Block) else k
                                   for k in kids])
    return Block(tuple(rebuilt(s) for s in block.stmts if id(s) not in ids), loc=block.loc)
