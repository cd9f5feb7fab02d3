"""Build an emitted CUDA kernel with nvcc for sm_90, as the tests marked ``nvcc`` do."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kir.backends.cuda import standalone_source


def nvcc_sm90(emitted, tmp_path: Path, ptx: bool = False, nvcc: str = "nvcc",
              assemble: bool = True) -> str:
    """Compile ``emitted`` (its MLX translation unit); assert it builds; the PTX text when
    ``ptx``, else "". ``assemble=False`` stops at PTX (a third of the time): enough to check
    C++ that holds no inline assembly, whose errors only ptxas reports."""
    source = tmp_path / f"{emitted.name}.cu"
    source.write_text(standalone_source(emitted))
    to_ptx = ptx or not assemble
    out = tmp_path / (f"{emitted.name}.ptx" if to_ptx else f"{emitted.name}.o")
    done = subprocess.run([nvcc, "-ptx" if to_ptx else "-c", "-arch=sm_90", str(source), "-o",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + "\n" + source.read_text()
    return out.read_text() if ptx else ""
