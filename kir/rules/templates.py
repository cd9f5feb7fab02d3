"""What rules that rebuild a kernel from an IR-text template share (``warp-tile-matmul``,
``mma-attention``): the original's signature with a new launch around the template's body,
and where the template's shared arrays go."""

from __future__ import annotations

import dataclasses
from typing import Iterable

from kir.ir import Block, Kernel, Launch
from kir.ir.parser import parse_template
from kir.ir.printer import print_kernel
from kir.target import Target


def kernel_from_template(kernel: Kernel, launch: Launch, body: Iterable[str],
                         origin: str) -> Kernel:
    """``kernel``'s name and parameters with ``launch`` and the body whose IR-text lines are
    ``body``, parsed (once per distinct text: :func:`kir.ir.parser.parse_template`) with
    ``origin`` as the file its locations name. Raises :class:`KirError` for a template that
    does not parse."""
    shell = dataclasses.replace(kernel, body=Block(()), launch=launch)
    head = print_kernel(shell, locations=False).rstrip().rsplit("}", 1)[0]
    text = head + "\n".join("  " + line for line in body) + "\n}\n"
    return parse_template(text, origin)


def needs_dynamic_shared(target: Target | None, shared_bytes: int) -> bool:
    """Whether a kernel taking ``shared_bytes`` of shared memory in all must hold its large
    arrays in dynamic shared memory: more than the target's static arrays may take, on a
    target that has more dynamically (CUDA: 48 KB static, 227 KB in all)."""
    return (target is not None and target.dynamic_shared
            and shared_bytes > target.max_static_shared_bytes)
