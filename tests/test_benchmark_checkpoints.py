"""``benchmarks/search_checkpoints.py``: which kernel a search held as its best after N
evaluations, read from its tuning database in the order the verdicts came (a rejected
candidate counts as an evaluation, never as a best), and the first checkpoint whose kernel,
timed alone, is within 5% of the final result. The timing itself needs a GPU (BENCHMARKS.md
round 23 has its figures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kir.commands.main import main as main_cli
from kir.search.evaluator import Evaluation

from tests.benchmark_scripts import benchmark_script

ROOT = Path(__file__).parents[1]


def _bench():
    return benchmark_script("search_checkpoints")


def test_best_so_far_at_each_checkpoint(tmp_path):
    from kir.search.db import TuningDB, TuningKey

    bench = _bench()
    key = TuningKey.make("f" * 16, {"n": 8}, "cuda", "H200", "test")
    other = TuningKey.make("e" * 16, {"n": 8}, "cuda", "H200", "test")
    verdicts = [((), Evaluation.timed(2.0)),
                (("a{at=0}",), Evaluation.timed(1.0)),
                (("b{at=0}",), Evaluation.rejected("invalid", "wrong")),
                (("c{at=0}",), Evaluation.timed(1.5)),
                (("d{at=0}",), Evaluation.timed(0.7)),
                (("e{at=0}",), Evaluation.timed(0.9))]
    path = tmp_path / "search.db"
    with TuningDB(path) as db:
        db.record(other, "0" * 16, (), Evaluation.timed(0.1))  # another search's one row
        for index, (genome, evaluation) in enumerate(verdicts):
            db.record(key, f"{index:016x}", genome, evaluation)
    rows = bench.checkpoint_traces(str(path), marks=(1, 3, 5, 10))
    assert [(r["at"], r["found_at"], r["search_ms"], r["genome"]) for r in rows] == [
        (1, 1, 2.0, []), (3, 2, 1.0, ["a{at=0}"]), (5, 5, 0.7, ["d{at=0}"]),
        (6, 5, 0.7, ["d{at=0}"])]
    # The result timed again alone may be another kernel: when did the search judge it?
    assert bench.first_judged(str(path), ["c{at=0}"]) == 4
    assert bench.first_judged(str(path), ["z{at=0}"]) is None


def test_within_reads_the_alone_times_not_the_search_times():
    bench = _bench()
    rows = [{"at": 5, "search_ms": 0.9, "alone_median_ms": 1.2},
            {"at": 10, "search_ms": 0.7, "alone_median_ms": None},  # failed to build
            {"at": 25, "search_ms": 0.6, "alone_median_ms": 1.04},
            {"at": 50, "search_ms": 0.5, "alone_median_ms": 1.0}]
    assert bench.within(rows, 1.0) == 25
    assert bench.within(rows, 0.9) is None
    assert bench.within(rows, 1.2, margin=0.0) == 5


def _cuda_available() -> bool:
    from kir.backends.mlx_runner import available_targets

    return "cuda" in available_targets()


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda_available(), reason="needs MLX's CUDA back end and a GPU")
def test_checkpoints_are_timed_in_turns_beside_the_builtin(tmp_path, capsys):
    """A short cost-model search gives the database; its checkpoints and the built-in are
    then timed on the GPU (one round: what is tested is the output, not the figures)."""
    db = tmp_path / "search.db"
    softmax = str(ROOT / "examples" / "softmax.cu")
    sizes = ["--size", "rows=64", "--size", "cols=256"]
    assert main_cli(["compile", softmax, "--search", "--target", "model", *sizes,
                     "--budget", "12", "-q", "--db", str(db), "--out-dir",
                     str(tmp_path / "out")]) == 0
    out = tmp_path / "cp.json"
    assert _bench().main([softmax, *sizes, "--db", str(db), "--marks", "5,10",
                          "--builtin", "softmax", "--rounds", "1", "--out", str(out)]) == 0
    found = json.loads(out.read_text())
    assert [r["at"] for r in found["rows"]][:2] == [5, 10]
    assert all(r.get("alone_median_ms", 0) > 0 for r in found["rows"]), found["rows"]
    assert found["within_5pct_at"] in {None, *(r["at"] for r in found["rows"])}
    assert found["builtin"] == "mx.softmax" and found["ratio"] > 0
