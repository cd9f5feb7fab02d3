"""resize-block: change the threads per block of a blockDim-generic kernel."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir import analysis
from kir.analysis import strip_casts
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Load,
    Node,
    Shuffle,
    Special,
    Store,
    Var,
    WarpReduce,
)
from kir.rules import BaseRule, Match, NotApplicable, RuleContext, choice

_THREADISH = ("thread", "lane", "warp")


def _deps(kernel: Kernel) -> dict[str, set[str]]:
    """For each local, which of "block" (block index), "dim" (block_dim.x), "thread"
    (thread index) its value derives from (a fixpoint over definitions)."""
    defs: dict[str, list[Expr]] = {}
    for n in kernel.body.walk():
        if isinstance(n, Declare) and n.init is not None:
            defs.setdefault(n.name, []).append(n.init)
        elif isinstance(n, Assign):
            defs.setdefault(n.name, []).append(n.value)
        elif isinstance(n, For):
            defs.setdefault(n.var, []).extend([n.init, n.update])
    out: dict[str, set[str]] = {k: set() for k in defs}
    changed = True
    while changed:
        changed = False
        for name, exprs in defs.items():
            kinds = set().union(*(_kinds(e, out) for e in exprs))
            if not kinds <= out[name]:
                out[name] |= kinds
                changed = True
    return out


def _kinds(e: Node, env: dict[str, set[str]]) -> set[str]:
    kinds: set[str] = set()
    for n in e.walk():
        if isinstance(n, Special):
            if n.kind == "block":
                kinds.add("block")
            elif n.kind == "block_dim":
                kinds.add("dim")
            elif n.kind in _THREADISH:
                kinds.add("thread")
        elif isinstance(n, Var):
            kinds |= env.get(n.name, set())
    return kinds


def _strided_vars(kernel: Kernel, env: dict[str, set[str]]) -> set[str]:
    """Loop variables of block-stride loops: start from the thread index, step by a
    block_dim-derived amount (``for (i = tid; i < n; i += blockDim.x)``)."""
    out = set()
    for lp in analysis.loops(kernel):
        u = strip_casts(lp.update)
        if isinstance(u, Binary) and u.op == "+" and isinstance(strip_casts(u.left), Var) \
                and strip_casts(u.left).name == lp.var and "dim" in _kinds(u.right, env) \
                and "block" not in _kinds(lp.init, env):
            out.add(lp.var)
    return out


class ResizeBlock(BaseRule):
    """Change the threads per block (x) of a kernel written for any block size.

    CUDA practice: occupancy tuning (CUDA C++ Best Practices Guide, "Thread and Block
    Heuristics"): the best block size depends on the GPU's registers, shared memory and
    schedulers, so kernels written with block-stride loops over ``blockDim.x`` are launched
    with a tuned block size; on Apple GPUs the threadgroup size trades the same way.

    Legality checked: a 1-D block; no integer constant equal to the old block size or its
    warp count (a hard-coded block size); no block index multiplied with a block-size or
    thread-derived value (the kernel maps the grid by thread, so the grid would have to
    change); lanes combined by warp shuffles are also combined across warps (a barrier or
    an atomic); thread-derived values reach global memory only through block-stride loop
    variables; shared arrays indexed by thread-derived values hold at least the new thread
    count and none is dynamic. Not checked: reductions written for one block size in ways
    these patterns miss (the search validates every candidate).
    """

    name = "resize-block"
    site_key = "site"

    @dataclass(frozen=True)
    class Params:
        threads: int = choice(64, 128, 256, 512, 1024)

    def candidates(self, kernel: Kernel) -> list[str]:
        return ["kernel"] if kernel.launch.block[1:] == (1, 1) else []

    def plan(self, kernel: Kernel, site: str) -> list[str | _SharedLimit]:
        return _limits(kernel)

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        threads = params.threads
        old = kernel.launch.block[0]
        if threads == old:
            return NotApplicable(f"the block already has {old} threads")
        for limit in match.plan:
            if isinstance(limit, str):
                return NotApplicable(limit)
            if limit.size < threads:
                return NotApplicable(f"shared {limit.buffer!r} ({limit.size}) is indexed by "
                                     f"thread and smaller than {threads}")
        launch = dataclasses.replace(kernel.launch, block=(threads, 1, 1))
        return dataclasses.replace(kernel, launch=launch)


@dataclass(frozen=True)
class _SharedLimit:
    """A shared array indexed by thread: the block may have at most ``size`` threads."""

    buffer: str
    size: int


def _limits(kernel: Kernel) -> list[str | _SharedLimit]:
    """What bounds the new block size, in program order: the shared arrays indexed by thread,
    ending with why no size fits (a reason) when some shape rules every size out. The reason
    is kept in the plan rather than returned by the analysis so that the rule lists the same
    sites as before protocol v2 (issue 11 tightens that separately)."""
    old = kernel.launch.block[0]
    nodes = list(kernel.body.walk())
    if any(isinstance(n, (Shuffle, WarpReduce)) for n in nodes) \
            and not any(isinstance(n, (Barrier, Atomic)) for n in nodes):
        # Lanes combined by shuffles, warps by nothing: the warps a bigger block adds would
        # never be combined (a one-warp argmax whose lane 0 writes the row's answer).
        return ["the kernel combines lanes by warp shuffles and its warps by neither a "
                "barrier nor an atomic: it is written for its block's warps alone"]
    suspicious = {old, 2 * old} | ({old // 32} if old >= 64 else set())
    for n in nodes:
        if isinstance(n, Const) and isinstance(n.value, int) \
                and not isinstance(n.value, bool) and n.value in suspicious:
            return [f"the constant {n.value} hard-codes the block size {old}"]
    env = _deps(kernel)
    for n in kernel.body.walk():
        if isinstance(n, Binary) and n.op == "*" and getattr(n.type, "is_int", False):
            a, b = _kinds(n.left, env), _kinds(n.right, env)
            if ("block" in a and b & {"dim", "thread"}) or ("block" in b and a & {"dim",
                                                                                 "thread"}):
                return [("the kernel indexes the grid by thread; the grid would change with "
                         "the block size")]
    strided = _strided_vars(kernel, env)
    shared = {n.name: n for n in kernel.body.walk() if isinstance(n, Alloc)
              and n.space == "shared"}
    limits: list[str | _SharedLimit] = []
    for n in kernel.body.walk():
        if not isinstance(n, (Load, Store, Atomic)):
            continue
        kinds = _kinds_excluding(n.index, env, strided)
        if n.buffer in shared:
            alloc = shared[n.buffer]
            if alloc.dynamic:
                return limits + [f"dynamic shared {n.buffer!r} is sized by the launch"]
            if "thread" in kinds:
                limits.append(_SharedLimit(n.buffer, alloc.size))
        elif kernel.param(n.buffer) is not None and "thread" in kinds:
            return limits + [f"{n.buffer!r} is indexed by thread outside a block-stride loop"]
    return limits


def _kinds_excluding(e: Expr, env: dict[str, set[str]], strided: set[str]) -> set[str]:
    """Like _kinds, but block-stride loop variables count as thread-free."""
    masked = {k: (set() if k in strided else v) for k, v in env.items()}
    return _kinds(e, masked)


RULES = [ResizeBlock()]
