"""Compile kir statements to closures ``f(state, mask)`` that run them in lockstep.

Divergence is the mask. ``Return``, ``Break`` and ``Continue`` add the live lanes to
``state.ret`` or the innermost loop's ``brk`` / ``cont`` masks; a block drops those lanes
after each statement that can stop lanes (known statically), and a loop drops broken and
returned lanes after each iteration and revives continued ones for the next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from kir import ir
from kir.errors import KirError, Loc
from kir.interp.exprs import ExprFn, Hoist, compile_expr, compile_index
from kir.interp.races import race_free_accesses
from kir.interp.reduce import compile_sum_loop
from kir.interp.state import LoopFrame, Memory, State
from kir.ir import cops
from kir.ir.types import BOOL, PointerType, ScalarType, Type, VectorType

if TYPE_CHECKING:
    from kir.interp.counters import Counters

StmtFn = Callable[[State, np.ndarray], None]


def stops_lanes(stmt: ir.Stmt) -> bool:
    """Whether running ``stmt`` can end lanes' run of the statements after it (a Return
    anywhere, or a Break/Continue that belongs to a loop enclosing ``stmt``)."""
    stack: list[tuple[ir.Node, bool]] = [(stmt, False)]
    while stack:
        current, in_loop = stack.pop()
        if isinstance(current, ir.Return):
            return True
        if isinstance(current, (ir.Break, ir.Continue)) and not in_loop:
            return True
        # A loop consumes the break/continue statements inside it.
        inner = in_loop or isinstance(current, (ir.For, ir.While))
        stack.extend((c, inner) for c in current.children() if isinstance(c, ir.Stmt))
    return False


def _written_names(node: ir.Node) -> list[str]:
    if isinstance(node, (ir.Declare, ir.Assign)):
        return [node.name]
    if isinstance(node, ir.For):
        return [node.var]
    if isinstance(node, ir.Atomic) and node.result:
        return [node.result]
    return []


def _scoped_for_vars(kernel: ir.Kernel) -> set[str]:
    """Loop counters never named outside their own For (cond, update and body)."""
    counters = {n.var for n in kernel.body.walk() if isinstance(n, ir.For)}
    outside: set[str] = set()
    stack: list[tuple[ir.Node, frozenset[str]]] = [(kernel.body, frozenset())]
    while stack:
        current, inside = stack.pop()
        if isinstance(current, ir.For):
            stack.append((current.init, inside))
            inner = inside | {current.var}
            stack.extend((c, inner) for c in (current.cond, current.update, current.body))
            continue
        name = getattr(current, "result" if isinstance(current, ir.Atomic) else "name", None)
        if isinstance(current, (ir.Var, ir.Declare, ir.Assign, ir.Atomic)) \
                and name in counters and name not in inside:
            outside.add(name)
        stack.extend((c, inside) for c in current.children())
    return counters - outside


class StmtCompiler:
    """Turns one kernel's statements into closures, tracking declared types for casts."""

    def __init__(self, kernel: ir.Kernel, counters: "Counters | None" = None,
                 race_scalars: Mapping[str, object] | None = None) -> None:
        """``race_scalars``: the run's scalar arguments when it looks for races; the
        accesses proven thread-private at those values are compiled without race marks."""
        self.kernel = kernel
        self.counters = counters
        self.types: dict[str, Type] = {p.name: p.type for p in kernel.params}
        written = {n.name for n in kernel.body.walk() if isinstance(n, (ir.Assign, ir.Declare))}
        written |= {n.var for n in kernel.body.walk() if isinstance(n, ir.For)}
        written |= {n.result for n in kernel.body.walk() if isinstance(n, ir.Atomic)}
        fixed = {p.name for p in kernel.params if not p.is_buffer and p.name not in written}
        self.hoist = Hoist(fixed)
        if counters is not None:
            from kir.interp.count_hooks import CountingHoist

            self.hoist = CountingHoist(counters)  # count every operation where it runs
        if race_scalars is not None:  # accesses the race marks skip (kir.interp.races)
            self.hoist.race_free = race_free_accesses(
                kernel, {n: v for n, v in race_scalars.items() if n in fixed})
        self._fix_top_level_lets(kernel)
        self.scoped_for_vars = _scoped_for_vars(kernel)

    def _fix_top_level_lets(self, kernel: ir.Kernel) -> None:
        """Add to the hoisted names the locals declared once, at the kernel's top level,
        from chunk-invariant values and never reassigned (``int row = blockIdx.x * N``):
        every lane computes them exactly once, so index arithmetic on them is invariant."""
        counts: dict[str, int] = {}
        for n in kernel.body.walk():
            for name in _written_names(n):
                counts[name] = counts.get(name, 0) + 1
        for stmt in kernel.body.stmts:
            if isinstance(stmt, ir.Declare) and stmt.init is not None \
                    and counts.get(stmt.name) == 1 and stmt.type == stmt.init.type \
                    and self.hoist.invariant(stmt.init):
                self.hoist.fixed_vars.add(stmt.name)
                self.hoist.memo.clear()  # invariance of Var(name) just changed

    def expr(self, expr: ir.Expr, loc: Loc | None) -> ExprFn:
        return compile_expr(expr, loc, self.hoist)

    # ------------------------------------------------------------------------ helpers

    def _value(self, expr: ir.Expr, target: Type | None, loc: Loc | None) -> ExprFn:
        """``expr`` converted to ``target`` when their types differ (defensive: the frontend
        should already have inserted the Cast)."""
        if target is None or isinstance(target, PointerType) or expr.type == target:
            return self.expr(expr, loc)
        return self.expr(ir.Cast(expr, target), loc)

    def block(self, block: ir.Block) -> StmtFn:
        """Statements in order; lanes that return, break or continue leave the block."""
        fns = [(self.stmt(s), stops_lanes(s)) for s in block.stmts]

        def run(st: State, mask: np.ndarray) -> None:
            for fn, stops in fns:
                fn(st, mask)
                if stops:
                    stopped = st.ret
                    if st.loops:
                        frame = st.loops[-1]
                        stopped = stopped | frame.brk | frame.cont
                    mask = mask & ~stopped
                    if not np.count_nonzero(mask):
                        return
        return run

    def stmt(self, stmt: ir.Stmt) -> StmtFn:
        method = getattr(self, "_" + type(stmt).__name__.lower(), None)
        if isinstance(stmt, ir.MATRIX_STMTS):  # warp-wide fragments: kir.interp.matrix
            from kir.interp.matrix import compile_matrix_stmt

            fn = compile_matrix_stmt(self, stmt)
            if self.counters is None:
                return fn
            from kir.interp.matrix_counts import wrap_matrix_stmt

            return wrap_matrix_stmt(self.counters, stmt, fn)
        if method is None:
            raise KirError(f"the interpreter does not support {type(stmt).__name__}",
                           ir.stmt_loc(stmt))
        if self.counters is not None:
            return self._counted(stmt, method(stmt))
        return method(stmt)

    def _counted(self, stmt: ir.Stmt, fn: StmtFn) -> StmtFn:
        """``fn`` reporting its statement's memory access or barrier to the counters."""
        counters = self.counters
        if isinstance(stmt, (ir.Store, ir.Atomic)):
            from kir.interp.count_hooks import wrap_memory_stmt

            return wrap_memory_stmt(counters, stmt, fn)
        if isinstance(stmt, ir.Barrier) and stmt.scope == "block":
            def barrier(st: State, mask: np.ndarray) -> None:
                fn(st, mask)
                counters.barrier(st, mask)
            return barrier
        return fn

    # --------------------------------------------------------------------- statements

    def _block(self, s: ir.Block) -> StmtFn:
        return self.block(s)

    def _declare(self, s: ir.Declare) -> StmtFn:
        self.types[s.name] = s.type
        name, t = s.name, s.type
        if s.init is not None:
            init = self._value(s.init, t, s.loc)
        else:
            # C leaves it undefined; zero keeps runs deterministic.
            zero = cops.const_value(0, cops.scalar_of(t))
            init = (lambda st, mask: zero) if isinstance(t, ScalarType) else \
                (lambda st, mask: np.zeros((st.n, t.count), cops.np_dtype(t)))
        # Lanes that skip a declaration cannot read the variable before declaring it
        # again (C scoping), so no merge with old values: uniform values stay scalars.
        return lambda st, mask: st.env.__setitem__(name, init(st, mask))

    def _assign(self, s: ir.Assign) -> StmtFn:
        t = self.types.get(s.name, s.value.type)
        value = self._value(s.value, t, s.loc)
        name = s.name
        return lambda st, mask: assign(st, name, t, value(st, mask), mask)

    def _store(self, s: ir.Store) -> StmtFn:
        value = self.expr(s.value, s.loc)
        count = s.value.type.count if isinstance(s.value.type, VectorType) else 1
        address = compile_index(s.index, s.loc, self.hoist, "store to")
        offsets = np.arange(count, dtype=np.int64)
        name, loc, asynchronous = s.buffer, s.loc, s.asynchronous
        marked = id(s) not in self.hoist.race_free

        def write(st: State, mask: np.ndarray, mem: Memory, addr, v) -> None:
            data = mem.data
            if marked and mem.space != "local":  # the tracker keeps to what it tracks
                st.races.store(mem, addr, mask, count, v, loc)
            if count == 1 and mask is st.full and type(addr) is not np.ndarray:
                data[addr] = v if type(v) is not np.ndarray else v[-1]  # the last lane wins
                return
            addr = st.lanes(addr)
            if count > 1:
                addr = addr.astype(np.int64)[:, None] + offsets  # a u64 address: see _load
                v = np.broadcast_to(v, (st.n, count))
            else:
                v = st.lanes(v)
            if mask is st.full:
                data[addr] = v
            else:
                data[addr[mask]] = v[mask]

        def run(st: State, mask: np.ndarray) -> None:
            mem = st.memories.get(name) or st.memory(name, loc)
            v = value(st, mask)
            if v.dtype != mem.data.dtype:
                v = v.astype(mem.data.dtype)
            addr = address(st, mem, count, mask)
            if asynchronous:
                # Read now, land at the wait that requires it: as late as the GPU may.
                st.open_copies.append(lambda: write(st, mask, mem, addr, v))
            else:
                write(st, mask, mem, addr, v)
        return run

    def _asynccommit(self, s: ir.AsyncCommit) -> StmtFn:
        def run(st: State, mask: np.ndarray) -> None:
            st.copy_groups.append(st.open_copies)
            st.open_copies = []
        return run

    def _asyncwait(self, s: ir.AsyncWait) -> StmtFn:
        pending = s.pending

        def run(st: State, mask: np.ndarray) -> None:
            while len(st.copy_groups) > pending:
                for land in st.copy_groups.pop(0):
                    land()
        return run

    def _if(self, s: ir.If) -> StmtFn:
        cond = self._value(s.cond, BOOL, s.loc)
        then = self.block(s.then)
        orelse = self.block(s.orelse) if s.orelse is not None else None

        def run(st: State, mask: np.ndarray) -> None:
            c = cond(st, mask)
            if type(c) is np.ndarray:
                taken = np.count_nonzero(c)
                if 0 < taken < c.size:  # divergent: each side runs on its own lanes
                    then_mask = mask & c
                    else_mask = mask & ~c
                    if np.count_nonzero(then_mask):
                        then(st, then_mask)
                    if orelse is not None and np.count_nonzero(else_mask):
                        orelse(st, else_mask)
                    return
            else:
                taken = bool(c)
            if taken:
                then(st, mask)
            elif orelse is not None:
                orelse(st, mask)
        return run

    def _for(self, s: ir.For) -> StmtFn:
        self.types[s.var] = s.type
        var, t = s.var, s.type
        init = self._value(s.init, t, s.loc)
        update = self._value(s.update, t, s.loc)
        if var in self.scoped_for_vars:
            # Only live lanes of this loop ever read its counter: store it unmerged, so a
            # uniform counter stays a scalar even under a divergent mask.
            def step(st: State, live: np.ndarray) -> None:
                st.env[var] = update(st, live)
        else:
            def step(st: State, live: np.ndarray) -> None:
                assign(st, var, t, update(st, live), live)
        loop = self._loop(s.cond, s.body, True, s.label, s.loc, step)
        scoped = var in self.scoped_for_vars
        # Counting runs every iteration: the whole-loop shortcut would hide them.
        whole = compile_sum_loop(s, self.hoist, self.types) \
            if scoped and self.counters is None else None

        def run(st: State, mask: np.ndarray) -> None:
            if scoped:
                st.env[var] = init(st, mask)
            else:
                assign(st, var, t, init(st, mask), mask)
            if whole is not None and whole(st, mask):
                return
            loop(st, mask)
        return run

    def _while(self, s: ir.While) -> StmtFn:
        return self._loop(s.cond, s.body, s.test_first, "while", s.loc, None)

    def _loop(self, cond_expr: ir.Expr, body_block: ir.Block, test_first: bool, label: str,
              loc: Loc | None, step: StmtFn | None) -> StmtFn:
        cond = self._value(cond_expr, BOOL, loc)
        body = self.block(body_block)
        counters = self.counters
        if counters is not None:
            counted_body = body

            def body(st: State, live: np.ndarray) -> None:
                counters.iteration(st, live)
                counted_body(st, live)
        body_stops = any(stops_lanes(x) for x in body_block.stmts)

        def run(st: State, mask: np.ndarray) -> None:
            frame = LoopFrame(st.none, st.none)
            st.loops.append(frame)
            steps = st.steps
            live = mask
            first = True
            try:
                while True:
                    if test_first or not first:
                        c = cond(st, live)
                        if type(c) is not np.ndarray:
                            if not c:
                                return
                        elif np.count_nonzero(c) != c.size:
                            live = live & c
                            if not np.count_nonzero(live):
                                return
                    first = False
                    steps.count += 1
                    if steps.count > steps.next_check:
                        steps.check(label, loc)  # the step limit or the clock
                    body(st, live)
                    if body_stops:
                        live = live & ~(frame.brk | st.ret)
                        frame.cont = st.none
                        if not np.count_nonzero(live):
                            return
                    if step is not None:
                        step(st, live)
            finally:
                st.loops.pop()
        return run

    def _barrier(self, s: ir.Barrier) -> StmtFn:
        if s.scope == "warp":
            # Lockstep lanes are always converged at a warp barrier; it orders their
            # shared-memory accesses (kir.interp.races).
            return lambda st, mask: st.races.warp_barrier(mask)
        if s.scope != "block":
            raise KirError(f"unknown barrier scope {s.scope!r}", s.loc)
        loc = s.loc

        def run(st: State, mask: np.ndarray) -> None:
            st.check_barrier(mask, loc)
            st.races.block_barrier(mask)
        return run

    def _fence(self, s: ir.Fence) -> StmtFn:
        # Blocks run one after another here, and the lanes of a chunk in lockstep: every
        # write before a fence is seen by every later statement already.
        return lambda st, mask: None

    def _assert(self, s: ir.Assert) -> StmtFn:
        from kir.ir.printer import print_expr

        cond = self._value(s.cond, BOOL, s.loc)
        loc, text = s.loc, print_expr(s.cond)

        def run(st: State, mask: np.ndarray) -> None:
            c = cond(st, mask)
            failed = np.count_nonzero(mask & ~c) if type(c) is np.ndarray else \
                (not bool(c) and np.count_nonzero(mask))
            if failed and s.message is not None:
                raise KirError(f"{s.message} (in {failed} thread(s))", loc)
            if failed:
                raise KirError(f"assertion failed in {failed} thread(s): {text}", loc,
                               hint="the kernel's assert does not hold for these inputs and "
                                    "sizes (GPU builds drop asserts; kir's interpreter checks "
                                    "them)")
        return run

    def _atomic(self, s: ir.Atomic) -> StmtFn:
        from kir.interp.atomics import compile_atomic

        result_type = self.types.get(s.result) if s.result else None
        return compile_atomic(s, result_type, self.hoist)

    def _alloc(self, s: ir.Alloc) -> StmtFn:
        if s.space not in ("shared", "local"):
            raise KirError(f"cannot allocate an array in {s.space!r} memory", s.loc)
        scalar = cops.scalar_of(s.elem)
        count = s.elem.count if isinstance(s.elem, VectorType) else 1
        size = s.size * count
        if s.dynamic and (s.size == 0 or self.kernel.launch.shared_bytes):
            size = self.kernel.launch.shared_bytes // scalar.nbytes
        name, dtype, space = s.name, scalar.numpy, s.space
        self.types[name] = PointerType(s.elem, space)
        return lambda st, mask: st.alloc(name, dtype, size, space)

    def _return(self, s: ir.Return) -> StmtFn:
        def run(st: State, mask: np.ndarray) -> None:
            st.ret = st.ret | mask
        return run

    def _break(self, s: ir.Break) -> StmtFn:
        return self._loop_exit(s, "brk")

    def _continue(self, s: ir.Continue) -> StmtFn:
        return self._loop_exit(s, "cont")

    @staticmethod
    def _loop_exit(s: ir.Stmt, which: str) -> StmtFn:
        loc, word = s.loc, type(s).__name__.lower()

        def run(st: State, mask: np.ndarray) -> None:
            if not st.loops:
                raise KirError(f"{word} outside a loop", loc)
            frame = st.loops[-1]
            setattr(frame, which, getattr(frame, which) | mask)
        return run


def assign(st: State, name: str, t: Type, value: cops.Value, mask: np.ndarray) -> None:
    """Give the live lanes of ``name`` a new value; the others keep theirs."""
    if mask is st.full:
        st.env[name] = value
        return
    old = st.env.get(name)
    if old is None:
        if isinstance(t, VectorType):
            old = np.zeros((st.n, t.count), cops.np_dtype(t))
        else:
            old = cops.const_value(0, cops.scalar_of(t)) if isinstance(t, ScalarType) \
                else np.zeros(st.n, np.asarray(value).dtype)
    m = mask[:, None] if isinstance(t, VectorType) else mask
    st.env[name] = np.where(m, value, old)
