"""Which search strategy runs when none is asked for: ``evolve`` with the cost model (its
verdicts are deterministic, so a search repeats from its seed), ``steady`` when timing on a
GPU (timings vary anyway, and generations wait for their slowest candidate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.api import searching
from kir.api.searching import SearchRequest, SearchSession, default_strategy
from kir.driver.load import load_kernel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 4, "cols": 64})


def test_default_strategy_by_target():
    assert default_strategy("model") == "evolve"
    assert default_strategy("cuda") == "steady"
    assert default_strategy("metal") == "steady"


def test_the_cost_model_searches_by_generations(loaded):
    notes: list[str] = []
    session = SearchSession(loaded, SearchRequest("model", 4, db=False), notes.append)
    assert session.config.strategy == "evolve"
    assert not any("steady" in n for n in notes)


def test_a_strategy_asked_for_is_kept(loaded):
    session = SearchSession(loaded, SearchRequest("model", 4, strategy="steady", db=False))
    assert session.config.strategy == "steady"


def test_a_gpu_search_is_steady_and_says_so(loaded, monkeypatch):
    """The session as on an NVIDIA GPU: the target resolved to "cuda" and the evaluator
    replaced by the cost model's (no GPU here; the session only hands it on)."""
    from kir.measure.model import ModelEvaluator

    monkeypatch.setattr(searching, "resolve_target", lambda requested: ("cuda", None))
    monkeypatch.setattr(searching, "make_evaluator",
                        lambda loaded, target, sizes: ModelEvaluator(loaded))
    notes: list[str] = []
    session = SearchSession(loaded, SearchRequest(None, 4, db=False), notes.append)
    assert session.config.strategy == "steady"
    assert any("strategy steady" in n and "--strategy evolve" in n for n in notes), notes
    asked = SearchSession(loaded, SearchRequest(None, 4, strategy="evolve", db=False))
    assert asked.config.strategy == "evolve"
