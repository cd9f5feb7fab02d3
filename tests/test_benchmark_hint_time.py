"""``benchmarks/hint_build_time.py`` (cited by BENCHMARKS.md round 9) runs as its docstring
says: one line per kernel with the seconds and the number of hints built."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_hint_build_time_prints_seconds_and_hints_per_kernel():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "hint_build_time.py"),
         "examples/softmax.cu:rows=4,cols=96", "examples/reduce.cu"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"examples/softmax\.cu:rows=4,cols=96: \d+\.\d\d s, [1-9]\d* hints",
                        lines[0]), lines[0]
    assert lines[1].startswith("examples/reduce.cu: ")
