"""pad-shared: give a 2-D shared tile a padded row pitch to avoid bank conflicts."""

from __future__ import annotations

from typing import Mapping

from kir.rewrites.shared_tiles.tiles import add, relayout, scale, tile_at, tile_sites

from kir.ir import Kernel
from kir.rules import BaseRule, NotApplicable, ParamSpace, RuleContext


class PadShared(BaseRule):
    """Pad the rows of a 2-D shared tile ``t[R][C]`` to pitch ``C + pad`` (bank conflicts).

    CUDA practice: shared memory is split into 32 banks of 4-byte words; threads of a warp
    reading a column of a tile whose row pitch is a multiple of 32 words all hit one bank and
    are serialized. One word of padding per row spreads the column over all banks (CUDA C++
    Best Practices Guide, "Shared Memory and Memory Banks"; the padded transpose example,
    ``__shared__ float tile[TILE_DIM][TILE_DIM + 1]``). Apple GPUs bank threadgroup memory too.

    Legality checked: the tile is a static shared array whose every access is
    ``(row) * C + c`` with ``c`` provably in ``[0, C)`` (so each element keeps a distinct new
    address) and none is a vector access; the padded size must fit the target's shared memory
    (the verifier checks). Not checked: nothing further — the layout is private to the kernel.
    """

    name = "pad-shared"
    site_key = "buffer"
    params = (ParamSpace("pad", (1,)),)

    def sites(self, kernel: Kernel) -> list[str]:
        return tile_sites(kernel)

    def apply(self, kernel: Kernel, site: str, params: Mapping[str, object],
              ctx: RuleContext) -> Kernel | NotApplicable:
        form = tile_at(kernel, site)
        if isinstance(form, str):
            return NotApplicable(form)
        pad = int(params.get("pad", 1))  # type: ignore[arg-type]
        pitch = form.cols + pad
        return relayout(kernel, form, lambda row, col: add(scale(row, pitch), col),
                        form.rows * pitch)


RULES = [PadShared()]
