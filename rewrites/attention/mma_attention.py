"""mma-attention: rebuild an attention kernel as FlashAttention-2 on 8x8 matrix fragments."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.errors import KirError
from kir.ir import Block, Kernel, Launch, Stmt, Var, transform
from kir.ir.verify import verify
from kir.rules import BaseRule, Match, NotApplicable, RuleContext, choice
from kir.rules.templates import kernel_from_template, needs_dynamic_shared
from kir.rewrites.attention.recognize import Recognized, looks_like_attention, recognize
from kir.rewrites.attention.template import PREFIX, body_text, parse_config

# Query rows x keys a step / warps, the search's gene. MLX's steel attention takes 32 query
# rows a threadgroup (4 SIMD-groups of 8) and 16-32 keys a step on Apple GPUs; on the H200
# (BENCHMARKS.md round 16) 64x32/4 and 32x32/2 were fastest at N = 1024 and 4096.
CONFIGS = ("64x32/4", "32x32/2", "64x16/4", "32x32/4", "64x32/8", "128x16/8")
SITE = "kernel"


class MmaAttention(BaseRule):
    """Rebuild an attention kernel as FlashAttention-2 on 8x8 matrix fragments.

    Encodes FlashAttention-2's forward pass (Dao 2023: the query rows of a block split over
    its warps, the keys walked in tiles with an online softmax, O rescaled once a tile) on
    the matrix units: Apple's SIMD-group matrices (MSL §6.7; MLX's ``steel_attention``) and,
    through ``tf32-matrix`` / ``tf32x3-matrix``, NVIDIA's ``mma.sync`` tensor cores, as
    FlashAttention-2's CUDA kernels do. S = Q·Kᵀ and P·V become fragment products, so each K
    and V element a warp loads from shared memory serves 8 or 16 query rows, and the
    products run on the matrix hardware instead of one multiply-add per lane
    (:mod:`kir.rewrites.attention.template` has the kernel).

    Site: the kernel (``kernel``), when it computes attention: roles from the spec and the
    function checked by running it (:mod:`kir.rewrites.attention.recognize`: evidence by
    evaluation, as validation is, not a proof). The rebuilt kernel keeps every parameter,
    writes O (and the rows' maximum and sum where the original does), launches
    ``(ceil(n / rows), heads, batches)`` blocks and bakes in the head dimension, so it is
    right at the compiled head dimension only. Q, K, V and O may hold the sequence before or
    after the heads (``[B, H, N, d]``, ``[B, N, H, d]``, ``[BH, N, d]``), K and V may have
    fewer heads than Q (grouped-query attention, each serving consecutive query heads), the
    buffers may be f32, f16 or bf16 (computed in f32); a causal mask (key j only for query
    i >= j) is kept, and the key tiles past a block's last query skipped.
    ``config`` (rows x keys / warps) is the search's gene, and ``stages``: 2 walks the keys
    as a software pipeline, the next K/V tile copied asynchronously (CUDA's ``cp.async``)
    while the current one is multiplied (:func:`kir.rewrites.attention.template.body_text`).
    Refused when the roles or the function do not fit, or the result exceeds the target's
    limits (shared memory, threads).
    """

    name = "mma-attention"
    site_key = "at"
    once_per_site = True

    @dataclass(frozen=True)
    class Params:
        config: str = choice(*CONFIGS)
        stages: int = choice(1, 2)

    def candidates(self, kernel: Kernel) -> list[str]:
        return [SITE] if looks_like_attention(kernel) else []

    def plan_in(self, kernel: Kernel, site: str, ctx: RuleContext | None) -> Recognized:
        if any(v.startswith(PREFIX) for v in _names(kernel)):
            return Recognized(refusal=f"the kernel already declares names starting {PREFIX!r}")
        # In a search every kernel derives from the unrewritten one by rules whose results
        # are validated to compute the same: recognising that one (once, remembered) serves
        # them all instead of running each intermediate kernel on the interpreter.
        base = getattr(ctx, "base", None)
        same_signature = base is not None and base.params == kernel.params
        return recognize(base if same_signature else kernel, ctx)

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        found: Recognized = match.plan
        assert found.attention is not None
        cfg = dataclasses.replace(parse_config(params.config), stages=params.stages)
        head_dim = found.attention.head_dim
        problem = cfg.problem(head_dim)
        if problem:
            return NotApplicable(problem)
        # Two stages over the target's static shared memory put the K/V tiles in dynamic
        # shared memory where the target has more of that (CUDA).
        tiles = cfg.tile_floats(head_dim) * 4
        dynamic = cfg.stages > 1 and needs_dynamic_shared(ctx.target,
                                                          cfg.shared_floats(head_dim) * 4)
        seq = found.seq if found.seq.isidentifier() else f"({found.seq})"
        launch = Launch((f"ceil({seq} / {cfg.rows})", *found.heads), (cfg.threads, 1, 1),
                        tiles if dynamic else 0, specialized=kernel.launch.specialized)
        try:
            built = kernel_from_template(kernel, launch, body_text(cfg, found.attention, dynamic),
                                         f"<{self.name}>")
            body = _located(built.body, kernel)
            launch = dataclasses.replace(launch, ignores=_ignored(kernel, body, found))
            result = dataclasses.replace(kernel, body=body, launch=launch)
            verify(result, ctx.target)
        except KirError as err:
            return NotApplicable(f"the rebuilt attention kernel does not verify: {err.message}")
        return result


def _ignored(kernel: Kernel, body: Block, found: Recognized) -> tuple[str, ...]:
    """The scalar parameters the original reads and the rebuilt kernel does not, none of
    whose values it depends on: what the recognition found attention to depend on is Q, K,
    V, the scale and the sequence length, all read; a FlashAttention kernel's tile counts
    only say how it walks them. The head dimension is baked in: the arguments equal to it
    count as ignored only where it is fixed wherever the kernel is used."""
    scalars = {p.name for p in kernel.params if not p.is_buffer}

    def reads(block: Block) -> set[str]:
        return {n.name for n in block.walk() if isinstance(n, Var) and n.name in scalars}

    dropped = reads(kernel.body) - reads(body)
    if not found.head_fixed:
        return tuple(kernel.launch.ignores)  # not reading the head dimension bakes it in
    return tuple(sorted(set(kernel.launch.ignores) | dropped))


def _located(body: Block, kernel: Kernel) -> Block:
    """``body`` with the template's statements pointing at the original kernel's first
    statement, so diagnostics and reports name the user's source."""
    loc = next((s.loc for s in kernel.body.walk() if isinstance(s, Stmt) and s.loc), None)

    def locate(n):
        if loc is not None and isinstance(n, Stmt) and getattr(n, "loc", 0) is None:
            return dataclasses.replace(n, loc=loc)
        return None
    return transform(body, locate)


def _names(kernel: Kernel) -> set[str]:
    """Every name the kernel declares or reads."""
    return {getattr(n, "name", "") for n in kernel.body.walk()} | {
        getattr(n, "var", "") for n in kernel.body.walk()}


RULES = [MmaAttention()]
