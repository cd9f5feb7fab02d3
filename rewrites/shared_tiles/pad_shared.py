"""pad-shared: give a 2-D shared tile a padded row pitch to avoid bank conflicts."""

from __future__ import annotations

from dataclasses import dataclass

from kir.rewrites.shared_tiles.tiles import TileForm, TileRule, add, relayout, scale

from kir.ir import Kernel
from kir.rules import Match, NotApplicable, RuleContext, choice


class PadShared(TileRule):
    """Pad the rows of a 2-D shared tile ``t[R][C]`` to pitch ``C + pad`` (bank conflicts).

    CUDA practice: shared memory is split into 32 banks of 4-byte words; threads of a warp
    reading a column of a tile whose row pitch is a multiple of 32 words all hit one bank and
    are serialized. One word of padding per row spreads the column over all banks (CUDA C++
    Best Practices Guide, "Shared Memory and Memory Banks"; the padded transpose example,
    ``__shared__ float tile[TILE_DIM][TILE_DIM + 1]``). Apple GPUs bank threadgroup memory too.

    Only an even pitch is padded (an odd one already spreads a column over all banks, so a
    second padding of the same tile is refused). Legality checked: the tile is a static
    shared array whose every access is ``(row) * C + c`` with ``c`` provably in ``[0, C)``
    (so each element keeps a distinct new address) and none is a vector access; the padded
    size must fit the target's shared memory (the verifier checks). Not checked: nothing
    further — the layout is private to the kernel.
    """

    name = "pad-shared"

    @dataclass(frozen=True)
    class Params:
        pad: int = choice(1)

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        form: TileForm = match.plan
        if form.cols % 2:
            # An odd pitch already puts the 32 rows a column walk touches on 32 banks;
            # padding again (a search repeating the step) would only waste memory.
            return NotApplicable(f"the row pitch {form.cols} is odd: a column already "
                                 "spreads over all banks")
        pitch = form.cols + params.pad
        return relayout(kernel, form, lambda row, col: add(scale(row, pitch), col),
                        form.rows * pitch)


RULES = [PadShared()]
