"""What the rules that recognise a kernel by running it share (``mma-attention``'s
:mod:`kir.rewrites.attention.recognize`, ``warp-tile-matmul``'s
:mod:`kir.rewrites.matmul.by_function`): the answer remembered per kernel text, spec and
sizes, since a search asks again and again; a failed run as a refusal, never an error that
stops the search; and the second set of inputs, the float scalars halved, that tells which
scalar argument plays which part."""

from __future__ import annotations

import hashlib
from typing import Callable, TypeVar

from kir.errors import KirError
from kir.ir import Kernel
from kir.ir.printer import print_kernel

Found = TypeVar("Found")


def recognized(kernel: Kernel, ctx, cache: dict, what: str,
               recognize: Callable[[Kernel, object], Found],
               refused: Callable[[str], Found]) -> Found:
    """``recognize(kernel, bound)`` for ``kernel`` under rule context ``ctx`` (which carries
    the bound spec), remembered in ``cache``; ``refused(reason)`` when there is no spec or
    the kernel's run fails. ``what`` names the thing recognised in the no-spec reason."""
    bound = getattr(ctx, "bound", None)
    if bound is None:
        return refused(f"recognising {what} needs the kernel's spec")
    key = (hashlib.sha1(print_kernel(kernel, locations=False).encode()).hexdigest(),
           str(bound.spec.path), tuple(sorted(bound.sizes.items())))
    if key not in cache:
        try:
            cache[key] = recognize(kernel, bound)
        except KirError as err:
            cache[key] = refused(f"the kernel did not run at small sizes: {err.message}")
        except Exception as exc:  # noqa: BLE001 - an interpreter failure must not stop a search
            cache[key] = refused(f"running the kernel at small sizes failed: "
                                 f"{type(exc).__name__}: {exc}")
    return cache[key]


def floats_halved(spec, inputs: dict) -> dict:
    """``inputs`` with every float scalar argument of ``spec`` halved (the rest as given)."""
    return {name: value * 0.5 if name in spec.args and spec.args[name].is_scalar
            and isinstance(value, float) else value for name, value in inputs.items()}
