"""The checked build of an emulated Metal kernel: its compiler flags and its report.

``kir_emu_check.h`` observes every load and store of the kernel (bounds of each buffer, reads of
outputs before any write, threadgroup memory read unwritten or touched by two threads between
the same barriers) and reports each finding with the instruction's offset in the shared object.
This module turns that report into :class:`Finding` values located at the user's Metal line:
the kernel is built with line tables (``-g1``) and ``#line`` directives name the user's files,
so ``addr2line`` maps an instruction to ``name.metal:LINE``.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from kir.backends.emulate.launch import runtime_error
from kir.backends.emulate.toolchain import EmulatorError

from kir.errors import KirError, Loc, source_line_of

# -fsanitize=thread only for its instrumentation: kir_emu_check.h defines the callbacks, and
# the link step adds no sanitizer runtime. Function entry/exit hooks are not needed.
CHECK_FLAGS = ("-DKIR_EMU_CHECK=1", "-fsanitize=thread", "-g1",
               "--param", "tsan-instrument-func-entry-exit=0")
INPUT, OUTPUT, OUTPUT_FILLED = 0, 1, 2  # kir_emu_check.h's Role


def role_of(slot_kind: str, init_value: float | None) -> int:
    """The checked build's role of a launch-argument slot ("in", "shape", ..., "out")."""
    if slot_kind != "out":
        return INPUT
    return OUTPUT if init_value is None else OUTPUT_FILLED


@dataclass(frozen=True)
class Finding:
    """One problem the checked build saw, at a line of the user's Metal source."""

    kind: str  # "bounds", "uninit-output", "uninit-threadgroup", "race-threadgroup", ...
    message: str
    loc: Loc | None = None
    source_line: str | None = None
    hint: str | None = None
    count: int = 1  # how many accesses of this kind the same instruction made

    def __str__(self) -> str:
        return str(KirError(self.message, self.loc, source_line=self.source_line, hint=self.hint))


HINTS = {
    "uninit-output": "MLX does not initialise outputs: write every element before reading it, "
                     "or pass init_value= to the call",
    "uninit-threadgroup": "either a barrier is missing between the writes and this read, or "
                          "the threadgroup is partial (at a ragged edge MLX launches only the "
                          "grid's threads) and the threads that would write are missing: guard "
                          "the read or fill the missing elements",
    "race-threadgroup": "two threads touch this threadgroup memory between the same barriers, at "
                        "least one writing: put threadgroup_barrier(mem_flags::mem_threadgroup) "
                        "between the write and the other access",
    "bounds": "guard the access with the buffer's size (a ragged last threadgroup has threads "
              "past the end of the data)",
}


class Report:
    """The checked build's report of one launch, with what is needed to explain it."""

    def __init__(self, text: str, so_path: str, sources: dict[str, str], names: Sequence[str],
                 buffers: Sequence[np.ndarray]) -> None:
        self.rows = [parse_row(line) for line in text.splitlines() if line.strip()]
        self.so_path = so_path
        self.sources = sources
        self.names = list(names)
        self.buffers = list(buffers)

    def locate(self, pc: int) -> tuple[Loc | None, str | None]:
        """The user's line of an instruction (its return address as reported)."""
        for file, line in frames(self.so_path, pc - 1):
            name = next((n for n in self.sources if file == n or file.endswith("/" + n)), None)
            if name is not None:
                text = source_line_of(self.sources[name], line)
                col = 1 + len(text) - len(text.lstrip()) if text else 1
                return Loc(name, line, col), text
        return None, None

    def element(self, buffer: int, offset: int) -> str:
        array = self.buffers[buffer]
        return f"`{self.names[buffer]}` element {offset // array.itemsize}"

    def findings(self) -> list[Finding]:
        """The non-fatal findings, one per (kind, instruction, buffer)."""
        found = []
        for row in self.rows:
            if row.get("") != "finding":
                continue
            kind = row["kind"]
            loc, text = self.locate(int(row["pc"], 16))
            where = f"thread ({row['thread']}) of threadgroup ({row['group']})"
            buffer, offset = int(row["buffer"]), int(row["offset"])
            if kind == "uninit-output":
                message = (f"{where} reads {self.element(buffer, offset)} before any thread "
                           "wrote it")
            else:
                declared = self.declared(row["declared"])
                if kind == "uninit-threadgroup":
                    message = (f"{where} reads threadgroup memory {declared} at byte {offset}, "
                               "which no thread of its threadgroup wrote")
                else:
                    message = (f"race on threadgroup memory {declared} at byte {offset}: {where} "
                               f"and thread {row['other']} (linear index) access it between "
                               "the same barriers, one of them writing")
            count = int(row["count"])
            if count > 1:
                message += f" ({count} such accesses)"
            found.append(Finding(kind, message, loc, text, HINTS[kind], count))
        return found

    def declared(self, where: str) -> str:
        """``tile`` (declared at k.metal:3) from the report's ``file:line``."""
        file, _, line = where.rpartition(":")
        name = next((n for n in self.sources if file == n or file.endswith("/" + n)), None)
        text = source_line_of(self.sources[name], int(line)) if name else None
        match = re.search(r"(\w+)\s*\[", text or "")
        label = f"`{match.group(1)}`" if match else "(a threadgroup variable)"
        return f"{label} (declared at {name or file}:{line})"

    def threadgroup_memory(self) -> list[tuple[int, str, int]]:
        """(bytes, file, line) of every threadgroup variable the kernel declared."""
        out = []
        for row in self.rows:
            if row.get("") == "threadgroup":
                file, _, line = row["declared"].rpartition(":")
                name = next((n for n in self.sources if file == n or file.endswith("/" + n)),
                            file)
                out.append((int(row["bytes"]), name, int(line)))
        return out

    def unwritten(self) -> dict[int, tuple[int, int]]:
        """Buffer index -> (elements never written, the first of them), for outputs without an
        init_value."""
        out = {}
        for row in self.rows:
            if row.get("") == "unwritten":
                size = self.buffers[int(row["buffer"])].itemsize
                out[int(row["buffer"])] = (-(-int(row["bytes"]) // size), int(row["first"]) // size)
        return out

    def launch_error(self, message: str) -> EmulatorError:
        """The EmulatorError of a failed launch: an out-of-bounds access is explained and
        located here; anything else as :func:`runtime_error` does."""
        match = re.search(r"out-of-bounds (\w+) \[kir-check bounds ([^\]]*)\]", message)
        if not match:
            return runtime_error(message, self.sources)
        fields = dict(word.split("=", 1) for word in match.group(2).split())
        buffer, offset = int(fields["buffer"]), int(fields["offset"])
        array = self.buffers[buffer]
        side = "before the start of" if offset < 0 else "past the end of"
        group = re.search(r"threadgroup \(([\d,]+)\)", message)
        text = (f"out-of-bounds {match.group(1)}: thread ({fields['thread']}) of threadgroup "
                f"({group.group(1) if group else '?'}) accesses {self.element(buffer, offset)}, "
                f"{side} the buffer ({array.size} elements)")
        loc, line = self.locate(int(fields["pc"], 16))
        return EmulatorError(text, loc, kind="bounds", source_line=line, hint=HINTS["bounds"])


def parse_row(line: str) -> dict[str, str]:
    """``finding kind=x pc=0x1`` -> {"": "finding", "kind": "x", "pc": "0x1"}."""
    head, *words = line.split()
    row = {"": head}
    for word in words:
        key, _, value = word.partition("=")
        row[key] = value
    return row


@functools.lru_cache(maxsize=4096)
def frames(so_path: str, address: int) -> tuple[tuple[str, int], ...]:
    """(file, line) of an address in a shared object, innermost inlined frame first; empty when
    ``addr2line`` (binutils) is not installed."""
    tool = shutil.which("addr2line")
    if not tool:
        return ()
    done = subprocess.run([tool, "-e", so_path, "-i", hex(address)], capture_output=True,
                          text=True)
    out = []
    for line in done.stdout.splitlines():
        match = re.match(r"^(.*):(\d+)(?: \(discriminator \d+\))?$", line.strip())
        if match and match.group(2) != "0":
            out.append((match.group(1), int(match.group(2))))
    return tuple(out)
