"""Compile CUDA source to a cubin with NVRTC, called directly (ctypes), outside MLX.

Why: ``mx.fast.cuda_kernel`` compiles a kernel on its first call, through NVRTC, after
putting MLX's device headers in front of it (``utils.cuh`` and cooperative groups, which pull
in much of libcu++). On the H200 a search candidate's compile took 3.0-3.5 s, most of it those
headers, and it ran inside the GPU worker's first call. A kernel kir emits uses none of them
(its helpers are its own), so kir can compile the same kernel with a lean prelude in a
fraction of that and hand the cubin to ``mx.fast.precompiled_cuda_kernel``
(:mod:`kir.backends.mlx_precompiled`).

The library is the one MLX's CUDA back end links against (``libnvrtc.so.N``): found among the
libraries this process has loaded once MLX is imported, so kir adds no dependency. The
compile options are MLX's own (``jit_module.cpp``): the device's architecture (``sm_XY``, or
``compute_XY`` PTX where this NVRTC cannot produce the device's SASS) and the CUDA toolkit's
include folder.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass
from pathlib import Path

from kir.errors import KirError

# CUdevice_attribute values (cuda.h): the registers a block may use, the compute capability.
_REGISTERS_PER_BLOCK, _CC_MAJOR, _CC_MINOR = 12, 75, 76


@dataclass(frozen=True)
class Compiled:
    """A compiled kernel: the image (cubin, or PTX text when ``is_ptx``) and the seconds
    NVRTC took."""

    image: bytes
    is_ptx: bool
    seconds: float


def _loaded_library(stem: str) -> str | None:
    """The path of a loaded shared library whose file name starts with ``stem`` (MLX loads
    libnvrtc and libcuda when it is imported)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.rsplit(" ", 1)[-1]
        if os.path.basename(path).startswith(stem):
            return path
    return None


def _library(stem: str, fallbacks: tuple[str, ...]) -> ctypes.CDLL:
    for name in (_loaded_library(stem), *fallbacks):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise KirError(f"no {stem} library found in this process or on the loader's path",
                   hint="install MLX's CUDA back end (pip install 'mlx[cuda]'), which "
                        "brings it")


def cuda_home() -> str | None:
    """Where the CUDA toolkit is, as MLX looks for it (CUDA_HOME, CUDA_PATH,
    /usr/local/cuda)."""
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                      "/usr/local/cuda"):
        if candidate and os.path.isdir(candidate):
            return candidate
    return None


class Nvrtc:
    """NVRTC and the device it compiles for (device 0, the one MLX uses)."""

    def __init__(self) -> None:
        self._lib = _library("libnvrtc.so", ("libnvrtc.so", "libnvrtc.so.13",
                                             "libnvrtc.so.12"))
        self._lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        self.version = self._version()
        registers, major, minor = _device_attributes(_REGISTERS_PER_BLOCK, _CC_MAJOR, _CC_MINOR)
        self.capability = (major, minor)
        self.registers_per_block = registers
        self.options = self._options()

    def _version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self._lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)),
                    "nvrtcVersion")
        return major.value, minor.value

    def _options(self) -> list[bytes]:
        major, minor = self.capability
        kind = "sm" if self.makes_sass else "compute"
        options = [f"--gpu-architecture={kind}_{major}{minor}"]
        home = cuda_home()
        if home is not None:
            options.append(f"--include-path={home}/include")
        return [o.encode() for o in options]

    @property
    def makes_sass(self) -> bool:
        """Whether this NVRTC produces the device's machine code (else PTX, which the driver
        compiles when the module loads). MLX's rule: NVRTC 11.8 and later do for any
        device; older ones for devices up to their release."""
        return self.version >= (11, 8)

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            message = self._lib.nvrtcGetErrorString(result).decode()
            raise KirError(f"NVRTC {what} failed: {message}")

    def compile(self, source: str, name: str = "kernel.cu") -> Compiled:
        """Compile ``source``; a :class:`KirError` carrying NVRTC's log when it does not."""
        lib = self._lib
        started = time.perf_counter()
        program = ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(),
                                           name.encode(), 0, None, None),
                    "nvrtcCreateProgram")
        try:
            options = (ctypes.c_char_p * len(self.options))(*self.options)
            result = lib.nvrtcCompileProgram(program, len(self.options), options)
            if result != 0:
                raise KirError(f"NVRTC could not compile {name}: {self._log(program)}")
            getter = ("nvrtcGetCUBINSize", "nvrtcGetCUBIN") if self.makes_sass else \
                ("nvrtcGetPTXSize", "nvrtcGetPTX")
            size = ctypes.c_size_t()
            self._check(getattr(lib, getter[0])(program, ctypes.byref(size)), getter[0])
            image = ctypes.create_string_buffer(size.value)
            self._check(getattr(lib, getter[1])(program, image), getter[1])
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(program))
        return Compiled(image.raw, not self.makes_sass, time.perf_counter() - started)

    def _log(self, program: ctypes.c_void_p) -> str:
        size = ctypes.c_size_t()
        if self._lib.nvrtcGetProgramLogSize(program, ctypes.byref(size)) != 0:
            return "(no log)"
        log = ctypes.create_string_buffer(size.value + 1)
        self._lib.nvrtcGetProgramLog(program, log)
        return log.value.decode(errors="replace").strip()


def _device_attributes(*attributes: int) -> list[int]:
    """Device 0's ``attributes`` (CUdevice_attribute values), from the driver: no context
    needed."""
    cuda = _library("libcuda.so", ("libcuda.so.1", "libcuda.so"))
    device = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        raise KirError("the CUDA driver found no device")
    values = []
    for attribute in attributes:
        value = ctypes.c_int()
        if cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, device) != 0:
            raise KirError(f"the CUDA driver did not say device attribute {attribute}")
        values.append(value.value)
    return values


_NVRTC: Nvrtc | None = None


def nvrtc() -> Nvrtc:
    """This process's :class:`Nvrtc` (made on first use)."""
    global _NVRTC
    if _NVRTC is None:
        _NVRTC = Nvrtc()
    return _NVRTC
