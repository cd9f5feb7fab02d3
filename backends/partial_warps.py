"""Warp exchanges that only part of a warp runs, on a target whose exchanges name the whole
warp.

kir's shuffles and warp reductions cover the warp; CUDA's are emitted as
``__shfl_*_sync(0xffffffff, ...)``, which every lane of the warp must reach. A source kernel
may shuffle among part of a warp (``if (lane < 16) v += __shfl_down_sync(0xffff, v, 8, 16);``,
the CUDA samples' block scan under ``if (warp_id == 0 && lane_id < warps)``), naming just
those lanes in its mask; emitted with the whole warp's mask it waits for lanes that are
elsewhere — a hang or an undefined value on the GPU, where kir's interpreter (which runs the
lanes that are there) passed it. Such a kernel is refused for that target, at the exchange.
Lanes that have returned wait nowhere, so code after a return only some lanes took is not
a problem; Metal's SIMD-group functions take the lanes that run them and need no check.
Only ``if`` conditions are judged: loops whose trip count differs between lanes would be a
problem too, but the lane analysis cannot yet tell a warp-uniform count (a loop over the
rows of a warp, a length read from memory) from others, and judging loops refused four
correct kernels of the probe waves (``BENCHMARKS.md``, round 29).
"""

from __future__ import annotations

from kir.errors import UnsupportedError
from kir.ir import Kernel
from kir.ir.verify import exchanges_lanes, lane_divergent
from kir.target import Target


def check_whole_warps(kernel: Kernel, target: Target) -> None:
    """Raise UnsupportedError at the first warp exchange only part of a warp may reach."""
    if not target.whole_warp_exchanges:
        return
    bad = lane_divergent(kernel, exchanges_lanes, branches_only=True)
    if bad is None:
        return
    stmt, why = bad
    raise UnsupportedError(
        f"a warp shuffle or reduction that only some lanes of a warp run ({why}): "
        f"{target.title}'s exchanges name the whole warp, and the other lanes never reach it",
        stmt.loc, hint="let every lane of the warp run it (compute it before the condition "
                       "and use the result under it), or make the condition the same for the "
                       "whole warp")
