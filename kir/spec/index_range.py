"""Size checks made before anything runs: 32-bit index overflow.

kir's IR indexes memory and numbers threads with 32-bit integers (CUDA's ``int`` and
``threadIdx``/``blockIdx`` arithmetic, Metal's ``uint``), so a buffer of 2^31 or more elements,
or a launch of 2^31 or more threads, would wrap an index and read or write the wrong element
silently. :func:`check_index_range` refuses both with a KirError naming the spec key.
Target limits on one threadgroup (threads, shared memory) live in :mod:`kir.ir.verify`.
"""

from __future__ import annotations

import math

from kir.ir import Atomic, Kernel, Load, Store

INDEX_LIMIT = 2**31  # first element count a signed 32-bit index cannot reach


def _narrow_indexing(kernel: Kernel) -> bool:
    """Whether any memory access in ``kernel`` uses a 32-bit index."""
    for node in kernel.body.walk():
        if isinstance(node, (Load, Store, Atomic)) and getattr(node.index.type, "nbytes", 8) <= 4:
            return True
    return False


def check_index_range(kernel: Kernel, bound) -> None:
    """Raise KirError when a buffer of ``bound`` (a :class:`kir.spec.BoundSpec`) has 2^31 or
    more elements, or the launch 2^31 or more threads, and ``kernel`` indexes with 32 bits."""
    if not _narrow_indexing(kernel):
        return
    spec = bound.spec
    sizes = ", ".join(f"{k}={v}" for k, v in bound.sizes.items())
    for name, arg in spec.args.items():
        if not arg.is_buffer:
            continue
        count = math.prod(bound.shape(name))
        if count >= INDEX_LIMIT:
            raise spec.error(
                f"argument {name!r} has {count} elements with sizes {sizes}: more than a 32-bit "
                f"index reaches ({INDEX_LIMIT - 1}); the kernel's indices would wrap",
                "args", name, "shape", hint="use smaller sizes (--size), or split the work")
    threads = math.prod(bound.grid) * math.prod(kernel.launch.block)
    if threads >= INDEX_LIMIT:
        raise spec.error(
            f"the launch has {threads} threads with sizes {sizes}: a 32-bit thread index "
            f"(block.x * block_dim.x + thread.x) wraps past {INDEX_LIMIT - 1}",
            "launch", "grid", hint="use smaller sizes (--size)")
