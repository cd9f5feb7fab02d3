"""transpose-shared: store a 2-D shared tile transposed (column-major)."""

from __future__ import annotations

from kir.rewrites.shared_tiles.tiles import TileForm, TileRule, add, relayout, scale

from kir.ir import Kernel
from kir.rules import Match, NoParams, RuleContext


class TransposeShared(TileRule):
    """Store a shared tile ``t[R][C]`` transposed: ``t[c * R + r]`` instead of ``t[r * C + c]``.

    CUDA practice: lay a shared tile out so the inner loop walks consecutive addresses (and,
    across a warp, distinct banks). Attention kernels store K transposed in shared memory for
    the S = Q Kᵀ product (FlashAttention / cuDNN fused attention); the matrix-transpose
    example of the CUDA C++ Best Practices Guide ("Shared Memory in Matrix Multiplication",
    coalesced transpose) reads a tile along the other axis than it was written.

    Legality checked: the tile is a static shared array of R x C elements whose every access
    is ``(row) * C + c`` with ``c`` provably in ``[0, C)``; the mapping (r, c) -> c * R + r is
    then a bijection of the array onto itself. Whether it is faster is the search's question.
    """

    name = "transpose-shared"
    once_per_site = True  # a second transposition of the same tile undoes the first

    def apply(self, kernel: Kernel, match: Match, params: NoParams, ctx: RuleContext) -> Kernel:
        form: TileForm = match.plan  # at least two rows: tile_form finds no one-row tile
        return relayout(kernel, form, lambda row, col: add(scale(col, form.rows), row),
                        form.alloc.size)


RULES = [TransposeShared()]
