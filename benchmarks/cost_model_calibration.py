"""How far the Apple-GPU cost model is from published measurements (every model time is
*modelled*; no Apple GPU is involved).

For each figure in :data:`kir.cost.published.FIGURES`, and for Apple's and Philip Turner's
peak rates, this models a kir kernel equivalent to the one measured (hand-written kir IR in
``tests/cost/calibration.py``, or an example from ``examples/``) at the published sizes:
the interpreter counts it at small sizes, the counts are extrapolated to the published
sizes, and the model prices them on the chip's profile. It prints one row per figure: the
published time, the modelled time, their ratio (modelled / published: above 1 the model is
slower than the chip was) and the term that bounds the modelled time.

    python benchmarks/cost_model_calibration.py [--only KEY ...] [--markdown]

Takes a minute or two on one core (the attention rows dominate).
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kir.cost import estimate, get_profile  # noqa: E402
from kir.cost.published import FIGURES, SOFTMAX_ROWS, Published  # noqa: E402
from kir.interp import Counters  # noqa: E402
from tests.cost import calibration as cal  # noqa: E402

MICRO = {"groups": 3072, "iters": 256}  # whole waves on every profile used below


@dataclass(frozen=True)
class Row:
    """One comparison: a published time and the workload that models it."""

    figure: Published
    workload: str  # a key of WORKLOADS
    target: dict[str, int]


def _example(name: str, steps: tuple[str, ...] = ()) -> Callable[[], cal.Workload]:
    def build() -> cal.Workload:
        from kir.driver.load import load_kernel
        from kir.driver.registry import load_registry
        from kir.rules import context_for
        from kir.rules.trace import apply_step, parse_step

        base = {"sgemm": {"M": 128, "N": 128, "K": 128, "TILE": 16},
                "softmax": {"rows": 16, "cols": 1024}}[name]
        path = ROOT / "examples" / f"{name}.cu"
        loaded = load_kernel(path, sizes=base)
        kernel, registry = loaded.kernel, load_registry(plugins=False)
        for text in steps:
            kernel = apply_step(kernel, parse_step(text, registry), registry,
                                context_for(loaded))

        def inputs(sizes):
            return load_kernel(path, sizes=dict(sizes)).bound.make_inputs(0)
        return cal.Workload(kernel, inputs, base)
    return build


WORKLOADS: dict[str, Callable[[], cal.Workload]] = {
    "gemm_simd_blocked": lambda: cal.Workload(
        cal.gemm_simd_blocked(), cal.gemm_inputs, {"M": 128, "N": 128, "K": 64, "batch": 1}),
    "gemm_simd_8x8": lambda: cal.Workload(
        cal.gemm_simd_8x8(), cal.gemm_inputs, {"M": 64, "N": 64, "K": 64}),
    "gemm_naive": lambda: cal.Workload(
        cal.gemm_naive(), cal.gemm_inputs, {"M": 64, "N": 64, "K": 64}),
    "sgemm": _example("sgemm"),
    "softmax": _example("softmax"),
    "stream_sum": lambda: cal.Workload(
        cal.stream_sum(), cal.sum_inputs, {"groups": 16, "per_thread": 4}),
    "attention_simd": lambda: cal.Workload(
        cal.attention_simd(), cal.attention_inputs, {"N": 64, "BH": 1}),
    "fma_micro": lambda: cal.Workload(cal.fma_micro(), cal.micro_inputs,
                                      {"groups": 8, "iters": 8}),
    "mma_micro": lambda: cal.Workload(cal.mma_micro(), cal.micro_inputs,
                                      {"groups": 8, "iters": 8}),
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
    built: dict[str, cal.Workload] = {}
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


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="figure keys to model (default: all)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    start = time.monotonic()
    rows = model_rows(set(args.only) if args.only else None)
    print(f"# cost model calibration: {datetime.date.today()}, commit {_commit()}; "
          "every model figure is modelled, not measured")
    if args.markdown:
        print("| figure | source | chip (profile) | published | modelled | modelled / "
              "published | kir kernel | bound |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        f = r["figure"]
        fit = " (fitted)" if f.fitted else ""
        if args.markdown:
            print(f"| {f.what}{fit} | {f.source} | {get_profile(f.profile).display} | "
                  f"{f.ms:.3g} ms | {r['modelled_ms']:.3g} ms modelled | {r['ratio']:.2f} | "
                  f"`{r['workload']}` | {r['bound']} |")
        else:
            print(f"{f.key:22} {f.profile:14} published {f.ms:9.3f} ms  modelled "
                  f"{r['modelled_ms']:9.3f} ms  ratio {r['ratio']:5.2f}  {r['bound']:8} "
                  f"{r['workload']}{fit}")
    print(f"# {len(rows)} rows in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
