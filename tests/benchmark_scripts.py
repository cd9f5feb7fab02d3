"""Load a script of ``benchmarks/`` as a module, for the tests of its pure parts (the
scripts are not a package: each runs as ``python3 benchmarks/NAME.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py``, imported afresh under the module name ``name``."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
