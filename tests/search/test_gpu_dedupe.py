"""The GPU evaluator answers a candidate whose emitted call it judged already: no interpreter
validation, no GPU job, the first one's verdict. Runs MLXEvaluator on the CPU emulator (no
GPU here); the kernels differ as IR but print the same code."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kir import ir
from kir.backends import emit
from kir.driver.load import load_kernel
from kir.measure.gpu.jobs import EmulatorRunner
from kir.measure.mlx import MLXEvaluator
from kir.measure.same_source import source_key

from .test_evaluators import broken_constant

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"rows": 8, "cols": 100}


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(EXAMPLES / "softmax.cu", sizes=SIZES)


def loops(kernel: ir.Kernel, **fields) -> ir.Kernel:
    """``kernel`` with ``fields`` set on every loop."""
    def fix(node):
        if isinstance(node, ir.For):
            return dataclasses.replace(node, **{k: v(node) if callable(v) else v
                                                for k, v in fields.items()})
        return None
    return dataclasses.replace(kernel, body=ir.transform(kernel.body, fix))


def unrolled(kernel):
    """Every loop marked ``unroll``: prints ``#pragma unroll``."""
    return loops(kernel, kind="unroll", unroll=None)


def hinted(kernel):
    """Every loop serial with a full-unroll hint: prints ``#pragma unroll`` too."""
    return loops(kernel, kind="serial", unroll=0)


def relabelled(kernel):
    """Other loop labels: they print as comments only."""
    return loops(kernel, label=lambda loop: f"M{loop.label}")


class Counting(MLXEvaluator):
    """The real evaluator, counting the kernels it validates on the interpreter."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.validated: list[str] = []

    def check(self, kernel):
        self.validated.append(kernel.fingerprint())
        return super().check(kernel)

    def check_many(self, kernels):
        self.validated += [kernel.fingerprint() for kernel in kernels]
        return super().check_many(kernels)


def evaluator(loaded) -> Counting:
    return Counting(loaded, "cuda", runner=EmulatorRunner(), warmup=0, repeat=2, workers=1,
                    gpu_timeout_s=30.0, gpu_startup_s=60.0)


def test_the_same_emitted_source_is_judged_once(loaded):
    first, second = unrolled(loaded.kernel), hinted(loaded.kernel)
    assert first.fingerprint() != second.fingerprint()
    assert emit(first, loaded.bound, "cuda").source == emit(second, loaded.bound, "cuda").source
    with evaluator(loaded) as ev:
        judged = ev.evaluate(first)
        answered = ev.evaluate(second)
        assert ev.stats["gpu_jobs"] == 1 and ev.stats["source_duplicates"] == 1
        assert ev.validated == [first.fingerprint()]  # the second never reached the interpreter
        phases = ev.phases()
    assert judged.ok and judged.details["build_s"] > 0
    assert answered.status == judged.status and answered.time_ms == judged.time_ms
    assert answered.details["same_source_as"] == first.fingerprint()
    assert answered.details["max_abs_err"] == judged.details["max_abs_err"]
    assert "build_s" not in answered.details  # no compile was spent on it
    assert phases.counts["source duplicates"] == 1 and phases.counts["GPU jobs"] == 1
    assert phases.seconds["compile"] > 0


def test_a_batch_judges_the_first_of_each_source_and_answers_in_order(loaded):
    base = loaded.kernel
    wrong = broken_constant(base)
    batch = [base, unrolled(base), hinted(base), relabelled(base), wrong, relabelled(wrong)]
    with evaluator(loaded) as ev:
        verdicts = list(ev.evaluate_many(batch))
        assert ev.validated == [k.fingerprint() for k in (base, unrolled(base), wrong)]
        assert ev.stats["gpu_jobs"] == 2 and ev.stats["source_duplicates"] == 3
        again = ev.evaluate(relabelled(unrolled(base)))  # a later batch: answered as well
        assert ev.stats["gpu_jobs"] == 2 and ev.stats["source_duplicates"] == 4
    assert [v.status for v in verdicts] == ["ok", "ok", "ok", "ok", "invalid", "invalid"]
    assert verdicts[2].time_ms == verdicts[1].time_ms
    assert verdicts[2].details["same_source_as"] == unrolled(base).fingerprint()
    assert verdicts[3].time_ms == verdicts[0].time_ms
    assert verdicts[3].details["same_source_as"] == base.fingerprint()
    assert verdicts[5].error == verdicts[4].error
    assert verdicts[5].details["same_source_as"] == wrong.fingerprint()
    assert again.details["same_source_as"] == unrolled(base).fingerprint()


def test_the_key_holds_what_validation_depends_on_beyond_the_source(loaded):
    """The interpreter validates at other sizes, where the grid comes from the launch's
    expressions and a specialized kernel is judged at its own sizes only: the same code under
    another launch is another candidate."""
    base = loaded.kernel

    def key(kernel):
        return source_key(emit(kernel, loaded.bound, "cuda"), kernel)

    assert key(base) == key(relabelled(base))
    specialized = dataclasses.replace(base, launch=dataclasses.replace(base.launch,
                                                                       specialized=True))
    assert emit(specialized, loaded.bound, "cuda").source == emit(base, loaded.bound,
                                                                  "cuda").source
    assert key(specialized) != key(base)
    fixed_grid = dataclasses.replace(base, launch=dataclasses.replace(
        base.launch, grid=(str(SIZES["rows"]), "1", "1")))
    assert emit(fixed_grid, loaded.bound, "cuda").grid == emit(base, loaded.bound, "cuda").grid
    assert key(fixed_grid) != key(base)
