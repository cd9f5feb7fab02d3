"""fast-math: precise math intrinsics to their fast hardware forms."""

from __future__ import annotations

import dataclasses

from kir.ir import Call, Kernel, Node, transform
from kir.ir.types import F32
from kir.rules import BaseRule, Match, NoParams, NotApplicable, RuleContext

# Intrinsics with a fast form on at least one target: CUDA's __expf, __logf, __log2f, __powf,
# __sinf, __cosf (Programming Guide, "Intrinsic Functions") and Metal's metal::fast:: family
# (exp, exp2, log, log2, sqrt, rsqrt, pow, sin, cos, tanh). A backend without a fast form of
# one of them prints the precise call, so marking it is never wrong, only useless there.
FAST_FNS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "pow", "sin", "cos", "tanh")


def _candidate(node: Node, fn: str | None) -> bool:
    """A precise f32 call of a function with a fast form (``fn`` None: any of them)."""
    return (isinstance(node, Call) and not node.fast and node.type == F32
            and node.fn in FAST_FNS and (fn is None or node.fn == fn))


class FastMath(BaseRule):
    """Use the fast, less precise hardware forms of math intrinsics (CUDA __expf / Metal fast::).

    Encodes CUDA's ``-use_fast_math`` / intrinsic-function practice (CUDA C++ Programming
    Guide, "Intrinsic Functions"; Best Practices Guide, "Math Libraries"): ``expf`` becomes
    ``__expf`` on CUDA and ``metal::exp`` becomes ``metal::fast::exp`` on Metal. Only f32
    calls are touched (the fast forms are single-precision). Sites: ``all`` (every precise
    call with a fast form) or one function name (``exp``, ``log``, ``sqrt``, ...), listed
    only when such a call occurs. Division has no fast form in kir IR (CUDA's
    ``__fdividef``), so ``div`` is not a site; ``div-to-mul`` in algebra.rules covers the
    constant-divisor case.

    Legality cannot be proved: the fast forms have larger error bounds (``__expf``'s
    error grows with |x|; ``__logf`` is inaccurate near 1; denormals may flush to zero).
    Whether a rewrite survives is decided by the validation tolerance of the kernel's spec,
    as for every candidate.
    """

    name = "fast-math"
    site_key = "at"

    def candidates(self, kernel: Kernel) -> list[str]:
        found: list[str] = []
        for n in kernel.body.walk():
            if _candidate(n, None) and n.fn not in found:  # type: ignore[union-attr]
                found.append(n.fn)  # type: ignore[union-attr]
        return ["all"] + found if found else []

    def match_at(self, kernel: Kernel, site: str,
                 ctx: RuleContext | None = None) -> Match | NotApplicable:
        """As for every rule, with the reason a function name is not a site."""
        if site != "all" and site not in FAST_FNS:
            return NotApplicable(f"{site!r} has no fast form (choose all or one of "
                                 f"{', '.join(FAST_FNS)})")
        found = super().match_at(kernel, site)
        if isinstance(found, NotApplicable):
            return NotApplicable(f"no precise f32 {site if site != 'all' else 'math'} call "
                                 "to make fast")
        return found

    def plan(self, kernel: Kernel, site: str) -> str | None:
        """The function to make fast (None: all of them); every candidate has a call."""
        return None if site == "all" else site

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        site, fn = match.site, match.plan

        def visit(n: Node) -> Node | None:
            return dataclasses.replace(n, fast=True) if _candidate(n, fn) else None

        body = transform(kernel.body, visit)
        if body == kernel.body:
            return NotApplicable(f"no precise f32 {site if fn else 'math'} call to make fast")
        return dataclasses.replace(kernel, body=body)


RULES = [FastMath()]
