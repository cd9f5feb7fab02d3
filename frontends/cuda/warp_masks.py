"""The checks a warp intrinsic's mask becomes when it is not the full one.

kir's warp operations cover the whole warp: a vote counts every lane, a shuffle reads its
source lane whatever the mask says. CUDA requires the mask to name every lane that runs the
intrinsic and, for a shuffle, the lane it reads (CUDA Programming Guide, "Warp Vote
Functions" and "Warp Shuffle Functions"; PTX ``vote.sync`` / ``shfl.sync``: undefined
otherwise). A kernel that keeps to that computes the same with or without the mask, so a
mask kir cannot read at compile time (the CUDA samples' reductions shift ``0xffffffff`` by a
count the block size gives, then shuffle over the lanes a ballot chose) becomes an
:class:`~kir.ir.Assert` the interpreter checks lane by lane, with its own message; GPU builds
drop it, as they drop asserts. A kernel that breaks the rule is stopped with a located error
where it reads an idle lane, instead of getting whatever value kir's interpreter gives one.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_cg import block_threads, linear_thread

from kir.ir import Assert, Const, Expr, Select, Special
from kir.ir.nodes import WARP
from kir.ir.types import I32, U32

VOTE_MESSAGE = ("{name}'s mask leaves out a lane that votes (CUDA leaves that undefined; "
                "kir's warp votes cover every lane of the warp)")
SHUFFLE_MESSAGE = ("a shuffle's mask leaves out the lane running it or the lane it reads "
                   "(CUDA leaves the value undefined): name both lanes in the mask, or give "
                   "the lanes past the data a neutral value and shuffle over the whole warp")


def vote_check(name: str, mask: Expr, loc) -> Assert:
    """The lane running vote ``name`` is named in ``mask`` (an integer expression)."""
    return Assert(_named(mask, _lane()), VOTE_MESSAGE.format(name=name), loc=loc)


def shuffle_check(mode: str, mask: Expr, arg: Expr, width: int, loc) -> Assert:
    """A shuffle of ``mode`` (``idx``/``down``/``up``/``xor``) with lane argument ``arg``
    over groups of ``width`` lanes: the running lane is named in ``mask``, and so is the
    lane it reads where it reads another. Where CUDA gives a lane its own value (a source
    past its group, or a later group for ``xor``) or the source is past the block's last
    thread (a partial warp; kir's interpreter gives the own value there too) it reads none."""
    b = ct.binary
    lane, arg, size = _lane(), ct.convert(arg, I32), Const(width, I32)
    mine = b("%", lane, size)  # the lane's place in its group
    group = b("-", lane, mine)
    if mode == "xor":  # earlier groups are readable, later ones give the own value
        source = b("^", lane, arg)
        reads_other = _all(b("<=", b("-", source, b("%", source, size)), group),
                           b(">=", source, Const(0, I32)), b("<", source, Const(WARP, I32)))
    else:
        place = {"idx": lambda: b("&", arg, Const(width - 1, I32)),
                 "down": lambda: b("+", mine, arg),
                 "up": lambda: b("-", mine, arg)}[mode]()
        source = b("+", group, place)
        reads_other = _all(b(">=", place, Const(0, I32)), b("<", place, size))
    first_of_warp = b("-", ct.convert(linear_thread(), I32), lane)
    exists = b("<", b("+", first_of_warp, source), ct.convert(block_threads(), I32))
    read = Select(_all(reads_other, exists), source, lane, I32)
    return Assert(_all(_named(mask, lane), _named(mask, read)), SHUFFLE_MESSAGE, loc=loc)


def _lane() -> Expr:
    return ct.convert(Special("lane"), I32)


def _named(mask: Expr, lane: Expr) -> Expr:
    """Whether ``mask`` has ``lane``'s bit (``lane`` in 0..31)."""
    bit = ct.binary("&", ct.binary(">>", ct.convert(mask, U32), lane), Const(1, U32))
    return ct.binary("!=", bit, Const(0, U32))


def _all(*terms: Expr) -> Expr:
    out = terms[0]
    for term in terms[1:]:
        out = ct.binary("&&", out, term)
    return out
