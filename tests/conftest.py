"""Fixtures shared across the test folders."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest


def _signal_masks() -> str:
    """This process's ignored and blocked signal masks (Linux), for a failure's message."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return "unknown"
    return " ".join(line for line in lines if line.startswith(("SigIgn", "SigBlk")))


@pytest.fixture
def sigint_deliverable():
    """SIGINT handled by Python's default handler and not blocked during the test (children
    inherit both; in some full-suite runs SIGINT reached neither this process nor a child
    it started, and which earlier test leaves it so was not found). Yields the masks as
    they were before, for a failure's message."""
    before = _signal_masks()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield before
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, previous)
