"""The check a warp intrinsic's mask becomes when it is not the full one.

kir's warp operations cover the whole warp: a vote counts every lane, a shuffle reads its
source lane whatever the mask says. CUDA requires the mask to name every lane that runs the
intrinsic (CUDA Programming Guide, "Warp Vote Functions" and "Warp Shuffle Functions"; PTX
``vote.sync`` / ``shfl.sync``: undefined for a running lane outside it), and a kernel that
keeps to that computes the same with the mask or without. So a mask kir cannot read at
compile time (the CUDA samples' reductions shift ``0xffffffff`` by a count the block size
gives, then shuffle over the lanes a ballot chose) becomes an :class:`~kir.ir.Assert` the
interpreter checks lane by lane, with its own message; GPU builds drop it, as they drop
asserts.

What a lane reads from a lane outside the mask is not checked here: CUDA leaves that value
undefined, and warp reductions under ``if (lane < 16)`` read such values into lanes whose
results are never used. kir's interpreter reads a float from a lane not running the shuffle
as NaN (:meth:`kir.interp.state.State.shuffle`), so a result that uses one fails its check.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct

from kir.ir import Assert, Const, Expr, Special
from kir.ir.types import I32, U32

MESSAGE = ("{name}'s mask leaves out a lane that calls it (CUDA leaves that undefined; kir's "
           "warp operations cover every lane of the warp): name every calling lane in the mask")


def mask_check(name: str, mask: Expr, loc) -> Assert:
    """The lane running warp intrinsic ``name`` is named in ``mask`` (an integer)."""
    lane = ct.convert(Special("lane"), I32)
    bit = ct.binary("&", ct.binary(">>", ct.convert(mask, U32), lane), Const(1, U32))
    return Assert(ct.binary("!=", bit, Const(0, U32)), MESSAGE.format(name=name), loc=loc)
