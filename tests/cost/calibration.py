"""Published Apple-GPU figures and the kir kernels that model them, counted at small sizes and
extrapolated to the published ones: shared by ``benchmarks/cost_model_calibration.py`` (the
whole table) and the cost-model tests (the quick rows). The hand-written kernels are in
:mod:`tests.cost.calibration_kernels`; examples come from ``examples/`` with rule steps
applied; :func:`kir.cost.extrapolate.extrapolate` carries counts to the published sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from kir.cost import estimate, get_profile
from kir.cost.extrapolate import extrapolate
from kir.cost.published import FIGURES, SOFTMAX_ROWS, Published
from kir.interp import Counters, run_kernel
from kir.ir import Kernel
from tests.cost.calibration_kernels import (
    attention_inputs,
    attention_simd,
    fma_micro,
    gemm_inputs,
    gemm_naive,
    gemm_simd_8x8,
    gemm_simd_blocked,
    micro_inputs,
    mma_micro,
    stream_sum,
    sum_inputs,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# ------------------------------------------------------------------------------ counting


@dataclass(frozen=True)
class Workload:
    """A kernel to count: how to build its inputs at given sizes, its base sizes (small
    enough to interpret) and the factor each moved run scales one size by."""

    kernel: Kernel
    inputs: Callable[[Mapping[str, int]], dict[str, object]]
    base: Mapping[str, int]
    step: Mapping[str, int] = field(default_factory=dict)  # size -> factor (default 2)

    def count(self, sizes: Mapping[str, int]) -> Counters:
        """Exact counters of one run at ``sizes``."""
        counters = Counters()
        run_kernel(self.kernel, self.inputs(sizes), dict(sizes), counters=counters)
        return counters

    def counters_at(self, target: Mapping[str, int], runs_per_size: int = 2) -> Counters:
        """Counters at ``target``: counted there if it is the base, else extrapolated from
        the base run and ``runs_per_size`` runs per size that differs (the size times the
        step, then times the step again)."""
        target = {**self.base, **target}
        base = self.count(self.base)
        if dict(target) == dict(self.base):
            return base
        moved = []
        for name, value in target.items():
            if value == self.base[name]:
                continue
            for power in range(1, runs_per_size + 1):
                sizes = {**self.base, name: self.base[name] * self.step.get(name, 2) ** power}
                moved.append((sizes, self.count(sizes)))
        return extrapolate((dict(self.base), base), moved, target, self.kernel)


# ------------------------------------------------------------------------- published rows


EXAMPLE_BASES = {"sgemm": {"M": 128, "N": 128, "K": 128, "TILE": 16},
                 "softmax": {"rows": 16, "cols": 1024}, "reduce": {"n": 1 << 16}}
MICRO = {"groups": 3072, "iters": 256}  # whole waves on every profile used below


@dataclass(frozen=True)
class Row:
    """One comparison: a published time and the workload that models it."""

    figure: Published
    workload: str  # a key of WORKLOADS
    target: dict[str, int]


def example(name: str, steps: tuple[str, ...] = (),
            base: Mapping[str, int] | None = None) -> Callable[[], Workload]:
    """A builder of the Workload of ``examples/NAME.cu`` with rule ``steps`` applied."""
    def build() -> Workload:
        from kir.driver.load import load_kernel
        from kir.driver.registry import load_registry
        from kir.rules import context_for
        from kir.rules.trace import apply_step, parse_step

        sizes = dict(base or EXAMPLE_BASES[name])
        path = EXAMPLES / f"{name}.cu"
        loaded = load_kernel(path, sizes=sizes)
        kernel, registry = loaded.kernel, load_registry(plugins=False)
        for text in steps:
            kernel = apply_step(kernel, parse_step(text, registry), registry,
                                context_for(loaded))

        def inputs(sizes):
            return load_kernel(path, sizes=dict(sizes)).bound.make_inputs(0)
        return Workload(kernel, inputs, sizes)
    return build


WORKLOADS: dict[str, Callable[[], Workload]] = {
    "gemm_simd_blocked": lambda: Workload(
        gemm_simd_blocked(), gemm_inputs, {"M": 128, "N": 128, "K": 64, "batch": 1}),
    "gemm_simd_8x8": lambda: Workload(
        gemm_simd_8x8(), gemm_inputs, {"M": 64, "N": 64, "K": 64}),
    "gemm_naive": lambda: Workload(
        gemm_naive(), gemm_inputs, {"M": 64, "N": 64, "K": 64}),
    "sgemm": example("sgemm"),
    "softmax": example("softmax"),
    "stream_sum": lambda: Workload(
        stream_sum(), sum_inputs, {"groups": 16, "per_thread": 4}),
    "attention_simd": lambda: Workload(
        attention_simd(), attention_inputs, {"N": 64, "BH": 1}),
    "fma_micro": lambda: Workload(fma_micro(), micro_inputs, {"groups": 8, "iters": 8}),
    "mma_micro": lambda: Workload(mma_micro(), micro_inputs, {"groups": 8, "iters": 8}),
}


def _peak_rows() -> list[Row]:
    """Apple's FP32 peaks and [PT]'s simdgroup_matrix rate, as times of the probes."""
    fma_flops = MICRO["groups"] * 256 * MICRO["iters"] * 32
    mma_flops = MICRO["groups"] * 4 * MICRO["iters"] * 4 * 1024
    rows = []
    for profile, tflops, source in (("apple-m1-max", 10.4, "[A-M1PM]"),
                                    ("apple-m2", 3.6, "[A-M2]")):
        rows.append(Row(Published(f"fp32-peak-{profile[6:]}", f"FP32 peak {tflops} TFLOPS "
                                  "(FMA probe)", profile, (), fma_flops / tflops / 1e9,
                                  source), "fma_micro", dict(MICRO)))
    m1max = get_profile("apple-m1-max")
    rows.append(Row(Published("mma-rate-m1-max", f"simdgroup_matrix F32 8x8 at 20.14 clocks "
                              f"= {m1max.mma_tflops:.2f} TFLOPS (MMA probe)", "apple-m1-max",
                              (), mma_flops / m1max.mma_tflops / 1e9, "[PT]"),
                    "mma_micro", dict(MICRO)))
    return rows


def _figure_rows() -> list[Row]:
    rows = []
    for f in FIGURES:
        sizes = dict(f.sizes)
        if f.key.startswith(("mfa-", "mps-")):
            n = sizes["n"]
            rows.append(Row(f, "gemm_simd_blocked", {"M": n, "N": n, "K": n, "batch": 1}))
        elif f.key.startswith("gm-"):
            n = sizes["n"]
            workload = {"gm-naive": "gemm_naive", "gm-tile16": "sgemm",
                        "gm-simd": "gemm_simd_8x8"}[f.key]
            rows.append(Row(f, workload, {"M": n, "N": n, "K": n}))
        elif "-sum-" in f.key:
            # 128e6 floats = 1000 groups x 256 threads x 125 float4s
            rows.append(Row(f, "stream_sum", {"groups": 1000, "per_thread": 125}))
        elif "-softmax-" in f.key:
            rows.append(Row(f, "softmax", {"rows": SOFTMAX_ROWS, "cols": 1024}))
        elif "-bmm-" in f.key:
            rows.append(Row(f, "gemm_simd_blocked", sizes))
        elif "-sdpa-" in f.key:
            rows.append(Row(f, "attention_simd", sizes))
    return rows


def model_rows(only: set[str] | None = None) -> list[dict]:
    """Model every row (or the keys in ``only``); counters are shared between rows that
    model the same workload at the same sizes."""
    rows = [r for r in _peak_rows() + _figure_rows() if not only or r.figure.key in only]
    built: dict[str, Workload] = {}
    counted: dict[tuple, Counters] = {}
    out = []
    for row in rows:
        key = (row.workload, tuple(sorted(row.target.items())))
        if key not in counted:
            workload = built.setdefault(row.workload, WORKLOADS[row.workload]())
            counted[key] = workload.counters_at(row.target)
        cost = estimate(counted[key], row.figure.profile)
        out.append({"figure": row.figure, "workload": row.workload, "target": row.target,
                    "modelled_ms": cost.time_ms, "ratio": cost.time_ms / row.figure.ms,
                    "bound": cost.bound, "cost": cost})
    return out



__all__ = ["EXAMPLE_BASES", "MICRO", "WORKLOADS", "Row", "Workload", "example", "model_rows"]
