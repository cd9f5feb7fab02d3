"""Dropping locals nothing reads.

The CUDA frontend takes structs apart into one local per field and copies every field at
each by-value argument, return and assignment (``Matrix Asub = GetSubMatrix(A, r, c)`` copies
width, height and stride though the kernel reads only the stride and the elements), and
kernels declare values they never use. Such a local is noise in an IR dump and, worse, can
hide a loop's structure from the rules that read it (a k-tile loop "assigns something other
than its tiles"). :func:`drop_dead_locals` removes every local that no expression reads:
its declaration and its assignments (a local an atomic writes its old value to stays: the
atomic names it). kir expressions have no side effects, so nothing else
changes (a load whose value nobody uses is gone, as any compiler would drop it).
"""

from __future__ import annotations

import dataclasses

from kir.analysis.walk import used_vars
from kir.ir.nodes import Assign, Atomic, Block, Declare, Kernel, Node, transform


def drop_dead_locals(kernel: Kernel) -> Kernel:
    """``kernel`` without the locals no expression reads (repeated: dropping one local's
    assignments can leave another unread)."""
    while True:
        read = used_vars(kernel)
        read |= {n.result for n in kernel.walk() if isinstance(n, Atomic) and n.result}
        dead = {n.name for n in kernel.walk()
                if isinstance(n, Declare) and n.name not in read}
        if not dead:
            return kernel

        def drop(node: Node) -> Node | None:
            if not isinstance(node, Block):
                return None
            kept = tuple(s for s in node.stmts
                         if not (isinstance(s, (Declare, Assign)) and s.name in dead))
            return dataclasses.replace(node, stmts=kept) if len(kept) != len(node.stmts) \
                else None

        kernel = transform(kernel, drop)  # type: ignore[assignment]
