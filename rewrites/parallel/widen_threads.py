"""widen-threads: give each thread's work to a whole warp, every lane doing it redundantly."""

from __future__ import annotations

import dataclasses

from kir.ir import (
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Cast,
    Const,
    Expr,
    For,
    If,
    Kernel,
    MatrixFill,
    MatrixLoad,
    MatrixMultiplyAccumulate,
    MatrixStore,
    Node,
    Shuffle,
    Special,
    Var,
    WarpReduce,
    transform,
)
from kir.ir.fold import fold_expr
from kir.ir.nodes import WARP
from kir.ir.types import BOOL, U32
from kir.rules import BaseRule, Match, NotApplicable, RuleContext

_WARP_NODES = (Shuffle, WarpReduce, MatrixFill, MatrixLoad, MatrixMultiplyAccumulate,
               MatrixStore)


class WidenThreads(BaseRule):
    """Run each thread's work on a whole warp: 32 lanes compute the same values redundantly.

    CUDA practice: the first step of turning a thread-per-row kernel (one thread owns a
    softmax row, a layer-norm row, an attention query row) into the warp-per-row kernels fast
    libraries use (Apex/PyTorch softmax and layer norm, FlashAttention-2's warp layout, MLX's
    own row kernels): a warp owns the row, so that the row's loops can then be spread over
    its lanes (``distribute-loop``, ``split-reduction``) with partial results combined by
    shuffles. On its own the step only adds redundant lanes; it is what makes the next ones
    possible (the search's hints take the whole recipe).

    The block grows from ``(T, 1, 1)`` to ``(32 T, 1, 1)``; ``thread.x`` becomes
    ``thread.x / 32`` and ``block_dim.x`` the old width everywhere, so lane ``l`` of warp
    ``w`` computes exactly what thread ``w`` computed, and stores write the same values to the
    same addresses. Atomics would be repeated 32 times: each runs on lane 0 only (an atomic
    whose old value is read is refused). Legality: the block is one-dimensional and at most
    32 threads wide (so the widened block fits 1024 threads), and the kernel has no warp-level
    operation (shuffle, warp reduction, lane or warp index, matrix fragment), whose meaning
    the new lane-to-thread mapping would change.
    """

    name = "widen-threads"
    site_key = "dim"

    def candidates(self, kernel: Kernel) -> list[str]:
        return ["x"]

    def plan(self, kernel: Kernel, site: str):
        bx, by, bz = kernel.launch.block
        if (by, bz) != (1, 1):
            return NotApplicable("the block is not one-dimensional")
        if bx * WARP > 1024:
            return NotApplicable(f"a block of {bx} threads widened 32 times exceeds 1024 "
                                 "threads (shrink the block first: resize-block)")
        for n in kernel.body.walk():
            if isinstance(n, _WARP_NODES):
                return NotApplicable(f"the kernel already uses warp operations "
                                     f"({type(n).__name__})")
            if isinstance(n, Special) and n.kind in ("lane", "warp", "warp_size"):
                return NotApplicable(f"the kernel reads the {n.kind} index")
            if isinstance(n, Atomic) and n.result is not None:
                return NotApplicable("an atomic's old value is read: lane 0 alone would "
                                     "know it")
        return bx

    def apply(self, kernel: Kernel, match: Match, params, ctx: RuleContext) -> Kernel:
        width = match.plan
        spread = _block_strided_loops(kernel)
        lane0 = Binary("==", Binary("%", Special("thread", "x"), Const(WARP, U32), U32),
                       Const(0, U32), BOOL)

        def visit(n: Node) -> Node | None:
            if isinstance(n, Special) and n.kind == "thread" and n.axis == "x":
                return Binary("/", n, Const(WARP, U32), U32)
            if isinstance(n, Special) and n.kind == "block_dim" and n.axis == "x":
                return Const(width, U32)
            return None

        body = transform(kernel.body, visit)
        # Fold what the constant block width makes constant (`i32(32_u32) * d` strides), so
        # block-strided loops stay counted loops for the rules that follow.
        body = transform(body, lambda n: fold_expr(n) if isinstance(n, Expr) else None)
        body = transform(body, lambda n: _guard_atomics(n, lane0))
        # Block-strided loops keep spreading their iterations over all threads, now 32 times
        # as many: they start at thread.x and step by the new block width (their bound, the
        # amount of work, keeps the old width).
        new_width = Const(width * WARP, U32)
        headers = {label: (loop.init, transform(loop.update, lambda n: _new_dim(n, new_width)))
                   for label, loop in spread.items()}
        body = transform(body, lambda n: dataclasses.replace(
            n, init=headers[n.label][0], update=fold_expr(headers[n.label][1]))
            if isinstance(n, For) and n.label in headers else None)
        launch = dataclasses.replace(kernel.launch, block=(width * WARP, 1, 1))
        return dataclasses.replace(kernel, body=body, launch=launch)


def _new_dim(node: Node, width: Const) -> Node | None:
    if isinstance(node, Special) and node.kind == "block_dim" and node.axis == "x":
        return width
    return None


def _is_special(e: Expr, kind: str) -> bool:
    while isinstance(e, Cast):
        e = e.value
    return isinstance(e, Special) and e.kind == kind and e.axis == "x"


def _block_strided_loops(kernel: Kernel) -> dict[str, For]:
    """Loops ``for (v = thread.x; ...; v += block_dim.x)`` that spread independent
    iterations over the block (the cooperative-load pattern): the body reads no other
    thread-dependent value, assigns only what it declares, and a block barrier follows the
    loop before anything reads what it wrote. Their iterations may go to any thread."""
    from kir.analysis import declared_names, thread_dependent_vars, used_vars

    tainted = thread_dependent_vars(kernel)
    found = {}
    for node in kernel.body.walk():
        if not isinstance(node, Block):
            continue
        for i, loop in enumerate(node.stmts):
            after = node.stmts[i + 1] if i + 1 < len(node.stmts) else None
            if not (isinstance(loop, For) and isinstance(after, Barrier)
                    and after.scope == "block" and _is_special(loop.init, "thread")):
                continue
            update = loop.update
            if not (isinstance(update, Binary) and update.op == "+"
                    and isinstance(update.left, Var) and update.left.name == loop.var
                    and _is_special(update.right, "block_dim")):
                continue
            declared = declared_names(loop.body)
            uses = used_vars(loop.body) - declared - {loop.var}
            if uses & tainted or any(isinstance(n, Special) and n.kind == "thread"
                                     for n in loop.body.walk()):
                continue
            if any(isinstance(n, Assign) and n.name not in declared for n in loop.body.walk()):
                continue
            found[loop.label] = loop
    return found


def _guard_atomics(node: Node, lane0) -> Node | None:
    """A block whose atomics run on lane 0 only (the other lanes would repeat them)."""
    if not isinstance(node, Block) or not any(isinstance(s, Atomic) for s in node.stmts):
        return None
    stmts = tuple(If(lane0, Block((s,), s.loc), None, s.loc) if isinstance(s, Atomic) else s
                  for s in node.stmts)
    return dataclasses.replace(node, stmts=stmts)


RULES = [WidenThreads()]
