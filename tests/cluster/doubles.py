"""Test doubles for remote evaluation: a GPU runner whose times do not depend on the clock."""

from __future__ import annotations

import hashlib

from kir.measure.cases import copy_inputs
from kir.measure.gpu.jobs import EmulatorRunner


class SteadyClockEmulator(EmulatorRunner):
    """The CPU emulator of emitted source for building, running and checking candidates, with
    a time that is a function of the emitted source alone (between 1 and 2 ms): two searches
    with the same seed make the same choices, wherever their candidates run, so a test can
    compare a cluster's search with the local pools' exactly. Not a measure of anything."""

    def time(self, built, inputs, warmup, repeat, give_up_ms=None):
        from kir.backends.mlx_runner import Timing

        built(copy_inputs(inputs))  # it must still run
        digest = hashlib.sha256(built.emitted.source.encode()).hexdigest()
        time_ms = 1.0 + int(digest[:6], 16) / 0xFFFFFF
        return Timing(time_ms, time_ms, time_ms, 0.0, max(repeat, 1))
