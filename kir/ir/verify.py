"""The verifier: catches IR that no backend should be handed.

Checks names (variables, buffers, intrinsics), types (operands, stores, conditions, vector
loads), writes (const buffers, parameters), control flow (break/continue outside loops,
block barriers under thread-divergent control flow) and a target's limits (threads per
group, shared memory). Every failure is a :class:`KirError` at the statement's ``loc``.

Divergence is a conservative, syntactic taint analysis: a value is *varying* when it depends
on ``thread.*``, ``lane``, ``warp``, loaded data, shuffles, atomics, or on a variable assigned
a varying value or assigned under varying control flow. ``block.*``, sizes, params, constants
and the variables of uniform loops are uniform. A divergent ``return`` makes the rest of the
kernel divergent; a divergent ``break``/``continue`` makes its whole loop divergent.
"""

from __future__ import annotations

from kir.errors import KirError, LimitError, Loc, source_line_of
from kir.ir.nodes import (
    ASYNC_STMTS,
    ATOMIC_OPS,
    COMPARISONS,
    BIT_INTRINSICS,
    INTRINSIC_ARITY,
    INTRINSICS,
    PREDICATES,
    SHUFFLE_MODES,
    SPECIAL_KINDS,
    Alloc,
    Assign,
    Atomic,
    Assert,
    AsyncWait,
    FENCE_SCOPES,
    Barrier,
    Fence,
    Binary,
    Block,
    Break,
    Call,
    Cast,
    Component,
    Const,
    Continue,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    MakeVector,
    MatrixFill,
    MatrixLoad,
    MatrixStore,
    Node,
    Return,
    Select,
    Shuffle,
    Special,
    Stmt,
    Store,
    Unary,
    Var,
    WarpReduce,
    While,
)
from kir.ir.edit import own_exprs
from kir.ir.uniform_loads import uniform_shared_loads
from kir.ir.types import BOOL, PointerType, ScalarType, Type, VectorType
from kir.ir.verify_matrix import MATRIX_STMTS, lane_varying, matrix_problem, thread_x_locals
from kir.target import Target

_VARYING_SPECIALS = ("thread", "lane", "warp")
_REDUCE_OPS = ("sum", "max", "min")


def verify(kernel: Kernel, target: Target | None = None) -> None:
    """Raise :class:`KirError` for the first problem found in ``kernel``; with ``target``
    (a :class:`kir.target.Target`), also check threads per group and shared memory against
    its limits."""
    scalars = {p.name for p in kernel.params if not p.is_buffer}
    stray = [name for name in kernel.launch.ignores if name not in scalars]
    if stray:
        raise KirError(f"the launch's ignores=(...) names {', '.join(stray)}: only scalar "
                       "parameters of the kernel may be ignored")
    buffers = {p.name for p in kernel.params if p.is_buffer}
    stray = [name for name, _ in kernel.launch.scratch if name not in buffers]
    if stray:
        raise KirError(f"the launch's scratch=(...) names {', '.join(stray)}: only buffer "
                       "parameters of the kernel are scratch")
    checker = _Checker(kernel)
    checker.check_types()
    checker.check_barriers()
    checker.check_matrix_uniform()
    if target is not None:
        check_limits(kernel, target)


def check_limits(kernel: Kernel, target: Target) -> None:
    """Raise :class:`LimitError` when the launch or shared memory exceeds ``target``'s
    limits: threads per group, static shared arrays, and static plus dynamic together."""
    first = next((s.loc for s in kernel.body.stmts if s.loc is not None), None)
    threads = kernel.launch.threads_per_block
    if threads > target.max_threads:
        raise LimitError(
            f"block of {kernel.launch.block} = {threads} threads; {target.title} allows at most "
            f"{target.max_threads} per {target.group_word}", first,
            hint="reduce the block size")
    sizes = [(s.name, s.size * s.elem.nbytes, s.loc) for s in kernel.body.walk()
             if isinstance(s, Alloc) and s.space == "shared" and not s.dynamic]
    static = sum(size for _, size, _ in sizes)
    total = static + kernel.launch.shared_bytes
    limit = target.max_shared_bytes
    if static > target.max_static_shared_bytes:
        total, limit = static, target.max_static_shared_bytes
    if total > limit:
        parts = [f"{name}: {size} B" for name, size, _ in sizes]
        if kernel.launch.shared_bytes and limit == target.max_shared_bytes:
            parts.append(f"dynamic: {kernel.launch.shared_bytes} B")
        largest = max(sizes, key=lambda item: item[1], default=(None, 0, first))
        what = "static shared memory" if limit < target.max_shared_bytes else "shared memory"
        raise LimitError(
            f"kernel uses {total} bytes of {what} ({', '.join(parts)}); {target.title} "
            f"allows at most {limit}", largest[2],
            hint="reduce the tile size T or the block size (the shared arrays scale with them)")


class _Checker:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.params = {p.name: p.type for p in kernel.params}

    def fail(self, message: str, loc: Loc | None, hint: str | None = None,
             cls: type[KirError] = KirError) -> KirError:
        source = self.kernel.source
        line = source_line_of(source, loc.line) if source and loc else None
        return cls(message, loc, source_line=line, hint=hint)

    # -- names, types, writes, loops ------------------------------------------------------

    def check_types(self) -> None:
        vars_: dict[str, tuple[Type, str]] = {
            p.name: (p.type, "param") for p in self.kernel.params if not p.is_buffer}
        buffers: dict[str, tuple[Type, bool]] = {
            p.name: (p.type.elem, p.type.const) for p in self.kernel.params
            if isinstance(p.type, PointerType)}
        fragments: dict[str, Type] = {}
        shared: set[str] = set()  # the shared arrays declared so far
        # (stmt, loop depth); a stack in program order, so declarations precede uses.
        work: list[tuple[Stmt, int]] = [(self.kernel.body, 0)]
        while work:
            stmt, loops = work.pop()
            loc = stmt.loc
            for expr in _exprs_of(stmt):
                self.check_expr(expr, vars_, buffers, loc)
            if isinstance(stmt, Block):
                work.extend((s, loops) for s in reversed(stmt.stmts))
            elif isinstance(stmt, Declare):
                if stmt.init is not None and stmt.init.type != stmt.type:
                    raise self.fail(f"{stmt.name!r} is declared {stmt.type} but initialized "
                                    f"with {stmt.init.type}", loc, hint="insert a cast")
                vars_[stmt.name] = (stmt.type, "local")
            elif isinstance(stmt, Assign):
                self.check_assign(stmt.name, stmt.value.type, vars_, loc)
            elif isinstance(stmt, (Store, Atomic)):
                self.check_write(stmt, buffers, vars_, loc)
                if isinstance(stmt, Store) and stmt.asynchronous:
                    self.check_async_copy(stmt, shared, loc)
            elif isinstance(stmt, For):
                self.check_cond(stmt.init, loc, stmt.type, "loop start")
                vars_[stmt.var] = (stmt.type, "loop")
                for expr in (stmt.cond, stmt.update):
                    self.check_expr(expr, vars_, buffers, loc)
                self.check_cond(stmt.cond, loc)
                self.check_cond(stmt.update, loc, stmt.type, "loop update")
                work.append((stmt.body, loops + 1))
            elif isinstance(stmt, While):
                self.check_cond(stmt.cond, loc)
                work.append((stmt.body, loops + 1))
            elif isinstance(stmt, Assert):
                self.check_cond(stmt.cond, loc)
            elif isinstance(stmt, If):
                self.check_cond(stmt.cond, loc)
                if stmt.orelse is not None:
                    work.append((stmt.orelse, loops))
                work.append((stmt.then, loops))
            elif isinstance(stmt, (Break, Continue)) and loops == 0:
                word = "break" if isinstance(stmt, Break) else "continue"
                raise self.fail(f"{word} outside a loop", loc)
            elif isinstance(stmt, Alloc):
                if stmt.space not in ("shared", "local"):
                    raise self.fail(f"array {stmt.name!r} in unknown space {stmt.space!r}", loc)
                if stmt.size <= 0 and not stmt.dynamic:
                    raise self.fail(f"array {stmt.name!r} has size {stmt.size}", loc)
                buffers[stmt.name] = (stmt.elem, False)
                if stmt.space == "shared":
                    shared.add(stmt.name)
            elif isinstance(stmt, AsyncWait) and stmt.pending < 0:
                raise self.fail(f"async_wait {stmt.pending}: the number of copy groups left "
                                "in flight cannot be negative", loc)
            elif isinstance(stmt, Barrier) and stmt.scope not in ("block", "warp"):
                raise self.fail(f"unknown barrier scope {stmt.scope!r}", loc)
            elif isinstance(stmt, Fence) and stmt.scope not in FENCE_SCOPES:
                raise self.fail(f"unknown fence scope {stmt.scope!r} (device or block)", loc)
            elif isinstance(stmt, MATRIX_STMTS):
                problem = matrix_problem(stmt, fragments, buffers, vars_)
                if problem:
                    raise self.fail(problem[0], loc, hint=problem[1])

    def check_cond(self, expr: Expr, loc: Loc | None, want: Type | None = None,
                   what: str = "condition") -> None:
        if want is not None:
            if expr.type != want:
                raise self.fail(f"{what} has type {expr.type}, the loop variable {want}", loc)
            return
        if not (isinstance(expr.type, ScalarType) and (expr.type == BOOL or expr.type.is_int)):
            raise self.fail(f"condition has type {expr.type}; it must be bool or an integer",
                            loc, hint="compare it explicitly, e.g. x != 0.0")

    def check_assign(self, name: str, value_type: Type, vars_: dict, loc: Loc | None) -> None:
        if name not in vars_:
            raise self.fail(f"assignment to undeclared variable {name!r}", loc)
        declared, kind = vars_[name]
        if kind == "param":
            raise self.fail(f"assignment to kernel parameter {name!r}", loc,
                            hint="copy it into a local variable first")
        if value_type != declared:
            raise self.fail(f"{name!r} has type {declared} but is assigned {value_type}", loc,
                            hint="insert a cast")

    def check_write(self, stmt: Store | Atomic, buffers: dict, vars_: dict,
                    loc: Loc | None) -> None:
        if stmt.buffer not in buffers:
            raise self.fail(f"write to unknown buffer {stmt.buffer!r}", loc)
        elem, const = buffers[stmt.buffer]
        if const:
            raise self.fail(f"write to const buffer {stmt.buffer!r}", loc,
                            hint="drop const from the parameter, or write another buffer")
        if not _is_int(stmt.index.type):
            raise self.fail(f"index into {stmt.buffer!r} has type {stmt.index.type}", loc,
                            hint="indices are integers: cast it")
        value = stmt.value.type
        ok = value == elem or (isinstance(stmt, Store) and isinstance(value, VectorType)
                               and value.elem == elem)
        if not ok:
            raise self.fail(f"storing {value} into {stmt.buffer!r} of {elem}", loc,
                            hint="insert a cast")
        if isinstance(stmt, Atomic):
            if stmt.op not in ATOMIC_OPS:
                raise self.fail(f"unknown atomic operation {stmt.op!r}", loc)
            if stmt.result is not None:
                self.check_assign(stmt.result, value, vars_, loc)

    def check_async_copy(self, stmt: Store, shared: set[str], loc: Loc | None) -> None:
        """An asynchronous copy moves 4, 8 or 16 bytes from a global buffer, read as they
        are stored, into a shared array (what ``cp.async`` can do)."""
        value = stmt.value
        if stmt.buffer not in shared:
            raise self.fail(f"asynchronous copy into {stmt.buffer!r}, which is not a shared "
                            "array", loc, hint="copy asynchronously into shared memory only")
        source = self.params.get(value.buffer) if isinstance(value, Load) else None
        if not isinstance(source, PointerType) or source.space != "global":
            raise self.fail("an asynchronous copy's value must be a load from a global "
                            "buffer", loc, hint="store computed values synchronously")
        if value.type.nbytes not in (4, 8, 16):
            raise self.fail(f"an asynchronous copy moves 4, 8 or 16 bytes, not "
                            f"{value.type.nbytes} ({value.type})", loc,
                            hint="copy 32-bit elements, alone or as vectors of 2 or 4")

    def check_expr(self, root: Expr, vars_: dict, buffers: dict, loc: Loc | None) -> None:
        for e in root.walk():
            problem = _expr_problem(e, vars_, buffers)  # type: ignore[arg-type]
            if problem:
                raise self.fail(problem[0], loc, hint=problem[1])

    # -- divergence ------------------------------------------------------------------------

    def check_matrix_uniform(self) -> None:
        """Matrix statements act for a whole warp: no lane of it may skip one."""
        if not any(isinstance(n, MATRIX_STMTS) for n in self.kernel.body.walk()):
            return
        bad = lane_divergent(self.kernel, lambda s: isinstance(s, MATRIX_STMTS))
        if bad is not None:
            stmt, reason = bad
            raise self.fail(f"matrix operation under lane-divergent control flow ({reason})",
                            stmt.loc, hint="every lane of a warp must reach a matrix operation "
                                           "together: branch on warp-uniform values only")

    def check_barriers(self) -> None:
        tainted: set[str] = set()
        # A flag one thread wrote to shared memory before a barrier reads alike after it.
        uniform = uniform_shared_loads(self.kernel)

        def varying(expr: Expr, names: set[str]) -> str | None:
            return _varying(expr, names, uniform)
        while True:
            walker = _Divergence(tainted, varying)
            walker.block(self.kernel.body, None)
            if walker.tainted == tainted:
                break
            tainted = set(walker.tainted)
        if walker.bad is not None:
            barrier, reason = walker.bad
            what = "barrier" if isinstance(barrier, Barrier) else "async_commit / async_wait"
            raise self.fail(f"{what} under thread-divergent control flow ({reason})",
                            barrier.loc,
                            hint=f"move the {what} out of the branch or loop, so every thread "
                                 "of the block reaches it")


def lane_divergent(kernel: Kernel, is_target, branches_only: bool = False
                   ) -> tuple[Stmt, str] | None:
    """The first statement ``is_target`` picks that sits under control flow whose condition
    may differ between the lanes of a warp, and why; None when there is none (see
    :func:`kir.ir.verify_matrix.lane_varying`). With ``branches_only``, only an ``if``'s
    condition counts: not code after a return only some lanes took (they have exited and
    wait nowhere), nor a loop's trip count (the analysis cannot yet tell a warp-uniform
    count, a row loop over a per-warp row or a length read from memory, from others)."""
    return _lane_walk(kernel, is_target, branches_only).bad


def exchanges_lanes(stmt: Stmt) -> bool:
    """``stmt``'s own expressions hold a shuffle or a warp reduction."""
    return any(isinstance(e, (Shuffle, WarpReduce)) for c in own_exprs(stmt) for e in c.walk())


def lane_varying_locals(kernel: Kernel) -> set[str]:
    """The locals whose value may differ between the lanes of a warp, or that are set under
    control flow that may (see :func:`lane_divergent`)."""
    return _lane_walk(kernel, lambda s: False).tainted


def _lane_walk(kernel: Kernel, is_target, branches_only: bool = False) -> "_Divergence":
    """The divergence walker over ``kernel`` at its fixpoint, lanes of a warp as lanes."""
    varying = lane_varying(kernel.launch.block, thread_x_locals(kernel.body),
                           uniform_shared_loads(kernel))
    tainted: set[str] = set()
    while True:
        walker = _Divergence(tainted, varying, is_target, branches_only)
        walker.block(kernel.body, None)
        if walker.tainted == tainted:
            return walker
        tainted = set(walker.tainted)


def _exprs_of(stmt: Stmt) -> list[Expr]:
    if isinstance(stmt, Declare):
        return [stmt.init] if stmt.init is not None else []
    if isinstance(stmt, Assign):
        return [stmt.value]
    if isinstance(stmt, (Store, Atomic)):
        return [stmt.index, stmt.value]
    if isinstance(stmt, For):
        return [stmt.init]  # cond and update see the loop variable: checked after declaring
    if isinstance(stmt, (While, If, Assert)):
        return [stmt.cond]
    if isinstance(stmt, MatrixFill):
        return [stmt.value]
    if isinstance(stmt, (MatrixLoad, MatrixStore)):
        return [stmt.index, stmt.stride]
    return []


def _expr_problem(e: Node, vars_: dict, buffers: dict) -> tuple[str, str | None] | None:
    if isinstance(e, Var):
        if e.name not in vars_:
            return f"undeclared variable {e.name!r}", None
        if vars_[e.name][0] != e.type:
            return f"{e.name!r} is {vars_[e.name][0]} but used as {e.type}", None
    elif isinstance(e, Load):
        if e.buffer not in buffers:
            return f"load from unknown buffer {e.buffer!r}", None
        elem = buffers[e.buffer][0]
        if not _is_int(e.index.type):
            return f"index into {e.buffer!r} has type {e.index.type}", "cast it to i32"
        got = e.type.elem if isinstance(e.type, VectorType) and not isinstance(
            elem, VectorType) else e.type
        if got != elem:
            return f"loading {e.type} from {e.buffer!r} of {elem}", "insert a cast after the load"
    elif isinstance(e, Binary):
        left, right = e.left.type, e.right.type
        mixed = (isinstance(left, VectorType) and left.elem == right) or (
            isinstance(right, VectorType) and right.elem == left)
        if left != right and not mixed:
            return f"operands of {e.op!r} differ: {left} and {right}", "insert a cast"
        want = BOOL if e.op in COMPARISONS or e.op in ("&&", "||") else (
            right if isinstance(right, VectorType) else left)
        if e.type != want:
            return f"{e.op!r} on {left} gives {want}, not {e.type}", None
    elif isinstance(e, Unary):
        want = BOOL if e.op == "!" else e.operand.type
        if e.type != want:
            return f"{e.op!r} on {e.operand.type} gives {want}, not {e.type}", None
    elif isinstance(e, Select):
        cond = e.cond.type
        if not (isinstance(cond, ScalarType) and (cond == BOOL or cond.is_int)):
            return f"select condition has type {cond}; it must be bool or an integer", None
        if not (e.if_true.type == e.if_false.type == e.type):
            return (f"select arms differ: {e.if_true.type} and {e.if_false.type}",
                    "insert a cast")
    elif isinstance(e, Call):
        if e.fn not in INTRINSICS:
            return f"unknown intrinsic {e.fn!r}", "known: " + ", ".join(INTRINSICS)
        if len(e.args) != INTRINSIC_ARITY.get(e.fn, 1):
            want = INTRINSIC_ARITY.get(e.fn, 1)
            return f"{e.fn} takes {want} arguments, not {len(e.args)}", None
        if e.fn == "bitcast":
            src = e.args[0].type
            if not (isinstance(src, ScalarType) and isinstance(e.type, ScalarType)
                    and src.nbytes == e.type.nbytes and src != BOOL and e.type != BOOL):
                return f"bitcast from {src} to {e.type}: two scalars of one width", None
        elif e.fn in PREDICATES:  # isnan(x): a bool about a float
            if e.type != BOOL or not all(isinstance(a.type, ScalarType) and a.type.is_float
                                         for a in e.args):
                return f"{e.fn} takes a float and is a bool", None
        elif any(a.type != e.type for a in e.args):
            return f"arguments of {e.fn} do not all have its type {e.type}", "insert a cast"
        elif e.fn in BIT_INTRINSICS and not (isinstance(e.type, ScalarType) and e.type.is_int):
            return f"{e.fn} takes an integer", None
    elif isinstance(e, Special):
        axis_ok = e.axis in ("x", "y", "z") if e.kind in SPECIAL_KINDS[:4] else e.axis == ""
        if e.kind not in SPECIAL_KINDS or not axis_ok:
            return f"unknown hardware index {e.kind}.{e.axis}", None
    elif isinstance(e, Shuffle):
        if e.mode not in SHUFFLE_MODES or e.type != e.value.type:
            return f"bad shuffle ({e.mode}, {e.value.type} → {e.type})", None
    elif isinstance(e, WarpReduce):
        if e.op not in _REDUCE_OPS or e.type != e.value.type:
            return f"bad warp reduction ({e.op}, {e.value.type} → {e.type})", None
    elif isinstance(e, Component):
        vt = e.vector.type
        if not isinstance(vt, VectorType) or not 0 <= e.index < vt.count or vt.elem != e.type:
            return f"bad vector component {e.index} of {vt}", None
    elif isinstance(e, MakeVector):
        if len(e.elems) != e.type.count or any(x.type != e.type.elem for x in e.elems):
            return f"{e.type} built from {[str(x.type) for x in e.elems]}", None
    elif isinstance(e, (Cast, Const)):
        return None
    return None


def _is_int(t: Type) -> bool:
    return isinstance(t, ScalarType) and t.is_int


def _varying(expr: Expr, tainted: set[str], uniform_loads: frozenset[int] = frozenset()
             ) -> str | None:
    """Why ``expr`` may differ between threads of a block, or None if it cannot; a load
    whose id is in ``uniform_loads`` reads alike in every thread (its index is judged)."""
    for e in expr.walk():
        if isinstance(e, Special) and e.kind in _VARYING_SPECIALS:
            return f"depends on {e.kind}{'.' + e.axis if e.axis else ''}"
        if isinstance(e, Load) and id(e) not in uniform_loads:
            return f"depends on data loaded from {e.buffer!r}"
        if isinstance(e, (Shuffle, WarpReduce)):
            return "depends on a warp shuffle or reduction"
        if isinstance(e, Var) and e.name in tainted:
            return f"depends on {e.name!r}, which varies between threads"
    return None


class _Divergence:
    """One pass of the taint analysis; ``bad`` is the first divergent block barrier."""

    def __init__(self, tainted: set[str], varying=None, is_target=None,
                 branches_only: bool = False) -> None:
        self.tainted = set(tainted)
        self.branches_only = branches_only
        self.returned: str | None = None  # set once a divergent return was seen
        self.bad: tuple[Stmt, str] | None = None
        # Which values count as varying, and which statements must not sit under them:
        # block barriers by default; warp-wide matrix statements for check_matrix_uniform.
        self.varying = varying or _varying
        # Copy groups are counted per thread; kir's interpreter models them for the whole
        # block, so commits and waits are reached by every thread together, like barriers.
        self.is_target = is_target or (lambda s: isinstance(s, Barrier) and s.scope == "block"
                                       or isinstance(s, ASYNC_STMTS))

    def block(self, block: Block, why: str | None) -> None:
        # Statement lists are walked with an explicit stack of (stmt, why) for depth safety.
        work: list[tuple[Stmt, str | None]] = [(block, why)]
        while work:
            stmt, why = work.pop()
            why = why or self.returned
            loc = f" at {stmt.loc}" if stmt.loc else ""
            if isinstance(stmt, Block):
                work.extend((s, why) for s in reversed(stmt.stmts))
                continue
            if why and self.is_target(stmt):  # (any statement: its own expressions)
                self.bad = self.bad or (stmt, why)
            if isinstance(stmt, (Declare, Assign)):
                value = stmt.init if isinstance(stmt, Declare) else stmt.value
                if why or (value is not None and self.varying(value, self.tainted)):
                    self.tainted.add(stmt.name)
            elif isinstance(stmt, Atomic) and stmt.result is not None:
                self.tainted.add(stmt.result)
            elif isinstance(stmt, For):
                if why or self.varying(stmt.init, self.tainted) or \
                        self.varying(stmt.update, self.tainted):
                    self.tainted.add(stmt.var)
                cond = self.varying(stmt.cond, self.tainted)
                inner = why or (cond and f"loop condition{loc} {cond}") or \
                    self.exits_divergently(stmt.body, loc)
                work.append((stmt.body, why if self.branches_only else inner))
            elif isinstance(stmt, While):
                cond = self.varying(stmt.cond, self.tainted)
                inner = why or (cond and f"loop condition{loc} {cond}") or \
                    self.exits_divergently(stmt.body, loc)
                work.append((stmt.body, why if self.branches_only else inner))
            elif isinstance(stmt, If):
                cond = self.varying(stmt.cond, self.tainted)
                inner = why or (cond and f"condition{loc} {cond}")
                if stmt.orelse is not None:
                    work.append((stmt.orelse, inner))
                work.append((stmt.then, inner))
            elif isinstance(stmt, Return) and why and not self.branches_only:
                self.returned = self.returned or f"after a return under {why}"

    def exits_divergently(self, body: Block, loc: str) -> str | None:
        """A break/continue/return of this loop under a varying condition in its body."""
        work: list[tuple[Stmt, bool, int]] = [(body, False, 0)]
        while work:
            stmt, varying, depth = work.pop()
            if isinstance(stmt, Block):
                work.extend((s, varying, depth) for s in stmt.stmts)
            elif isinstance(stmt, If):
                v = varying or bool(self.varying(stmt.cond, self.tainted))
                work.append((stmt.then, v, depth))
                if stmt.orelse is not None:
                    work.append((stmt.orelse, v, depth))
            elif isinstance(stmt, (For, While)):
                v = varying or bool(self.varying(stmt.cond, self.tainted))
                work.append((stmt.body, v, depth + 1))
            elif varying and (isinstance(stmt, Return) or (
                    isinstance(stmt, (Break, Continue)) and depth == 0)):
                return f"loop{loc} exited early by some threads only"
        return None


__all__ = ["verify", "check_limits"]
