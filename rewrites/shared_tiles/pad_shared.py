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

    ``pad = 4`` is the padding for tiles whose rows are read as float4 vectors, one row a
    lane (a K tile in attention, each lane a key): a pitch of 4 times an odd number puts
    the 8 lanes of each quarter-warp transaction on 8 disjoint groups of 4 banks, and keeps
    every row 16-byte aligned. An odd pitch, or one that already is an odd multiple of the
    pad, is refused (the columns, or the float4 rows, already spread over all banks, so a
    second padding of the same tile would only waste memory). Legality checked: the tile is a static
    shared array whose every access is ``(row) * C + c`` with ``c`` provably in ``[0, C)``
    (so each element keeps a distinct new address) and none is a vector access; the padded
    size must fit the target's shared memory (the verifier checks). Not checked: nothing
    further — the layout is private to the kernel.
    """

    name = "pad-shared"

    @dataclass(frozen=True)
    class Params:
        pad: int = choice(1, 4)

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        form: TileForm = match.plan
        if form.cols % 2 or form.cols % (2 * params.pad) == params.pad:
            # An odd pitch already puts the 32 rows a column walk touches on 32 banks (an
            # odd multiple of 4, the float4 rows of 8 lanes); padding again (a search
            # repeating the step) would only waste memory.
            return NotApplicable(f"the row pitch {form.cols} is odd or an odd multiple of "
                                 f"{params.pad}: the rows already spread over all banks")
        pitch = form.cols + params.pad
        return relayout(kernel, form, lambda row, col: add(scale(row, pitch), col),
                        form.rows * pitch)


RULES = [PadShared()]
