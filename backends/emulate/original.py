"""Running a user's own ``.cu`` file on the emulator, as the user has it.

The file is compiled unmodified except for what a host C++ compiler cannot take and a GPU
compiler would: host code is blanked (:func:`source.strip_host_code`); ``#include "x.h"``
headers found beside the file or in the include directories are put in place (with ``#line``
markers, so errors point into them) and blanked the same way; ``#include <...>`` of a header
neither standard C++ nor one of the emulator's CUDA stubs (torch, cub, cublas, helper_cuda,
``cooperative_groups/reduce.h`` — whose device parts the shim provides) becomes a comment; a
user function named like a function C++20 puts in the global namespace (``lerp``, ``beta``)
is renamed by a macro so the two do not clash. The kernel is found in its namespace and
instantiated with the template arguments given; arguments come in the kernel's parameter
order (``None`` for a null pointer).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from kir.backends.emulate import launch as L
from kir.backends.emulate.source import (
    mask,
    rewrite_extern_shared,
    rewrite_group_memory,
    strip_host_code,
)
from kir.backends.emulate.toolchain import CUDA_STUB_DIR, compile_shared

STANDARD_HEADERS = frozenset("""
    assert.h ctype.h errno.h float.h limits.h math.h stdint.h stddef.h stdio.h stdlib.h
    string.h stdbool.h inttypes.h time.h stdarg.h
    cassert cctype cerrno cfloat climits cmath cstdint cstddef cstdio cstdlib cstring ctime
    cinttypes cstdarg cfenv algorithm array atomic bit bitset chrono complex functional
    initializer_list iomanip iostream iterator limits map memory numeric numbers optional
    random set sstream stdexcept string tuple type_traits unordered_map utility vector
""".split())
STUB_HEADERS = frozenset(p.name for p in CUDA_STUB_DIR.glob("*.h"))
# Names <math.h> brings into the global namespace under C++17/20 (using std::lerp; ...): a
# user's function of the same name would clash with them.
CLASHING_NAMES = frozenset("""
    lerp beta expint hermite laguerre legendre riemann_zeta assoc_laguerre assoc_legendre
    comp_ellint_1 comp_ellint_2 comp_ellint_3 cyl_bessel_i cyl_bessel_j cyl_bessel_k
    cyl_neumann ellint_1 ellint_2 ellint_3 sph_bessel sph_legendre sph_neumann
""".split())
_INCLUDE = re.compile(r'(?m)^([ \t]*#[ \t]*include[ \t]*)([<"])([^>"\n]+)[>"][^\n]*$')
_FUNCTION_NAMES = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
MAX_DEPTH = 32


def _rewrite(text: str, kernel: str | None) -> str:
    return rewrite_group_memory(rewrite_extern_shared(strip_host_code(text, keep_kernel=kernel)),
                                "__shared__")


def expand_source(text: str, filename: str, include_dirs: Sequence[str | Path] = (),
                  sources: dict[str, str] | None = None, seen: set[Path] | None = None,
                  depth: int = 0, kernel: str | None = None) -> str:
    """``text`` with its user headers put in place and unknown system headers commented out
    (``sources`` collects every file's text by name, for error locations). With ``kernel``,
    the file's other ``__global__`` functions are blanked like host code: they may use
    libraries the emulator does not have (cub), and the launch needs only this one."""
    sources = {} if sources is None else sources
    seen = set() if seen is None else seen
    sources[filename] = text
    folders = [Path(filename).parent, *(Path(d) for d in include_dirs)]
    pieces, position = [], 0
    masked = mask(text)
    for match in _INCLUDE.finditer(text):
        if masked[match.start():match.start() + 1].isspace() and \
                not masked[match.start():match.end()].strip():
            continue  # inside a comment or string
        name, quoted = match.group(3).strip(), match.group(2) == '"'
        line = text.count("\n", 0, match.start()) + 1
        pieces.append(_rewrite(text[position:match.start()], kernel))
        position = match.end()
        found = next((f / name for f in folders if (f / name).is_file()), None) \
            if quoted else None
        if found is not None and depth < MAX_DEPTH:
            key = found.resolve()
            if key not in seen:
                seen.add(key)
                header = found.read_text(encoding="utf-8", errors="replace")
                pieces.append(f'\n#line 1 "{found}"\n')
                pieces.append(expand_source(header, str(found), include_dirs, sources, seen,
                                            depth + 1, kernel))
                pieces.append(f"\n#line {line} \"{filename}\"\n")
            else:
                pieces.append(f"// kir: {name} already included")
            continue
        if not quoted and (name in STANDARD_HEADERS or name in STUB_HEADERS):
            pieces.append(match.group(0))
        else:
            pieces.append(f"// kir: skipped {match.group(0).strip()}")
    pieces.append(_rewrite(text[position:], kernel))
    return "".join(pieces)


def renames_for(text: str) -> list[str]:
    """``#define`` lines renaming the user's functions that clash with C++ library names."""
    defined = set(_FUNCTION_NAMES.findall(mask(text, directives=True))) & CLASHING_NAMES
    return [f"#define {name} kir_user_{name}" for name in sorted(defined)]


def qualified_name(text: str, name: str) -> str:
    """``name`` with the namespaces enclosing its first declaration (``ops::softmax``)."""
    masked = mask(text, directives=True)
    stack: list[str | None] = []  # a namespace's name, or None for any other brace
    pattern = (r"\bnamespace\s+([\w:]*)\s*\{|\bextern\s*\{|[{}]|\b" + re.escape(name)
               + r"\s*(?:<[^;{}()]*>)?\s*\(")
    for match in re.finditer(pattern, masked):
        token = match.group(0)
        if token.startswith(("namespace", "extern")):  # extern "C" { is transparent
            stack.append(match.group(1) or "")
        elif token == "{":
            stack.append(None)
        elif token == "}":
            if stack:
                stack.pop()
        elif None not in stack:
            return "::".join([n for n in stack if n] + [name])
    return name


def run_original_cuda(cu_source: str, kernel_name: str, args: Sequence[Any],
                      grid: Sequence[int], block: Sequence[int], shared_bytes: int = 0,
                      template_args: Sequence[int | str] = (), *, filename: str = "kernel.cu",
                      include_dirs: Sequence[str | Path] = (),
                      defines: dict[str, str] | None = None,
                      timeout: float = L.DEFAULT_TIMEOUT_S) -> list[np.ndarray | None]:
    """Run ``kernel_name`` from a user's original ``.cu`` text on ``grid`` blocks of ``block``
    threads. ``args`` are in the kernel's parameter order: arrays, numbers, or None for a null
    pointer, and may stop early (the parameters after them take their defaults);
    ``template_args`` are integers or C++ type names. Returns each array argument's final
    contents (a new array), None for the others."""
    sources: dict[str, str] = {}
    text = expand_source(cu_source, filename, include_dirs, sources, kernel=kernel_name)
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
        "struct KirCall {",
        f"  template <class... A> void operator()(A... a) const {{ {instance}(a...); }}",
        "};",
        "inline int kir_launch(const ::kir_emu::Arg* a, int n, const uint32_t* dims, uint64_t smem,",
        "                      uint64_t stack_kib, char* err, uint64_t errlen) {",
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
                                timeout=timeout, sources=sources))
    return [next(results) if kind == "p" else None for kind, _ in launch_args]
