"""transpose-shared: store a 2-D shared tile transposed (column-major)."""

from __future__ import annotations

from typing import Mapping

from kir.rewrites.shared_tiles.tiles import add, relayout, scale, tile_at, tile_sites

from kir.ir import Kernel
from kir.rules import BaseRule, NotApplicable, RuleContext


class TransposeShared(BaseRule):
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
    site_key = "buffer"

    def sites(self, kernel: Kernel) -> list[str]:
        return tile_sites(kernel)

    def apply(self, kernel: Kernel, site: str, params: Mapping[str, object],
              ctx: RuleContext) -> Kernel | NotApplicable:
        form = tile_at(kernel, site)
        if isinstance(form, str):
            return NotApplicable(form)
        if form.rows == 1:
            return NotApplicable(f"{site} has a single row")
        return relayout(kernel, form, lambda row, col: add(scale(col, form.rows), row),
                        form.alloc.size)


RULES = [TransposeShared()]
