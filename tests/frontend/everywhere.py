"""One frontend test kernel checked against its numpy reference on every target: the
interpreter, the emulator running kir's CUDA and Metal, and the emulator running the
original file (what a real C++ compiler makes of it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kir.backends.emulate import emulator_available

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target

TARGETS = ["interp", "emulate-cuda", "emulate-metal", "emulate-original"]


def check_everywhere(path: Path, target: str, sizes: list[dict], seed: int) -> None:
    """``path``'s kernel at each of ``sizes`` (the spec's own: ``{}``) on ``target``."""
    if target != "interp" and not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    for at in sizes:
        outcome = check_on_target(load_kernel(path, sizes=at), target, seed=seed)
        assert outcome.result.ok, (at, outcome.result.describe())
