"""The host C++ compiler for the emulator: discovery, the cache, precompiled headers, errors.

Every emulated kernel becomes one shared object compiled from generated C++ that includes a shim
header (``kir_emu_metal.h`` or ``kir_emu_cuda.h``), linked with the runtime's scheduler and
failure path (``kir_emu_runtime.cpp``). The shim header is precompiled once per (compiler,
flags, header contents), the runtime compiled once per (compiler, sources), and the shared
objects are cached by a hash of the generated source, the compiler's version and the flags.
Cache writes go to a temporary name first and are renamed into place, so concurrent processes
never see a half-written file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kir.errors import KirError, Loc

HEADER_DIR = Path(__file__).resolve().parent
CUDA_STUB_DIR = HEADER_DIR / "cuda_include"
SHIM_HEADERS = ("kir_emu_runtime.h", "kir_emu_vec.h", "kir_emu_metal.h", "kir_emu_cuda.h",
                "kir_emu_check.h")
# Compiled once and linked into every kernel: the scheduler and the failure path (see its top).
RUNTIME_SOURCE = "kir_emu_runtime.cpp"
DIALECT_HEADER = {"metal": "kir_emu_metal.h", "cuda": "kir_emu_cuda.h"}
# -fsanitize=bounds checks indexes into fixed-size arrays (threadgroup, shared, local); its
# handlers live in kir_emu_runtime.cpp, so the link below needs no sanitizer runtime.
BASE_FLAGS = ("-std=c++20", "-O1", "-fPIC", "-w", "-fno-strict-aliasing", "-fvisibility=hidden",
              "-fsanitize=bounds")


class EmulatorError(KirError):
    """An emulated kernel did not run to completion: it did not compile, a barrier was reached
    by part of a group, it crashed, or it ran past its time limit. ``kind`` says which
    (``"compile"``, ``"barrier"``, ``"crash"``, ``"timeout"``, ``"launch"``, ``"unavailable"``)."""

    def __init__(self, message: str, loc: Loc | None = None, *, kind: str = "launch",
                 source_line: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, loc, source_line=source_line, hint=hint)
        self.kind = kind


@dataclass(frozen=True)
class Compiler:
    """A C++ compiler found on this machine."""

    path: str
    version: str
    is_clang: bool


@functools.lru_cache(maxsize=None)
def _probe_compiler(cxx_env: str | None) -> Compiler | str:
    candidates = [cxx_env] if cxx_env else ["g++", "clang++", "c++"]
    for name in candidates:
        path = shutil.which(name)
        if not path:
            continue
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0:
            version = out.stdout.strip().splitlines()[0] if out.stdout.strip() else path
            return Compiler(path, version, "clang" in out.stdout.lower())
    if cxx_env:
        return f"the C++ compiler named by CXX ({cxx_env!r}) was not found"
    return "no C++ compiler (g++ or clang++) on PATH"


def find_compiler() -> Compiler:
    """The compiler to use (env ``CXX`` first, then g++, clang++); raises EmulatorError."""
    ok, reason = emulator_available()
    if not ok:
        raise EmulatorError(f"the CPU emulator is not available: {reason}", kind="unavailable")
    found = _probe_compiler(os.environ.get("CXX"))
    assert isinstance(found, Compiler)
    return found


def emulator_available() -> tuple[bool, str]:
    """(True, compiler version) where kernels can be emulated here, else (False, reason)."""
    if sys.platform not in ("linux", "darwin"):
        return False, f"unsupported platform {sys.platform} (Linux and macOS only)"
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64", "aarch64", "arm64"):
        return False, f"unsupported CPU architecture {machine}"
    found = _probe_compiler(os.environ.get("CXX"))
    if isinstance(found, str):
        return False, found
    return True, found.version


def cache_dir() -> Path:
    """``$KIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/kir/emulate``, else ``~/.cache/kir/emulate``;
    an EmulatorError naming it when it cannot be created or written (compiled kernels go
    there)."""
    env = os.environ.get("KIR_CACHE_DIR")
    if env:
        root, source = Path(env), "KIR_CACHE_DIR"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg) if xdg else Path.home() / ".cache") / "kir" / "emulate"
        source = "XDG_CACHE_HOME" if xdg else "the default cache folder"
    problem = _unwritable(str(root))
    if problem:
        raise EmulatorError(f"the emulator's cache folder {root} ({source}) cannot be written: "
                            f"{problem}", kind="unavailable",
                            hint="set KIR_CACHE_DIR to a folder you can write; the emulator "
                                 "keeps the kernels it compiles there")
    return root


@functools.lru_cache(maxsize=None)
def _unwritable(root: str) -> str | None:
    """Why ``root`` cannot hold the cache (created when missing), or None. A file is made
    and removed to find out: permission bits do not tell (root, read-only mounts)."""
    if Path(root).exists() and not Path(root).is_dir():
        return "it is a file, not a folder"
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".kir-probe-", dir=root)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


@functools.lru_cache(maxsize=None)
def _headers_digest() -> str:
    digest = hashlib.sha256()
    for name in (*SHIM_HEADERS, RUNTIME_SOURCE):
        digest.update((HEADER_DIR / name).read_bytes())
    return digest.hexdigest()


def _flags(extra: tuple[str, ...]) -> list[str]:
    return [*BASE_FLAGS, *extra]


def _atomic_write_dir(final: Path, build) -> None:
    """Build into a fresh temporary directory beside ``final`` and rename it into place."""
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".tmp", dir=final.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, final)
        except OSError:  # another process won the race: its copy is as good as ours
            pass
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _built_once(comp: Compiler, prefix: str, name: str, flags: list[str],
                inputs: list[str], what: str) -> Path:
    """``name`` compiled by ``comp`` with ``flags`` and ``inputs`` (the arguments before
    ``-o``), cached in a folder keyed by the compiler, the flags, the inputs and the headers'
    contents, built on demand; an EmulatorError saying it could not ``what``."""
    key = hashlib.sha256("\0".join([comp.version, *flags, *inputs,
                                    _headers_digest()]).encode())
    final = cache_dir() / f"{prefix}-{key.hexdigest()[:16]}"
    if not (final / name).exists():
        def build(tmp: Path) -> None:
            cmd = [comp.path, *flags, *inputs, "-o", str(tmp / name)]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0:
                raise EmulatorError(f"could not {what}:\n" + result.stderr[-3000:],
                                    kind="compile")
        _atomic_write_dir(final, build)
    return final / name


def _pch_flags(comp: Compiler, dialect: str, extra: tuple[str, ...]) -> list[str]:
    """Include flags that make the compiler use the precompiled shim header (built on demand)."""
    header = DIALECT_HEADER[dialect]
    pch = _built_once(comp, f"pch-{dialect}", header + (".pch" if comp.is_clang else ".gch"),
                      _flags(extra), ["-x", "c++-header", str(HEADER_DIR / header)],
                      "precompile the emulator header")
    if comp.is_clang:
        return ["-include-pch", str(pch)]
    return ["-I", str(pch.parent)]


def _runtime_object(comp: Compiler) -> Path:
    """The runtime's scheduler and failure path compiled (on demand, once per compiler and
    sources) with the base flags only: the kernels' extra flags (fast math, the checked
    build's instrumentation) are not for it, and nothing it shares with a kernel changes
    layout under them."""
    return _built_once(comp, "runtime", "kir_emu_runtime.o", _flags(()),
                       ["-I", str(HEADER_DIR), "-c", str(HEADER_DIR / RUNTIME_SOURCE)],
                       "compile the emulator runtime")


def compile_shared(source: str, dialect: str, *, tag: str, sources: dict[str, str],
                   extra_flags: tuple[str, ...] = (), include_dirs: tuple[str, ...] = ()) -> Path:
    """Compile generated C++ into a cached shared object and return its path.

    ``sources`` maps the file names used in ``#line`` directives to the user's text, so that a
    compile error is reported at the user's line with the line shown."""
    comp = find_compiler()
    flags = _flags(extra_flags)
    includes = ["-I", str(HEADER_DIR)]
    if dialect == "cuda":
        includes += ["-I", str(CUDA_STUB_DIR)]
    for folder in include_dirs:
        includes += ["-I", folder]
    key = hashlib.sha256("\0".join([source, comp.version, *flags, *includes, dialect,
                                    _headers_digest()]).encode()).hexdigest()[:24]
    safe_tag = re.sub(r"[^A-Za-z0-9_]", "_", tag)[:40]
    so_path = cache_dir() / f"{safe_tag}-{key}.so"
    if so_path.exists():
        return so_path
    pch = _pch_flags(comp, dialect, extra_flags)
    runtime = _runtime_object(comp)
    with tempfile.TemporaryDirectory(prefix="kir-emu-", dir=cache_dir()) as tmp:
        cpp = Path(tmp) / f"{safe_tag}.cpp"
        cpp.write_text(source)
        obj, out = Path(tmp) / "out.o", Path(tmp) / "out.so"
        cmd = [comp.path, *flags, *pch, *includes, "-c", str(cpp), "-o", str(obj)]
        # Linked apart, without the sanitizer flag: it would pull in a runtime we replace.
        link = [comp.path, "-shared", str(obj), str(runtime), "-o", str(out)]
        if sys.platform == "darwin":
            link[2:2] = ["-undefined", "dynamic_lookup"]
        started = time.perf_counter()
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode == 0:
            result = subprocess.run(link, capture_output=True, text=True)
        compile_shared.last_seconds = time.perf_counter() - started  # type: ignore[attr-defined]
        if result.returncode != 0:
            raise compile_error(result.stderr, sources, tag)
        os.replace(out, so_path)
    return so_path


_DIAG = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: (?P<msg>.*)$")


def compile_error(stderr: str, sources: dict[str, str], tag: str) -> EmulatorError:
    """The compiler's first error, located in the user's text where a ``#line`` name matches."""
    lines = stderr.splitlines()
    for index, text in enumerate(lines):
        match = _DIAG.match(text)
        if not match:
            continue
        file = match["file"]
        name = next((n for n in sources if file == n or file.endswith("/" + n)), None)
        context = "\n".join(lines[index:index + 8])
        if name is None:
            return EmulatorError(f"emulated kernel '{tag}' failed to compile:\n{context}",
                                 kind="compile")
        line, col = int(match["line"]), int(match["col"])
        body_lines = sources[name].splitlines()
        source_line = body_lines[line - 1] if 1 <= line <= len(body_lines) else None
        return EmulatorError(f"{match['msg']} (C++ compile of emulated kernel '{tag}')",
                             Loc(name, line, col), kind="compile", source_line=source_line,
                             hint="compiler output:\n" + context)
    return EmulatorError(f"emulated kernel '{tag}' failed to compile:\n{stderr[-3000:]}",
                         kind="compile")
