"""Running a user's own ``.cu`` file on the emulator, as the user has it.

The file is prepared as :mod:`kir.backends.original_source` describes (host code and other
kernels blanked, user headers put in place, headers the host compiler lacks commented out —
the shim provides the device parts of CUDA's own, ``cooperative_groups/reduce.h``
included), its shared memory rewritten for the emulator, and compiled with the shim. The
kernel is instantiated with the template arguments given, in its namespace; arguments come
in the kernel's parameter order (``None`` for a null pointer) and may stop early, the rest
taking their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from kir.backends.emulate import launch as L
from kir.backends.emulate.source import rewrite_extern_shared, rewrite_group_memory
from kir.backends.emulate.toolchain import CUDA_STUB_DIR, compile_shared
from kir.backends.original_source import (
    STANDARD_HEADERS,
    expand_source,
    qualified_name,
    renames_for,
)
from kir.frontends.cuda import ptx_reads

# the headers the emulator stands in for, as an #include names them (``cub/cub.cuh`` too)
STUB_HEADERS = frozenset(p.relative_to(CUDA_STUB_DIR).as_posix()
                         for p in CUDA_STUB_DIR.rglob("*") if p.suffix in (".h", ".cuh"))


@dataclass(frozen=True)
class StructArgument:
    """A struct passed by value: its bytes (``record``, C's layout) and its pointer members,
    each ``(byte offset, name, array)``: the launcher writes the address of its copy of the
    array there, and returns the array's final contents under ``name``."""

    record: np.void
    pointers: tuple[tuple[int, str, np.ndarray], ...] = ()


def _rewrite(text: str) -> str:
    # (inline PTX reading a lane's register: calls the emulator's CUDA header defines)
    return rewrite_group_memory(rewrite_extern_shared(ptx_reads.patched(text)), "__shared__")


def _keep(name: str) -> bool:
    return name in STANDARD_HEADERS or name in STUB_HEADERS

def run_original_cuda(cu_source: str, kernel_name: str, args: Sequence[Any],
                      grid: Sequence[int], block: Sequence[int], shared_bytes: int = 0,
                      template_args: Sequence[int | str] = (), *, filename: str = "kernel.cu",
                      include_dirs: Sequence[str | Path] = (),
                      defines: dict[str, str] | None = None,
                      constants: dict[str, np.ndarray] | None = None,
                      timeout: float = L.DEFAULT_TIMEOUT_S) -> list[np.ndarray | None]:
    """Run ``kernel_name`` from a user's original ``.cu`` text on ``grid`` blocks of ``block``
    threads. ``args`` are in the kernel's parameter order: arrays, numbers, or None for a null
    pointer, and may stop early (the parameters after them take their defaults);
    ``template_args`` are integers or C++ type names; ``constants`` the contents of the
    ``__constant__`` symbols the kernel reads, by name. A :class:`StructArgument` passes a
    struct. Returns each array argument's final contents (a new array), a struct's as a
    dict by its pointer members' names, None for the others."""
    sources: dict[str, str] = {}
    text = expand_source(cu_source, filename, include_dirs, sources, kernel=kernel_name,
                         keep=_keep, rewrite=_rewrite)
    qualified = qualified_name(cu_source, kernel_name)
    namespace, _, _ = qualified.rpartition("::")
    instance = kernel_name
    if template_args:
        instance += "<" + ", ".join(str(v) if isinstance(v, str) else str(int(v))
                                    for v in template_args) + ">"
    define_lines = [f"#define {k} {v}" for k, v in (defines or {}).items()]
    unit = "\n".join([
        '#include "kir_emu_cuda.h"',
        *define_lines,
        *renames_for(text),
        f'#line 1 "{filename}"',
        text,
        '#line 1 "<launcher>"',
        # In the kernel's namespace, so its template arguments are named as the kernel's own
        # declaration names them; called through a struct, not a pointer, so C++ supplies
        # the defaults of the parameters after the ones given.
        f"namespace {namespace} {{" if namespace else "",
        *[f"KIR_EMU_EXPORT int kir_set_symbol_{name}(const void* src, uint64_t n) {{ "
          f"if (n != sizeof({name})) return 1; std::memcpy((void*)&{name}, src, n); "
          "return 0; }" for name in (constants or {})],
        "struct KirCall {",
        f"  template <class... A> void operator()(A... a) const {{ {instance}(a...); }}",
        "};",
        "inline int kir_launch(const ::kir_emu::Arg* a, int n, const uint32_t* dims,",
        "                      uint64_t smem, uint64_t stack_kib, char* err, uint64_t errlen) {",
        f"  return ::kir_emu::cuda::launch_kernel_n<{len(args)}, KirCall>(\"{kernel_name}\", "
        f"&{instance}, a, n,",
        "      dims, smem, stack_kib, err, errlen);",
        "}",
        "}" if namespace else "",
        "KIR_EMU_EXPORT int kir_emu_entry(const ::kir_emu::Arg* a, int n, const uint32_t* dims,",
        "    uint64_t smem, uint64_t stack_kib, char* err, uint64_t errlen) {",
        f"  return {namespace + '::' if namespace else ''}kir_launch(a, n, dims, smem, stack_kib, "
        "err, errlen);",
        "}",
        "",
    ])
    so_path = compile_shared(unit, "cuda", tag=kernel_name, sources=sources,
                             include_dirs=tuple(str(d) for d in include_dirs))
    buffers: list[np.ndarray] = []
    launch_args: list[tuple[str, Any]] = []
    for value in args:
        if value is None:
            launch_args.append(("n", 0))
        elif isinstance(value, np.ndarray):
            launch_args.append(("p", len(buffers)))
            buffers.append(np.array(value, order="C", copy=True))
        elif isinstance(value, StructArgument):  # a struct by value: its bytes
            patches = []
            for offset, _, array in value.pointers:
                patches.append((offset, len(buffers)))
                buffers.append(np.array(array, order="C", copy=True))
            launch_args.append(("s", (value.record.tobytes(), patches)))
        elif isinstance(value, (bool, int, np.integer)):
            launch_args.append(("i", int(value)))
        elif isinstance(value, (float, np.floating)):
            launch_args.append(("f", float(value)))
        else:
            raise L.EmulatorError(f"unsupported kernel argument of type {type(value).__name__}",
                                  kind="launch")
    dims = L.cuda_dims(grid, block)
    results = iter(L.run_launch(str(so_path), kernel_name, buffers, launch_args, dims,
                                smem=shared_bytes, returns=list(range(len(buffers))),
                                timeout=timeout, sources=sources,
                                symbols=[(f"kir_set_symbol_{name}",
                                          np.ascontiguousarray(value).tobytes())
                                         for name, value in (constants or {}).items()]))
    out: list = []
    for (kind, _), value in zip(launch_args, args):
        if kind == "s":  # in the order its buffers were added
            out.append({name: next(results) for _, name, _ in value.pointers})
        else:
            out.append(next(results) if kind == "p" else None)
    return out
