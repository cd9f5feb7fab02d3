"""How many GPU workers a search starts (kir.api.searching.gpu_worker_count): a generation at
once, no more than the spare cores, no more than half the available memory holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir import limits
from kir.api import searching
from kir.api.searching import GPU_WORKER_BASE_BYTES, gpu_worker_count
from kir.driver.load import load_kernel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 1024, "cols": 1024})


def test_one_worker_per_candidate_of_a_generation_within_the_cores(loaded, monkeypatch):
    monkeypatch.setattr(limits, "available_memory", lambda: 1 << 40)
    assert gpu_worker_count(loaded, spare_cores=12) == 12
    assert gpu_worker_count(loaded, spare_cores=64) == 14  # population 16 less 2 elite
    assert gpu_worker_count(loaded, spare_cores=64, generation=6) == 6
    assert gpu_worker_count(loaded, spare_cores=0) == 1


def test_memory_bounds_the_workers(loaded, monkeypatch):
    each = GPU_WORKER_BASE_BYTES + loaded.bound.memory_needed() // 2
    monkeypatch.setattr(limits, "available_memory", lambda: 2 * 3 * each + 1)
    assert gpu_worker_count(loaded, spare_cores=12) == 3
    monkeypatch.setattr(limits, "available_memory", lambda: each)
    assert gpu_worker_count(loaded, spare_cores=12) == 1  # always one
    monkeypatch.setattr(limits, "available_memory", lambda: None)  # cannot tell: cores only
    assert gpu_worker_count(loaded, spare_cores=5) == 5


def test_the_cli_evaluator_uses_it(loaded, monkeypatch):
    """make_evaluator (the CLI's) sizes its pool with gpu_worker_count over the cores the
    search process leaves (all but two). The real MLXEvaluator refuses a target this machine lacks (CI
    has no GPU), so a stand-in that records its arguments takes its place."""
    seen = {}

    class Recording:
        def __init__(self, loaded, **kwargs):
            seen.update(kwargs)

    import kir.measure.mlx as mlx_module

    monkeypatch.setattr(mlx_module, "MLXEvaluator", Recording)
    monkeypatch.setattr(searching.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(limits, "available_memory", lambda: 1 << 40)
    searching.make_evaluator(loaded, "cuda")
    assert seen["workers"] == 7 and seen["gpu_workers"] == 14  # validating: half of 16 - 2


def test_a_search_starts_its_gpu_workers_before_building_its_hints(loaded, monkeypatch):
    """SearchSession.run calls the evaluator's start() (MLXEvaluator: the GPU workers start)
    before it builds the hints, so the two overlap. The model evaluator stands in for the
    GPU one (none here); only the order of the two calls is under test."""
    import kir.search.hints as hints_module
    from kir.api.searching import SearchRequest, SearchSession
    from kir.measure.model import ModelEvaluator

    order = []
    real_hints = hints_module.hints
    monkeypatch.setattr(hints_module, "hints",
                        lambda *a, **k: order.append("hints") or real_hints(*a, **k))

    class Starting(ModelEvaluator):
        def start(self):
            order.append("start")

    session = SearchSession(loaded, SearchRequest(target="model", budget=2, db=False))
    session.evaluator = Starting(loaded)
    session.run()
    assert order == ["start", "hints"]
