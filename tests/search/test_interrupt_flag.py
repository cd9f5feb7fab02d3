"""Ctrl-C stops a search even when Python drops the KeyboardInterrupt (raised inside a
finalizer or callback, "Exception ignored in ..."): the search's own SIGINT handler also
sets a flag the engine checks before every candidate. The interrupt here is a real SIGINT
to this process, arriving inside code that swallows it, as a finalizer's would be."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kir.search import SearchConfig, search

from .doubles import FunctionEvaluator
from .search_toy import CTX, toy_evaluate, toy_kernel, toy_registry


# Each test sends or raises a real Ctrl-C in this process (see tests/conftest.py).
pytestmark = pytest.mark.usefixtures("sigint_deliverable")


def test_a_swallowed_ctrl_c_still_stops_the_search():
    calls = []

    def evaluate(kernel):
        calls.append(kernel)
        if len(calls) == 3:
            try:  # the interrupt lands here and is swallowed
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1.0)
            except KeyboardInterrupt:
                pass
        return toy_evaluate(kernel)

    result = search(toy_kernel(), toy_registry(), FunctionEvaluator(evaluate), CTX,
                    SearchConfig(strategy="random", budget=60, seed=0))
    assert result.stopped == "interrupted"
    assert len(calls) == 3  # no candidate after the interrupted one
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_an_interrupt_that_propagates_stops_it_as_before():
    calls = []

    def evaluate(kernel):
        calls.append(kernel)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return toy_evaluate(kernel)

    result = search(toy_kernel(), toy_registry(), FunctionEvaluator(evaluate), CTX,
                    SearchConfig(strategy="random", budget=60, seed=0))
    assert result.stopped == "interrupted" and len(calls) == 2
