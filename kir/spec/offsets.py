"""Launch-time pointer offsets: ``k<<<grid, block>>>(data + blockSize, ...)``.

The spec says the buffer (``shape``: all of ``data``) and where the kernel's pointer starts in
it (``offset = "blockSize"``). kir gives the kernel the whole buffer and adds the offset to
every access of that parameter, so the interpreter, the emulator and MLX all index one and
the same array, and the reference sees the whole buffer as the caller does.

The offset is computed at run time from the kernel's own scalar parameters when the spec
derives them from the same sizes (:func:`kir.spec.size_to_ir.grid_to_ir`), so the kernel
stays right at every size; otherwise its value at the bound sizes is baked in and the launch
is marked ``specialized`` (right at those sizes only).
"""

from __future__ import annotations

import dataclasses

from kir.ir import Atomic, Binary, Cast, Const, Kernel, Load, MatrixLoad, MatrixStore, Store
from kir.ir import transform
from kir.ir.types import ScalarType
from kir.spec.size_to_ir import INT_TYPES, grid_to_ir
from kir.spec.sizeexpr import size_names

_ACCESSES = (Load, Store, Atomic, MatrixLoad, MatrixStore)


def apply_offsets(kernel: Kernel, bound) -> Kernel:
    """``kernel`` with each spec ``offset`` added to the accesses of its parameter
    (``bound`` is a :class:`kir.spec.BoundSpec`); the kernel itself when none has one."""
    args = bound.spec.args
    offsets = {p.name: args[p.name].offset for p in kernel.params
               if p.is_buffer and p.name in args and args[p.name].offset is not None}
    if not offsets:
        return kernel
    exprs = {n: a.value for n, a in args.items() if a.is_scalar and a.value}
    values = {name: bound.offset(name) for name in offsets}
    baked = False
    cache: dict[tuple[str, ScalarType], object] = {}

    def offset_ir(name: str, index_type: ScalarType):
        nonlocal baked
        key = (name, index_type)
        if key not in cache:
            text = offsets[name]
            expr = grid_to_ir(kernel, text, exprs, index_type, bound.sizes) \
                if index_type in INT_TYPES else None
            if expr is None:
                expr = Const(values[name], index_type)
                baked |= bool(size_names(text))  # a number alone is right at every size
            cache[key] = expr
        return cache[key]

    def shift(node):
        if isinstance(node, _ACCESSES) and node.buffer in offsets:
            index = node.index
            offset = offset_ir(node.buffer, index.type)
            if offset.type != index.type:
                offset = Cast(offset, index.type)
            return dataclasses.replace(node, index=Binary("+", index, offset, index.type))
        return None

    body = transform(kernel.body, shift)
    launch = dataclasses.replace(kernel.launch, specialized=True) if baked else kernel.launch
    return dataclasses.replace(kernel, body=body, launch=launch)
