"""The search's note when the spec's tolerance alone refused a precision-trading rule."""

from __future__ import annotations

from kir.api.precision_note import precision_refusals
from kir.search.records import EvalRecord

MISMATCH = "C: MISMATCH  max abs err 0.031, max rel err 1.57e+03, 32418/4194304 elements"


def _record(index: int, genome: tuple[str, ...], status: str, error: str = "") -> EvalRecord:
    return EvalRecord(index, genome, f"fp{index}", status, 1.0 if status == "ok" else None,
                      error, None)


def test_a_rule_every_candidate_of_which_failed_on_outputs_is_named():
    history = [_record(0, (), "ok"),
               _record(1, ("warp-tile-matmul{loop=L1,config=64x64x16/2x2}",
                           "tf32-matrix{at=all}"), "invalid", MISMATCH),
               _record(2, ("tf32-matrix{at=all}",), "invalid", MISMATCH),
               _record(3, ("warp-tile-matmul{loop=L1,config=64x64x16/2x2}",), "ok")]
    (line,) = precision_refusals(history)
    assert line.startswith("2 candidate(s) using tf32-matrix failed the spec's tolerance")
    assert "max abs err 0.031" in line and "widen `tolerance`" in line


def test_nothing_is_said_when_the_rule_passed_once_or_failed_otherwise():
    passed_once = [_record(0, ("fast-math{at=all}",), "invalid", MISMATCH),
                   _record(1, ("fast-math{at=all}", "unroll-loop{loop=L0,factor=4}"), "ok")]
    crashed = [_record(0, ("tf32x3-matrix{at=all}",), "crash", "GPU fault")]
    not_precision = [_record(0, ("unroll-loop{loop=L0,factor=4}",), "invalid", MISMATCH)]
    for history in (passed_once, crashed, not_precision, []):
        assert precision_refusals(history) == []
