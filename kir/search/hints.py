"""Hints: known CUDA practice for a kernel's shape, as first genomes for the search.

Each detector looks at the IR for a shape a CUDA author would recognise (an attention loop
nest, a tiled matmul, a row reduction written with shuffles, a linear recurrence) and names a
*recipe*: the rules that practice applies, in order, with the loops or buffers they should act
on. :func:`hints` turns recipes into real steps by asking each rule for its sites in the kernel
the previous steps made and keeping only the steps that apply, so a recipe naming a rule that
is not in the registry (or that no longer matches) just gets shorter. The search validates
every hint like any other candidate; a hint is a suggestion, never trusted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from kir.analysis import used_vars
from kir.ir import Assign, Atomic, Binary, Call, For, Kernel, Node, Shuffle, Var, WarpReduce
from kir.rules import Rule, RuleContext, Step, apply_step
from kir.search.genome import safe_sites


@dataclass(frozen=True)
class Want:
    """One recipe step: ``rule`` at the first of ``sites`` that applies (any site the rule
    offers when ``any_site``), with ``params`` where the rule has them. ``repeat`` applies it
    again while it still finds a site (e.g. every warp reduction of a kernel)."""

    rule: str
    sites: tuple[str, ...] = ()
    params: Mapping[str, object] = field(default_factory=dict)
    any_site: bool = False
    repeat: int = 1
    # The recipe means nothing without this step (a rebuild the rest finishes): when it
    # finds no site, the whole recipe is dropped instead of kept shorter.
    required: bool = False


@dataclass(frozen=True)
class Hint:
    """A named genome from known practice (``steps`` replay with apply_trace)."""

    name: str
    steps: tuple[Step, ...]


# 128-bit loads in every lane-strided row loop (float4), as the row recipes end.
_WIDE_LOADS = Want("vectorize-strided", any_site=True, params={"width": 4}, repeat=4)
# A row each thread rereads in several passes read from global memory once, into
# registers (after the wide loads, so the registers hold float4s).
_ROW_IN_REGISTERS = Want("cache-in-registers", any_site=True)
# Rows whose lanes take a pack of elements at a time (``for k < 4: x[c + k]``): each pack
# read as one vector (a pack of two as a float2).
_PACK_LOADS = [Want("vectorize-loads", any_site=True, params={"width": w}, repeat=4)
               for w in (4, 2)]


# ------------------------------------------------------------------------------ detectors


def _loops(node: Node) -> list[For]:
    return [n for n in node.walk() if isinstance(n, For)]


def _calls(node: Node, *names: str) -> bool:
    return any(isinstance(n, Call) and n.fn in names for n in node.walk())


def _has_max(node: Node) -> bool:
    """A running max: the intrinsic, or ``if (s > m) m = s`` written out."""
    if _calls(node, "max"):
        return True
    return any(isinstance(n, Binary) and n.op in (">", "<") and n.left.type.name.startswith("f")
               for n in node.walk() if hasattr(getattr(n, "left", None), "type"))


def attention_nest(kernel: Kernel) -> tuple[str, str] | None:
    """(tile loop, row loop) when an outer loop over tiles has exp and max inside and an inner
    loop that itself holds loops (the rows of a query tile): FlashAttention's shape."""
    for outer in _loops(kernel.body):
        if not (_calls(outer.body, "exp", "exp2") and _has_max(outer.body)):
            continue
        for inner in _loops(outer.body):
            if _loops(inner.body) and _calls(inner.body, "exp", "exp2"):
                return outer.label, inner.label
    return None


def _is_mac(stmt: Node) -> bool:
    """``acc = acc + a * b`` (or ``b * a + acc``): a multiply-accumulate into a local."""
    if not isinstance(stmt, Assign) or not isinstance(stmt.value, Binary):
        return False
    value = stmt.value
    if value.op != "+":
        return False
    own = [side for side in (value.left, value.right)
           if isinstance(side, Var) and side.name == stmt.name]
    other = value.right if own and own[0] is value.left else value.left
    return bool(own) and isinstance(other, Binary) and other.op == "*"


def _inner_bounds(loop: For) -> list[str]:
    """The variables bounding the loops nested in ``loop`` (a tile loop's row and column
    counts: specializing the scalar parameters among them lets the compiler unroll)."""
    names: list[str] = []
    for inner in _loops(loop.body):
        for name in sorted(used_vars(inner.cond) - {inner.var}):
            if name not in names:
                names.append(name)
    return names


def matmul_nest(kernel: Kernel) -> tuple[str, str] | None:
    """(tile loop, inner product loop) for a loop over tiles staged in shared memory whose inner
    loop multiply-accumulates into a local: the tiled-matmul shape."""
    from kir.ir import Alloc

    if not any(isinstance(n, Alloc) and n.space == "shared" for n in kernel.body.walk()):
        return None
    for outer in _loops(kernel.body):
        for inner in _loops(outer.body):
            if any(_is_mac(s) for s in inner.body.stmts):
                return outer.label, inner.label
    return None


def direct_matmul(kernel: Kernel) -> str | None:
    """A loop multiply-accumulating loads of two different buffers, in a kernel that stages
    nothing in arrays: a dot product per thread, the one-element-per-thread GEMM's shape."""
    from kir.ir import Alloc, Load

    if any(isinstance(n, Alloc) for n in kernel.body.walk()):
        return None
    for loop in _loops(kernel.body):
        for s in loop.body.stmts:
            if _is_mac(s):
                term = s.value.right if isinstance(s.value.left, Var) else s.value.left
                loads = [n for n in (term.left, term.right) if isinstance(n, Load)]
                if len(loads) == 2 and loads[0].buffer != loads[1].buffer:
                    return loop.label
    return None


def shuffle_reduction(kernel: Kernel) -> bool:
    """Warp shuffles (a loop of them, or an unrolled butterfly), or a shared-memory tree whose
    stride halves each step: a hand-written reduction a warp reduction can replace."""
    if any(isinstance(n, Shuffle) for n in kernel.body.walk()):
        return True
    return any(isinstance(loop.update, Binary) and loop.update.op in (">>", "/")
               for loop in _loops(kernel.body))


def recurrence_loops(kernel: Kernel) -> list[str]:
    """Loops carrying ``h = a * h + b``: a linear recurrence a scan can parallelize."""
    found = []
    for loop in _loops(kernel.body):
        for stmt in loop.body.stmts:
            if isinstance(stmt, Assign) and isinstance(stmt.value, Binary) \
                    and stmt.value.op == "+":
                product = stmt.value.left
                if isinstance(product, Binary) and product.op == "*" and any(
                        isinstance(side, Var) and side.name == stmt.name
                        for side in (product.left, product.right)):
                    found.append(loop.label)
                    break
    return found


def thread_rows(kernel: Kernel) -> bool:
    """Each thread works through a row of its own: a one-dimensional block, no warp-level
    operation, and a loop whose bounds all threads share around memory accesses that depend on
    the thread (the thread-per-row softmax, norm or attention query row)."""
    from kir.analysis import thread_dependent_vars
    from kir.ir import Load, Special, Store

    if kernel.launch.block[1:] != (1, 1):
        return False
    if any(isinstance(n, (Shuffle, WarpReduce)) or isinstance(n, Special)
           and n.kind in ("lane", "warp") for n in kernel.body.walk()):
        return False
    tainted = thread_dependent_vars(kernel)
    for loop in _loops(kernel.body):
        header = used_vars(loop.init) | used_vars(loop.cond) | used_vars(loop.update)
        if header & tainted - {loop.var}:
            continue
        if any(isinstance(n, (Load, Store)) and used_vars(n.index) & tainted
               for n in loop.body.walk()):
            return True
    return False


def shared_buffers(kernel: Kernel) -> tuple[str, ...]:
    from kir.ir import Alloc

    return tuple(n.name for n in kernel.body.walk() if isinstance(n, Alloc) and n.space == "shared")


# -------------------------------------------------------------------------------- recipes


def _finishing(kernel: Kernel) -> list[Want]:
    """What every kernel may take: fast math, and exp through exp2 where there are exps."""
    wants = [Want("fast-math", ("all",), any_site=True)]
    if _calls(kernel.body, "exp"):
        wants += [Want("exp-to-exp2", ("all",), any_site=True),
                  Want("exp-to-exp2-fast", ("all",), any_site=True)]
    return wants


def _warp_rows() -> list[Want]:
    """Give each thread's work to a warp, then spread every row loop over its lanes."""
    return [Want("widen-threads", ("x",)),
            Want("distribute-loop", any_site=True, repeat=16),
            Want("split-reduction", any_site=True, repeat=8)]


# Block tiles and pipeline depths the warp-tiled recipes start from, fastest first on the
# H200 at 2048^3 on TF32 (BENCHMARKS.md "Round 17": two stages of 128x128x16 0.25 ms against
# 0.36 ms for one). One stage leads on Metal, which copies synchronously: a pipeline there
# only takes threadgroup memory (kir.rewrites.matmul.warp_tiles.body_text).
WARP_TILES = (("128x128x16/2x2", 2), ("128x128x16/2x2", 3), ("128x128x32/2x4", 2),
              ("64x128x16/2x2", 1), ("64x64x16/2x2", 1))


def _warp_tiled(kernel: Kernel) -> list[tuple[str, list[Want]]]:
    """The warp-tiled rebuild (each warp a patch of 8x8 fragments, MLX steel's and CUTLASS's
    structure) at the block tiles and pipeline depths of ``WARP_TILES``, in f32 and on TF32
    tensor cores where the target has them, at TF32's precision and split in three at f32's
    (the spec's tolerance takes one or the other); the search mutates both genes from there.
    Where the target cannot hold a shape (Metal's 32 KB) the rule refuses it and the recipe
    drops out."""
    out = []
    for config, stages in WARP_TILES:
        warp_tiles = Want("warp-tile-matmul", any_site=True,
                          params={"config": config, "stages": stages}, required=True)
        name = f"warp-tiled-matmul-{config}" + (f"-{stages}-stages" if stages > 1 else "")
        out.append((name, [warp_tiles, *_finishing(kernel)]))
        for rule in ("tf32-matrix", "tf32x3-matrix"):
            out.append((f"{name}-{rule.split('-')[0]}", [
                warp_tiles, Want(rule, ("all",)), *_finishing(kernel)]))
    return out


def _matrix_attention(kernel: Kernel) -> list[tuple[str, list[Want]]]:
    """Attention rebuilt as FlashAttention-2 on matrix fragments (``mma-attention``, which
    runs the kernel to recognise attention, whatever its loops look like) at the block shapes
    fastest on the H200, each on TF32 tensor cores, split in three at f32's precision (the
    spec's tolerance takes one or the other) and in f32 (Metal; CUDA where neither passes).
    At N=1024, f32, timed alone: 0.18-0.19 ms on TF32, 0.31 ms split in three, 0.45 ms in
    f32 against 0.47 ms for the best CUDA-core kernel (BENCHMARKS.md "Round 16")."""
    from kir.rewrites.attention.recognize import looks_like_attention

    if not looks_like_attention(kernel):
        return []
    rebuilt = {config: Want("mma-attention", any_site=True, params={"config": config},
                            required=True) for config in ("64x32/4", "32x32/2", "64x16/4")}
    # (Two stages, the K/V tiles pipelined, are the search's to find: at 64x16/4 on 3xTF32
    # they timed 0.334 ms against 0.323 for one on the H200, BENCHMARKS.md "Round 17".)
    out = [(f"mma-attention-{config}-{rule.split('-')[0]}", [
        rebuild, Want(rule, ("all",), required=True), *_finishing(kernel)])
        for config, rebuild in rebuilt.items() for rule in ("tf32-matrix", "tf32x3-matrix")]
    out += [(f"mma-attention-{config}", [rebuilt[config], *_finishing(kernel)])
            for config in ("32x32/2", "64x16/4", "64x32/4")]
    return out


def recipes(kernel: Kernel) -> list[tuple[str, list[Want]]]:
    """Named recipes of known CUDA practice that fit ``kernel``'s shape (most specific
    first), ending with the finishing touches alone."""
    out: list[tuple[str, list[Want]]] = _matrix_attention(kernel)
    nest = attention_nest(kernel)
    if nest:
        tiles, rows = nest
        tile_loop = next(loop for loop in _loops(kernel.body) if loop.label == tiles)
        # The first loop inside the tile loop stages the K/V tile: all threads share it.
        staging = tuple(loop.label for loop in _loops(tile_loop.body)[:1])
        fa2 = [Want("interchange-loops", (tiles,)),
               Want("parallelize-loop", (rows, tiles)),
               Want("promote-to-registers", any_site=True, repeat=4),  # Q, l, m, O
               Want("cooperative-load", staging),
               Want("hoist-invariant", any_site=True),
               *_finishing(kernel)]
        # The same with the shared tiles split apart first, so each thread's query row and
        # score row (read with a stride of a whole row: every lane on one bank) can move to
        # registers too, as FlashAttention-2 keeps them.
        registers = [Want("split-shared", any_site=True), *fa2[:2],
                     Want("promote-to-registers", any_site=True, repeat=8), *fa2[3:]]
        # FlashAttention-2's warps: each query row owned by a warp whose lanes split the
        # head dimension (dot products combined by shuffles, the output row in registers
        # spread over the lanes) instead of one thread per row.
        warps = [*registers[:-len(_finishing(kernel))], *_warp_rows(), *_finishing(kernel)]
        # The same with the sizes the nest's inner loops run to made constants (as
        # FlashAttention's templates are), so the compiler unrolls those loops and keeps the
        # score row in registers: on the H200 at 16-row tiles 1.62 -> 1.09 ms (BENCHMARKS.md
        # "Round 7"). With 32-row tiles (1024 threads) a score row in registers needs more
        # registers than a block that size may have, so a variant keeps it in shared memory
        # (one promotion fewer: the query row, l, m, O and the query tile's row, not S).
        constants = [Want("specialize-param", (name,)) for name in _inner_bounds(tile_loop)]
        if constants:
            # A key a lane: with the query tile's row and the score row left in shared
            # memory, distribute-loop spreads the loops over the key tile (scores, their
            # max, the exponentials and their sum) instead of each dot product: a lane
            # computes a whole score (no warp reduction a key) and the warp combines the
            # row's max and sum once a tile. Padding the K tile's rows keeps the lanes,
            # which read one K row each, off one bank. On the H200 at N=1024: 0.778 ms
            # against 1.13 for the shared-scores variant (BENCHMARKS.md "Round 8"). These
            # go first: at N=4096 a 48-s search judged only six candidates.
            per_key = [dataclasses.replace(w, repeat=4)
                       if w.rule == "promote-to-registers" else w for w in warps]
            # The tiles read as float4: rows padded by 4 (a lane's K row stays
            # conflict-free and 16-byte aligned), then each dot product reads 4 elements of
            # the query row and of its key row a load, and the P.V loop 4 probabilities: a
            # quarter of the shared-memory load instructions, and 32 registers a thread
            # instead of 56 (two blocks of 1024 threads an SM). On the H200, N=1024: 0.650
            # against 0.897 ms with pad 1 (0.698 / 0.744 on the second FlashAttention
            # kernel); N=4096: 7.69 against 11.1 ms (BENCHMARKS.md "Round 9").
            finishing = _finishing(kernel)
            lane_per_key = [*constants, *per_key[:-len(finishing)]]
            float4 = [*lane_per_key,
                      Want("pad-shared", any_site=True, params={"pad": 4}, repeat=4),
                      Want("vectorize-loads", any_site=True, params={"width": 4}, repeat=4),
                      *finishing]
            out.append(("flash-attention-2-constant-lane-per-key-float4", float4))
            # A warp a few query rows (merge-threads along x, copies whole warps apart): each
            # K and V element a lane loads from shared memory serves every row of its warp,
            # FlashAttention-2's register tiling of the score and output rows. On the H200,
            # N=1024: 0.443 against 0.597 ms (4 rows, the second FlashAttention kernel), 0.617
            # against 0.720 ms (2 rows, the example); at N=4096 the example was slower merged
            # (8.9 / 11.2 against 7.7 ms: 127-136 registers a thread), so the search decides
            # (BENCHMARKS.md "Round 14").
            for rows in (4, 2):
                out.append((f"flash-attention-2-constant-lane-per-key-float4-rows-{rows}", [
                    *float4, Want("merge-threads", ("x",), {"factor": rows})]))
            out.append(("flash-attention-2-constant-lane-per-key", [
                *lane_per_key,
                Want("pad-shared", any_site=True, params={"pad": 1}, repeat=4),
                *finishing]))
        out.append(("flash-attention-2", fa2))
        out.append(("flash-attention-2-registers", registers))
        out.append(("flash-attention-2-warps", warps))
        if constants:
            out.append(("flash-attention-2-warps-constant", [*constants, *warps]))
            shared_scores = [dataclasses.replace(w, repeat=5)
                             if w.rule == "promote-to-registers" else w for w in warps]
            out.append(("flash-attention-2-warps-constant-shared-scores",
                        [*constants, *shared_scores]))
    mm = None if nest else matmul_nest(kernel)  # attention holds matmuls; FA2 covers them
    if not nest and not mm and direct_matmul(kernel):
        out += _warp_tiled(kernel)  # one element of C per thread: only the rebuild fits
    if mm:
        tiles, inner = mm
        # Matrix units for the inner product (simdgroup_matrix / mma); what else applies to
        # a tile loop must leave its fragments alone, so it is a recipe of its own.
        out += _warp_tiled(kernel)
        # At the tile as written and re-tiled to 32 (four times the warps per block), each
        # also on TF32 tensor cores; where the target refuses tf32-matrix (Metal) a TF32
        # recipe equals the one before it and is dropped as a duplicate.
        retiled = [Want("retile", any_site=True, params={"value": 32})]
        for name, first in (("mma-matmul", []), ("retiled-mma-matmul", retiled)):
            mma = [*first, Want("mma-tile", any_site=True)]
            out.append((name, [*mma, *_finishing(kernel)]))
            out.append((f"{name}-tf32", [*mma, Want("tf32-matrix", ("all",)),
                                         *_finishing(kernel)]))
        out.append(("tiled-matmul", [
            Want("cooperative-load", (tiles,)),
            Want("vectorize-access", (tiles,), {"width": 4}),
            Want("double-buffer", (tiles,)),
            *[Want("pad-shared", (name,), {"pad": 1}) for name in shared_buffers(kernel)],
            Want("unroll-loop", (inner,), {"factor": 4}),
            Want("coarsen-threads", ("x",)),
            *_finishing(kernel)]))
        # Register blocking (Volkov 2010; every fast SGEMM): each thread computes a 4 x 4
        # (or 4 x 1) patch of C, reusing each shared-memory operand it loads 4 times.
        out.append(("register-blocked-matmul", [
            Want("merge-threads", ("y",), {"factor": 4}),
            Want("merge-threads", ("x",), {"factor": 4}), *_finishing(kernel)]))
        out.append(("register-blocked-matmul-rows", [
            Want("merge-threads", ("y",), {"factor": 4}), *_finishing(kernel)]))
        # A larger block tile first (the search re-tiles the template like a Triton config),
        # then register blocking on it.
        for factor in (4, 8):
            out.append((f"retiled-register-blocked-matmul-{factor}", [
                Want("retile", any_site=True, params={"value": 32}),
                Want("merge-threads", ("y",), {"factor": factor}), *_finishing(kernel)]))
    # Decode attention (a block walks every key of its query carrying an online softmax):
    # the keys split across blocks (flash-decoding), or across copies of the block. Each
    # fires only where the split rule proves the loop. On the H200 at 32 heads x 4096 keys,
    # timed in turns: 0.135 ms with 128 splits across blocks, 0.18 with 32 either way
    # (BENCHMARKS.md "Round 20").
    out.append(("flash-decoding-blocks", [
        Want("split-keys-grid", any_site=True, params={"ways": 128}, required=True),
        *_finishing(kernel)]))
    out.append(("flash-decoding-block", [
        Want("split-keys", any_site=True, params={"ways": 32}, required=True),
        *_finishing(kernel)]))
    hand_written = shuffle_reduction(kernel)
    if hand_written:
        out.append(("warp-reduce", [Want("warp-reduce", any_site=True, repeat=4),
                                    *_finishing(kernel)]))
    if hand_written or any(isinstance(n, WarpReduce) for n in kernel.body.walk()):
        # Row kernels (softmax, norms), their reductions hand-written or already warp-wide
        # (cooperative groups' cg::reduce): 128-bit loads in every lane-strided loop, once
        # the loop-invariant loads (a block's row scale read from shared memory) are out.
        out.append(("vectorized-rows", [
            Want("hoist-invariant", any_site=True, repeat=4),
            _WIDE_LOADS,
            *_finishing(kernel)]))
        # The same with the row kept in registers between its passes (Apex's and OneFlow's
        # register-cached rows): on the H200 at 8192 x 8192 hand-written probes took
        # 0.186 ms (softmax) and 0.194 ms (layer norm) a call against 0.201 for the row
        # staged in shared memory and 0.25 for three passes over global memory
        # (BENCHMARKS.md "Round 24").
        out.append(("row-in-registers", [
            Want("warp-reduce", any_site=True, repeat=4),
            Want("hoist-invariant", any_site=True, repeat=4),
            _WIDE_LOADS, _ROW_IN_REGISTERS, *_finishing(kernel)]))
        # One pass fewer over the row: the running max and sum in one loop (Milakov &
        # Gimelshein 2018), then vectorized loads where they still apply.
        out.append(("online-vectorized-rows", [
            Want("online-softmax", any_site=True),
            _WIDE_LOADS,
            Want("warp-reduce", any_site=True, repeat=4), *_finishing(kernel)]))
        # The row read from global memory once: a block reading its row in several passes
        # stages it in shared memory first (where the target's static shared memory holds
        # it), and every pass reads it there. Passes over shared memory are cheap, so the
        # plain passes (one exp an element fewer than the online pass, and no serial
        # rescaling chain) are tried beside the online one.
        staged = [Want("stage-in-shared", any_site=True, repeat=2),
                  _WIDE_LOADS,
                  Want("warp-reduce", any_site=True, repeat=4), *_finishing(kernel)]
        out.append(("row-in-shared", staged))
        out.append(("online-row-in-shared", [Want("online-softmax", any_site=True), *staged]))
        # A row longer than one warp streams well: a block a row (widen-warps), its warp
        # reductions made block reductions, then 128-bit loads in every row loop. On the
        # H200 at 8192 x 8192, timed alone in two runs, a layer norm a warp a row with
        # float2 stores took 0.367 / 0.390 ms, a block a row with float4 loads 0.277 / 0.241
        # at 256 threads, 0.379 / 0.228 at 512, 0.626 at 1024 (BENCHMARKS.md "Round 8").
        for threads in (256, 512):
            block_rows = [Want("warp-reduce", any_site=True, repeat=4),
                          Want("widen-warps", ("x",), {"threads": threads}),
                          Want("hoist-invariant", any_site=True, repeat=4),
                          _WIDE_LOADS,
                          *_PACK_LOADS]
            # (Where the row does not fit the registers the two are one genome, and the
            # first name is kept.)
            out.append((f"block-rows-{threads}", [*block_rows, *_finishing(kernel)]))
            out.append((f"block-rows-{threads}-in-registers",
                        [*block_rows, _ROW_IN_REGISTERS, *_finishing(kernel)]))
    if any(isinstance(n, Atomic) and n.op == "add" and not used_vars(n.index)
           for n in kernel.body.walk()):
        # Block partials added atomically to one fixed address (a reduction to a scalar):
        # fewer, fatter blocks, each adding its running sum once (three rounds: 64 former
        # blocks per block).
        rounds = [Want("coarsen-threads", ("x",), {"factor": 4}),
                  Want("privatize-atomic", any_site=True)]
        out.append(("aggregated-atomics", rounds * 3 + _finishing(kernel)))
    if any(isinstance(n, Atomic) and n.op == "add" for n in kernel.body.walk()):
        # A reduction finishing in atomic adds (to one address or one per row): a bounded
        # grid whose threads sum many former blocks' values in registers before the block
        # combines once (Harris's "algorithm cascading"). Unrolling the new loop by 4 or 8
        # was slower on the H200 (BENCHMARKS.md), so the hint leaves that to the search.
        # With the one-float output out of MLX's managed small pool (kir.backends.allocation)
        # an atomic add costs little, and more blocks fill the GPU: on the H200 at 2^24,
        # 1024 blocks 0.101 ms, 256 0.127, 64 0.177 (BENCHMARKS.md "Round 6"); 32 stays for
        # targets where atomics on one address are dear.
        for blocks in (1024, 256, 32):
            out.append((f"grid-stride-reduction-{blocks}", [
                Want("grid-stride-reduce", ("x",), {"blocks": blocks}), *_finishing(kernel)]))
    if not nest and thread_rows(kernel):
        # A thread per row (LLM training code's norms and softmaxes): a warp per row
        # instead, its lanes splitting the row's loops (Apex/PyTorch, MLX row kernels).
        out.append(("warp-rows", [Want("resize-block", ("x",), {"threads": 32}),
                                  *_warp_rows(), *_finishing(kernel)]))
        out.append(("warp-rows-vectorized", [
            Want("resize-block", ("x",), {"threads": 32}), *_warp_rows(),
            Want("online-softmax", any_site=True),
            _WIDE_LOADS,
            *_finishing(kernel)]))
        # Long rows: a block a row once the warp owns it (see block-rows above).
        out.append(("thread-rows-to-block-rows", [
            Want("resize-block", ("x",), {"threads": 32}), *_warp_rows(),
            Want("widen-warps", ("x",), {"threads": 256}),
            _WIDE_LOADS,
            *_finishing(kernel)]))
    scans = recurrence_loops(kernel)
    if scans:
        out.append(("parallel-scan", [Want("parallel-scan", tuple(scans)), *_finishing(kernel)]))
    out.append(("fast-math", _finishing(kernel)))
    return out


# ---------------------------------------------------------------------------------- build


def _params(rule: Rule, wanted: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    """The wanted parameter values where the rule offers them, its defaults elsewhere."""
    out = []
    for space in rule.params:
        value = wanted.get(space.name)
        out.append((space.name, value if value in space.choices else space.choices[0]))
    return tuple(out)


def build(kernel: Kernel, wants: Sequence[Want], registry: Mapping[str, Rule],
          ctx: RuleContext) -> tuple[Step, ...]:
    """Turn a recipe into the steps that really apply, in order (missing rules, absent sites
    and steps a rule declines are dropped; a rule that raises is dropped too). A
    ``required`` step that does not apply leaves no steps at all."""
    steps: list[Step] = []
    for want in wants:
        rule = registry.get(want.rule)
        if rule is None:
            if want.required:
                return ()
            continue
        before = len(steps)
        for _ in range(max(1, want.repeat)):
            offered = safe_sites(rule, kernel, ctx, registry)
            order = [s for s in want.sites if s in offered]
            if want.any_site:
                order += [s for s in offered if s not in order]
            for site in order:
                step = Step(rule.name, site, _params(rule, want.params), rule.site_key)
                try:
                    result = apply_step(kernel, step, registry, ctx)
                except Exception:  # noqa: BLE001 - a buggy rule must not stop the hints
                    continue
                if isinstance(result, Kernel) and result != kernel:
                    steps.append(step)
                    kernel = result
                    break
            else:
                break  # no site applied: repeating will not help
        if want.required and len(steps) == before:
            return ()
    return tuple(steps)


def hints(kernel: Kernel, registry: Mapping[str, Rule], ctx: RuleContext | None = None,
          extra: Sequence[tuple[str, Sequence[Want]]] = ()) -> list[Hint]:
    """Hints for ``kernel``: each fitting recipe built against the registry, empty and
    duplicate genomes dropped, in recipe order."""
    ctx = ctx or RuleContext()
    out: list[Hint] = []
    seen: set[tuple[Step, ...]] = set()
    for name, wants in [*recipes(kernel), *extra]:
        steps = build(kernel, wants, registry, ctx)
        if steps and steps not in seen:
            seen.add(steps)
            out.append(Hint(name, steps))
    return out


HintFn = Callable[[Kernel], list[tuple[str, list[Want]]]]
