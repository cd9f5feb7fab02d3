"""The emulator's worker process: loads compiled kernels and launches them on request.

Run as a script (not through the kir package, so it starts fast and imports only numpy). It
reads length-prefixed pickled requests on stdin and answers on the original stdout; the kernel's
own printf output goes to stderr. The parent kills this process when a launch runs past its
time limit, and notices a crash as end-of-file on the pipe.
"""

import ctypes
import os
import pickle
import signal
import struct
import sys


class Arg(ctypes.Structure):
    _fields_ = [("i", ctypes.c_int64), ("f", ctypes.c_double), ("p", ctypes.c_void_p),
                ("kind", ctypes.c_int32), ("pad", ctypes.c_int32)]


def handle(request, libraries):
    path = request["so"]
    if path not in libraries:
        libraries[path] = ctypes.CDLL(path)
    entry = libraries[path].kir_emu_entry
    entry.restype = ctypes.c_int
    arrays = request["arrays"]
    check = request.get("check")
    if check is not None:
        arrays, keep = guarded(arrays)
        table = (ctypes.c_uint64 * (4 * len(arrays)))()
        for index, (array, role) in enumerate(zip(arrays, check["roles"])):
            table[4 * index:4 * index + 4] = [array.ctypes.data, array.ctypes.data + array.nbytes,
                                              role, index]
        libraries[path].kir_emu_check_begin(table, ctypes.c_int(len(arrays)))
    args = (Arg * max(1, len(request["args"])))()
    held = []  # the structs' bytes, alive until the launch returns
    for slot, (kind, value) in zip(args, request["args"]):
        if kind == "p":
            slot.kind, slot.p = 0, arrays[value].ctypes.data
        elif kind == "n":  # a null pointer
            slot.kind, slot.p = 0, None
        elif kind == "i":
            slot.kind, slot.i = 1, int(value)
        elif kind == "s":  # a struct by value: bytes the kernel's parameter is copied from,
            data, patches = value  # with its pointer members' addresses written in
            struct = ctypes.create_string_buffer(bytes(data), len(data))
            for offset, index in patches:
                ctypes.c_uint64.from_buffer(struct, offset).value = arrays[index].ctypes.data
            held.append(struct)
            slot.kind, slot.p = 3, ctypes.addressof(struct)
        else:
            slot.kind, slot.f = 2, float(value)
    for setter, data in request.get("symbols", ()):  # __constant__ memory, set first
        set_symbol = getattr(libraries[path], setter)
        set_symbol.restype = ctypes.c_int
        if set_symbol(ctypes.c_char_p(bytes(data)), ctypes.c_uint64(len(data))) != 0:
            return {"rc": 2, "err": f"{setter}: {len(data)} bytes is not the symbol's size",
                    "arrays": []}
    dims = (ctypes.c_uint32 * 9)(*request["dims"])
    err = ctypes.create_string_buffer(1 << 16)
    rc = entry(args, ctypes.c_int(len(request["args"])), dims, ctypes.c_uint64(request["smem"]),
               ctypes.c_uint64(request["stack_kib"]), err, ctypes.c_uint64(len(err)))
    sys.stdout.flush()
    reply = {"rc": rc, "err": err.value.decode(errors="replace"),
             "arrays": [arrays[i] for i in request["return"]]}
    if check is not None:
        report = ctypes.create_string_buffer(1 << 20)
        libraries[path].kir_emu_check_end(report, ctypes.c_uint64(len(report)))
        reply["check"] = report.value.decode(errors="replace")
        reply["arrays"] = [a.copy() for a in reply["arrays"]]
    return reply


RED_ZONE = 64 * 1024  # kir_emu_check.h's RED: bytes on each side of a checked buffer


def guarded(arrays):
    """Copies of ``arrays`` each inside its own allocation with a red zone on both sides, for
    the checked build (an access into a red zone is out of bounds). Returns (copies, owners)."""
    import numpy as np

    copies, owners = [], []
    for array in arrays:
        raw = np.zeros(array.nbytes + 2 * RED_ZONE + 64, dtype=np.uint8)
        start = RED_ZONE + (-(raw.ctypes.data + RED_ZONE) % 64)
        copy = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
        copy[...] = array
        copies.append(copy)
        owners.append(raw)
    return copies, owners


def main():
    # Ctrl-C is for the parent to handle; a worker's KeyboardInterrupt traceback is noise.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # printf in kernels must not corrupt the reply stream
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    libraries = {}
    while True:
        header = requests.read(8)
        if len(header) < 8:
            return
        (size,) = struct.unpack("<Q", header)
        request = pickle.loads(requests.read(size))
        try:
            reply = handle(request, libraries)
        except Exception as error:  # reported to the parent, which raises EmulatorError
            reply = {"rc": -1, "err": f"{type(error).__name__}: {error}", "arrays": []}
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        replies.write(struct.pack("<Q", len(data)) + data)
        replies.flush()


if __name__ == "__main__":
    main()
