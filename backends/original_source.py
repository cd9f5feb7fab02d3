"""A user's original ``.cu`` file, made ready for a compiler other than the one it was
written for (the emulator's host C++ compiler, or NVRTC through CuPy), changing no line of
device code.

Host code is blanked (:func:`kir.backends.emulate.source.strip_host_code`), and so are the
file's other kernels (they may use libraries the target lacks; a launch needs one kernel);
``#include "x.h"`` headers found beside the file or in the include directories are put in
place with ``#line`` markers, so errors point into them; ``#include <...>`` of a header the
target does not have (torch, cub, cublas, helper_cuda, ...) becomes a comment. A user
function named like one C++20 puts in the global namespace (``lerp``) is renamed by a macro,
and the kernel is found in its namespace.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Sequence


def mask(text: str, *, directives: bool = False) -> str:
    """Comments and literals blanked (see :func:`kir.backends.emulate.source.mask`)."""
    from kir.backends.emulate.source import mask as emulate_mask  # (a cycle at import time)

    return emulate_mask(text, directives=directives)


def strip_host_code(text: str, keep_kernel: str | None = None) -> str:
    """Host code blanked (see :func:`kir.backends.emulate.source.strip_host_code`)."""
    from kir.backends.emulate.source import strip_host_code as strip

    return strip(text, keep_kernel=keep_kernel)

STANDARD_HEADERS = frozenset("""
    assert.h ctype.h errno.h float.h limits.h math.h stdint.h stddef.h stdio.h stdlib.h
    string.h stdbool.h inttypes.h time.h stdarg.h
    cassert cctype cerrno cfloat climits cmath cstdint cstddef cstdio cstdlib cstring ctime
    cinttypes cstdarg cfenv algorithm array atomic bit bitset chrono complex functional
    initializer_list iomanip iostream iterator limits map memory numeric numbers optional
    random set sstream stdexcept string tuple type_traits unordered_map utility vector
""".split())
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


def expand_source(text: str, filename: str, include_dirs: Sequence[str | Path] = (),
                  sources: dict[str, str] | None = None, seen: set[Path] | None = None,
                  depth: int = 0, kernel: str | None = None,
                  keep: Callable[[str], bool] = lambda name: name in STANDARD_HEADERS,
                  rewrite: Callable[[str], str] = lambda text: text) -> str:
    """``text`` with its user headers put in place (each once) and the system headers
    ``keep`` does not accept commented out; ``sources`` collects every file's text by name,
    for error locations. Host code is blanked, and with ``kernel`` the file's other
    ``__global__`` functions too (they may use libraries the target does not have, such as
    cub; the launch needs only this one); ``rewrite`` is applied to the rest."""
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
        pieces.append(rewrite(strip_host_code(text[position:match.start()], keep_kernel=kernel)))
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
                                            depth + 1, kernel, keep, rewrite))
                pieces.append(f"\n#line {line} \"{filename}\"\n")
            else:
                pieces.append(f"// kir: {name} already included")
            continue
        if not quoted and keep(name):
            pieces.append(match.group(0))
        else:
            pieces.append(f"// kir: skipped {match.group(0).strip()}")
    pieces.append(rewrite(strip_host_code(text[position:], keep_kernel=kernel)))
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
