"""What a compiled CUDA kernel (a cubin, the ELF image NVRTC or ptxas makes) says about
itself: the registers each thread uses, and whether a block of the launch's size fits the
device's register file.

Why: a kernel whose block needs more registers than the device has fails at launch ("too
many resources requested for launch"), and in MLX that failure also breaks the process's
CUDA graph, so a search's GPU worker had to be replaced after each such candidate (two in a
181-candidate attention search on the H200). Read from the cubin before the first launch, the
same fact is a clear verdict on the candidate and costs nothing else.

The register count is the ``EIATTR_REGCOUNT`` attribute of the image's ``.nv.info``
section (format ``EIFMT_SVAL``: the kernel's symbol index, then its count), the figure
``ptxas -v`` prints as "Used N registers"; the tests compare the two.
"""

from __future__ import annotations

import struct

from kir.errors import KirError

_EIATTR_REGCOUNT = 0x2F
_EIFMT_SVAL = 4
# Registers are allocated to a warp in units of 256 (NVIDIA's CUDA occupancy calculator,
# "register allocation unit size", every compute capability from 3.0 on).
REGISTER_UNIT = 256


class LaunchLimitError(KirError):
    """The kernel cannot launch with this block size on this device."""


def _sections(image: bytes) -> list[tuple[str, int, int, int]]:
    """(name, offset, size, link) of each section of a little-endian ELF64 image."""
    shoff = struct.unpack_from("<Q", image, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", image, 0x3A)
    raw = [struct.unpack_from("<IIQQQQII", image, shoff + i * entsize) for i in range(count)]
    names_offset = raw[names_index][4]

    def name(at: int) -> str:
        start = names_offset + at
        return image[start:image.index(b"\0", start)].decode(errors="replace")
    return [(name(r[0]), r[4], r[5], r[6]) for r in raw]


def registers_per_thread(image: bytes, kernel: str) -> int | None:
    """The registers one thread of ``kernel`` uses, from a cubin; None when ``image`` is not
    a cubin (PTX text) or does not say."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:  # ELF64, little-endian
        return None
    try:
        sections = _sections(image)
        by_name = {s[0]: s for s in sections}
        _, sym_offset, sym_size, strings = by_name[".symtab"]
        str_offset = sections[strings][1]
        index = None
        for i in range(sym_size // 24):  # Elf64_Sym
            name_at = struct.unpack_from("<I", image, sym_offset + 24 * i)[0]
            start = str_offset + name_at
            if image[start:image.index(b"\0", start)] == kernel.encode():
                index = i
                break
        if index is None or ".nv.info" not in by_name:
            return None
        _, offset, size, _ = by_name[".nv.info"]
        at, end = offset, offset + size
        while at + 4 <= end:
            fmt, attr, length = image[at], image[at + 1], struct.unpack_from("<H", image,
                                                                             at + 2)[0]
            if fmt != _EIFMT_SVAL:
                at += 4  # the other formats carry at most two bytes, in the header itself
                continue
            if attr == _EIATTR_REGCOUNT and length == 8:
                symbol, count = struct.unpack_from("<II", image, at + 4)
                if symbol == index:
                    return count
            at += 4 + length
    except (KeyError, IndexError, ValueError, struct.error):
        return None
    return None


def block_registers(per_thread: int, threads: int) -> int:
    """The registers a block of ``threads`` takes: whole warps, each allocated a multiple of
    :data:`REGISTER_UNIT`."""
    warps = -(-threads // 32)
    per_warp = -(-per_thread * 32 // REGISTER_UNIT) * REGISTER_UNIT
    return warps * per_warp


def check_block_fits(image: bytes, kernel: str, threads: int, registers_per_block: int) -> None:
    """A :class:`LaunchLimitError` when a block of ``threads`` needs more registers than the
    device gives a block; nothing when it fits or the image does not say."""
    per_thread = registers_per_thread(image, kernel)
    if per_thread is None:
        return
    needed = block_registers(per_thread, threads)
    if needed > registers_per_block:
        fits = 32
        while block_registers(per_thread, fits * 2) <= registers_per_block and fits < threads:
            fits *= 2
        raise LaunchLimitError(
            f"the kernel uses {per_thread} registers a thread: a block of {threads} threads "
            f"needs {needed}, more than the {registers_per_block} the device gives a block",
            hint=f"launch blocks of at most {fits} threads, or keep fewer values live")
