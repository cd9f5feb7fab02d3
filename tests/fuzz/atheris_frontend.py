"""Coverage-guided frontend fuzzing with atheris, where it installs (``pip install atheris``).

    python tests/fuzz/atheris_frontend.py -max_total_time=600

Same oracle as the hypothesis fuzzers (:func:`fuzz.cudagen.frontend_outcome`): a kernel, or a
KirError with file:line:col in the input. Under pytest this module only checks that the
harness runs one input, and skips cleanly where atheris is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.cudagen import frontend_outcome  # noqa: E402


def test_one_input(data: bytes = b"__global__ void k(float* y) { y[0] = 1.0f; }") -> None:
    """The atheris entry point: bytes in, decoded as kir's loader decodes files."""
    frontend_outcome(data.decode("utf-8", errors="replace"))


def test_harness_runs_under_pytest() -> None:
    import pytest

    pytest.importorskip("atheris")
    test_one_input()


def main() -> None:
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
