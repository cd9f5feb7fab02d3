"""Make ``mx.fast.metal_kernel`` resolve to the CPU emulator where MLX has no Metal.

mlx-lm-style modules build their kernels at import (``mx.fast.metal_kernel(...)``) and check
``mx.metal.is_available()`` before using them; their tests skip without Metal. Inside
:func:`emulate_metal_kernels` both answer as on a Mac: ``metal_kernel`` makes emulated kernels
and ``mx.metal.is_available()`` is True, so such a module imported (or reloaded) inside the
context, and its tests, run unchanged on Linux. Where Metal is present nothing is replaced,
unless ``force=True``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from kir.emulate.kernel import metal_kernel
from kir.emulate.session import CheckSession


@contextlib.contextmanager
def emulate_metal_kernels(*, check: bool = False, session: CheckSession | None = None,
                          force: bool = False,
                          report_metal_available: bool = True) -> Iterator[Any]:
    """Within the block, ``mx.fast.metal_kernel`` builds emulated kernels (checked ones with
    ``check=True`` or a ``session``) and, with ``report_metal_available``,
    ``mx.metal.is_available()`` returns True. Yields the emulated ``metal_kernel`` factory, or
    MLX's own where Metal is present and ``force`` is False."""
    import mlx.core as mx

    if mx.metal.is_available() and not force:
        yield mx.fast.metal_kernel
        return

    def factory(name: str, input_names: Any, output_names: Any, source: str, header: str = "",
                ensure_row_contiguous: bool = True, atomic_outputs: bool = False,
                compile_options: Any = None) -> Any:
        return metal_kernel(name, input_names, output_names, source, header,
                            ensure_row_contiguous, atomic_outputs, compile_options, check=check,
                            session=session)

    saved = mx.fast.metal_kernel, mx.metal.is_available
    mx.fast.metal_kernel = factory
    if report_metal_available:
        mx.metal.is_available = lambda: True
    try:
        yield factory
    finally:
        mx.fast.metal_kernel, mx.metal.is_available = saved
