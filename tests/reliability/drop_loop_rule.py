"""A planted wrong rule for the reliability tests: it deletes a loop outright. The kernel does
less work (a cost model loves it) and computes something else (only a tolerance loose enough
lets it pass)."""

from kir.ir import Block, For, Kernel, transform
from kir.rules import BaseRule, NotApplicable


class DropLoop(BaseRule):
    """Delete a loop (WRONG on purpose: a test plant)."""

    name = "drop-loop"

    def sites(self, kernel: Kernel) -> list[str]:
        return [n.label for n in kernel.body.walk() if isinstance(n, For)]

    def apply(self, kernel, site, params, ctx):
        def drop(node):
            if isinstance(node, Block):
                kept = tuple(s for s in node.stmts
                             if not (isinstance(s, For) and s.label == site))
                return Block(kept) if len(kept) != len(node.stmts) else None
            return None

        new = transform(kernel, drop)
        return new if new != kernel else NotApplicable(f"no loop {site}")


RULES = [DropLoop()]
