"""``benchmarks/search_loop_rate.py --times-from DB``: the stand-in evaluator answers with the
times a real search stored in its tuning database (by fingerprint; BENCHMARKS.md round 22
replays an H200 attention search this way), and a kernel that search never judged counts as
invalid."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kir.driver.load import load_kernel
from kir.search.evaluator import Evaluation

from tests.benchmark_scripts import benchmark_script

ROOT = Path(__file__).parents[1]


def _bench():
    return benchmark_script("search_loop_rate")


def test_replayed_times_answer_by_fingerprint(tmp_path, capsys):
    from kir.search.db import TuningDB, TuningKey

    bench = _bench()
    base = load_kernel(ROOT / "examples" / "softmax.cu", sizes={"rows": 8, "cols": 100}).kernel
    key = TuningKey.make(base.fingerprint(), {"rows": 8, "cols": 100}, "cuda", "H200", "test")
    path = tmp_path / "recorded.db"
    with TuningDB(path) as db:
        db.record(key, base.fingerprint(), (), Evaluation.timed(2.5))
        db.record(key, "0123456789abcdef", ("some-rule{at=0}",), Evaluation.timed(0.5))
        db.record(key, "fedcba9876543210", ("other{at=0}",),
                  Evaluation.rejected("invalid", "wrong"))
    times = bench.recorded_times(str(path))
    assert times == {base.fingerprint(): 2.5, "0123456789abcdef": 0.5}
    evaluator = bench.InstantEvaluator(times)
    assert evaluator.evaluate(base).time_ms == 2.5
    renamed = dataclasses.replace(base, name=base.name + "_x")  # another fingerprint
    unknown = evaluator.evaluate(renamed)
    assert not unknown.ok and "not judged" in unknown.error
    code = bench.main([str(ROOT / "examples" / "softmax.cu"), "--size", "rows=8", "--size",
                       "cols=100", "--budget", "12", "--times-from", str(path)])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and line["evaluations"] == 12
