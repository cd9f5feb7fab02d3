"""A planted broken rule for the search tests: it deletes a loop's stores, so the kernel does
less work (a naive timer loves it) and computes nothing (a validating evaluator rejects it)."""

import dataclasses

from kir.ir import Block, For, Kernel, Store, transform
from kir.rules import BaseRule, NotApplicable


class DropStores(BaseRule):
    """Drop every store in a loop's body (WRONG on purpose: a test plant)."""

    name = "drop-stores"

    def sites(self, kernel: Kernel) -> list[str]:
        return [n.label for n in kernel.body.walk() if isinstance(n, For)
                and any(isinstance(s, Store) for s in n.body.stmts)]

    def apply(self, kernel, site, params, ctx):
        def strip(node):
            if isinstance(node, For) and node.label == site:
                kept = tuple(s for s in node.body.stmts if not isinstance(s, Store))
                return dataclasses.replace(node, body=Block(kept))
            return None

        new = transform(kernel, strip)
        return new if new != kernel else NotApplicable("no stores")


RULES = [DropStores()]
