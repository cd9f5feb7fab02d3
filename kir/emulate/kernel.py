"""``kir.emulate.metal_kernel``: ``mx.fast.metal_kernel`` on the CPU, MLX arrays in and out.

The object it returns is called exactly as MLX's is (keyword arguments only: ``inputs``,
``output_shapes``, ``output_dtypes``, ``grid`` in threads, ``threadgroup``, ``template``,
``init_value``, ``verbose``, ``stream``) and returns a list of ``mx.array`` (numpy arrays with
``numpy=True``). The body runs on kir's C++ emulator (``kir.backends.emulate``): real
barriers, SIMD-group exchange, partial threadgroups at ragged edges, outputs poisoned with NaN
unless ``init_value`` is given. ``check=True`` runs the checked build (out-of-bounds accesses
on every buffer, reads of outputs before any write, threadgroup races); its findings go to
``findings`` and to the :class:`~kir.emulate.session.CheckSession` given.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from kir.backends.emulate.launch import to_dtype
from kir.backends.emulate.metal import MetalKernel as EmulatedMetalKernel
from kir.backends.emulate.toolchain import EmulatorError
from kir.emulate.arrays import to_mlx, to_numpy
from kir.emulate.limits import chip_list, over_thread_limit
from kir.emulate.session import CheckSession, record_launch


def _triple(value: Any, what: str) -> tuple[int, int, int]:
    """MLX takes exactly three ints for ``grid`` and ``threadgroup``."""
    try:
        items = tuple(int(v) for v in value)
    except TypeError:
        items = ()
    if len(items) != 3:
        raise EmulatorError(f"[metal_kernel] `{what}` must be a tuple of three ints, got "
                            f"{value!r}", kind="launch",
                            hint=f"MLX's signature: {what}=(x, y, z)")
    return items  # type: ignore[return-value]


class MetalKernel:
    """A custom Metal kernel as ``mx.fast.metal_kernel`` makes it, run on the CPU emulator."""

    def __init__(self, name: str, input_names: Sequence[str], output_names: Sequence[str],
                 source: str, header: str = "", ensure_row_contiguous: bool = True,
                 atomic_outputs: bool = False, compile_options: Mapping[str, Any] | None = None,
                 *, numpy: bool = False, check: bool = False,
                 session: CheckSession | None = None) -> None:
        self.kernel = EmulatedMetalKernel(name, input_names, output_names, source, header,
                                          ensure_row_contiguous, atomic_outputs, compile_options,
                                          check=check or session is not None)
        self.numpy = numpy
        self.session = session
        self.timeout = 60.0

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def findings(self) -> list[Any]:
        """The checked build's findings of the last call (``check=True``)."""
        return self.kernel.findings

    def __call__(self, *, inputs: Sequence[Any], output_shapes: Sequence[Sequence[int]],
                 output_dtypes: Sequence[Any], grid: Sequence[int], threadgroup: Sequence[int],
                 template: Sequence[tuple[str, Any]] | None = None,
                 init_value: float | None = None, verbose: bool = False,
                 stream: Any = None) -> list[Any]:
        """Run the kernel, as MLX's kernel object does when called."""
        names = self.kernel.output_names
        for what, given in (("output_shapes", output_shapes), ("output_dtypes", output_dtypes)):
            if len(given) != len(names):
                raise EmulatorError(f"[metal_kernel] Expected `{what}` to have size {len(names)} "
                                    f"but got size {len(given)}.", kind="launch")
        grid, threadgroup = _triple(grid, "grid"), _triple(threadgroup, "threadgroup")
        shapes = [tuple(int(n) for n in shape) for shape in output_shapes]
        dtypes = [to_dtype(dtype) for dtype in output_dtypes]
        record = None
        if self.session is not None:
            record = record_launch(self.session, self.kernel, grid=grid, threadgroup=threadgroup,
                                   output_shapes=shapes, init_value=init_value)
        try:
            threads = threadgroup[0] * threadgroup[1] * threadgroup[2]
            if over_thread_limit(threads):
                raise EmulatorError(
                    f"threadgroup {threadgroup} has {threads} threads, more than "
                    f"{chip_list(over_thread_limit(threads))} allows (1024)", kind="limit",
                    hint="MLX refuses the launch on the GPU; use at most 1024 threads")
            outputs = self.kernel(inputs=[to_numpy(v) for v in inputs], output_shapes=shapes,
                                  output_dtypes=dtypes, grid=grid, threadgroup=threadgroup,
                                  template=list(template or ()), init_value=init_value,
                                  verbose=verbose, timeout=self.timeout)
        except EmulatorError as error:
            if record is not None:
                record.error = error
                self._fill(record)
            raise
        if record is not None:
            self._fill(record)
        return list(outputs) if self.numpy else [to_mlx(o) for o in outputs]

    def _fill(self, record: Any) -> None:
        report = self.kernel.report
        record.findings = list(self.kernel.findings)
        if report is None:
            return
        out_first = len(report.names) - len(self.kernel.output_names)
        record.unwritten = {report.names[i]: counts for i, counts in report.unwritten().items()
                            if i >= out_first}
        record.threadgroup_memory = report.threadgroup_memory()


def metal_kernel(name: str, input_names: Sequence[str], output_names: Sequence[str],
                 source: str, header: str = "", ensure_row_contiguous: bool = True,
                 atomic_outputs: bool = False, compile_options: Mapping[str, Any] | None = None,
                 *, numpy: bool = False, check: bool = False,
                 session: CheckSession | None = None) -> MetalKernel:
    """Same signature and semantics as ``mx.fast.metal_kernel``; calls run on the CPU emulator
    and return MLX arrays (numpy arrays with ``numpy=True``). ``check=True`` runs the checked
    build and leaves its findings in the kernel's ``findings``."""
    return MetalKernel(name, input_names, output_names, source, header, ensure_row_contiguous,
                       atomic_outputs, compile_options, numpy=numpy, check=check,
                       session=session)
