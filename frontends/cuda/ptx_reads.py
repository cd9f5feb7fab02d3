"""Inline assembly that only reads a lane's special register, as libraries spell it.

PyTorch's and inference engines' warp helpers read the lane's index and the masks of the
lanes below or above it in PTX (``asm("mov.u32 %0, %%laneid;" : "=r"(lane));``,
``%%lanemask_lt`` for a warp-aggregated atomic's rank). Those reads say nothing kir cannot:
before a function is parsed, each such statement becomes an assignment from a builtin
(:func:`patched`, the text's length kept so positions stay the file's), and the lowering
writes the builtin as kir's lane index (:func:`register_value`). Any other inline assembly
is still refused where it is written. ``%%warpid`` is not read: it names the hardware slot
the warp runs in, which moves while it runs (PTX ISA, "Special Registers"), not
``threadIdx.x / 32``.
"""

from __future__ import annotations

import re

from kir.frontends.cuda import ctypes_ as ct

from kir.ir import Const, Expr, Special
from kir.ir.types import U32

BUILTIN_PREFIX = "__kir_ptx_"
REGISTERS = ("laneid", "lanemask_lt", "lanemask_le", "lanemask_gt", "lanemask_ge",
             "lanemask_eq")
_READ = re.compile(
    r"\b(?:asm|__asm__|__asm)\s*(?:volatile\b|__volatile__\b)?\s*\(\s*"
    r"\"\s*mov\.[bsu]32\s+%0\s*,\s*%%(" + "|".join(REGISTERS) + r")\s*;?\s*\"\s*"
    r":\s*\"=r\"\s*\(\s*([^()]*?)\s*\)\s*\)")


def patched(text: str) -> str:
    """``text`` with each special-register read replaced by ``(target) =
    __kir_ptx_laneid()`` (shorter than the ``asm(...)``, padded: positions are kept)."""
    def replace(match: re.Match) -> str:
        register, target = match.group(1), match.group(2)
        return f"({target}) = {BUILTIN_PREFIX}{register}()".ljust(len(match.group(0)))
    return _READ.sub(replace, text) if "asm" in text else text


def register_value(name: str) -> Expr | None:
    """The value of builtin ``name`` (``__kir_ptx_lanemask_lt``...) as a u32, else None."""
    if not name.startswith(BUILTIN_PREFIX) or name[len(BUILTIN_PREFIX):] not in REGISTERS:
        return None
    register = name[len(BUILTIN_PREFIX):]
    lane = ct.convert(Special("lane"), U32)
    if register == "laneid":
        return lane
    own = ct.binary("<<", Const(1, U32), lane)
    below = ct.binary("-", own, Const(1, U32))  # lanes lower than this one
    up_to = ct.binary("|", below, own)
    return {"lanemask_lt": below, "lanemask_le": up_to, "lanemask_eq": own,
            "lanemask_gt": ct.unary("~", up_to), "lanemask_ge": ct.unary("~", below)}[register]
