"""kir's corpus on an NVIDIA GPU: for every corpus kernel with a spec, kir's emitted CUDA
(no rewrites) through MLX's cuda_kernel against the ORIGINAL kernel compiled by NVRTC through
CuPy, both against the numpy reference, at the spec's default and ragged sizes.

    python benchmarks/corpus_gpu.py [--out corpus_gpu.md] [--only NAME ...] [--seed 5]

Prints a table (one row per kernel and size: PASS or the max error, or the error that
stopped a run) and writes it as Markdown to ``--out``; exit 1 when any check fails. Needs
MLX with its CUDA back end and CuPy. Run it from outside the repository root when kir is
installed non-editable (the root's ``kir/`` folder would shadow the installed package).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import traceback
from pathlib import Path

from kir.driver.load import load_kernel
from kir.driver.runners import RUNNERS, copy_inputs
from kir.errors import KirError
from kir.spec.compare import compare_outputs

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"


def _verdict(result) -> str:
    return "PASS" if result.ok else f"FAIL {result.max_abs_err:.2e}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:90]


def check(spec: Path, sizes: dict, seed: int) -> dict:
    """One kernel at one size: the three comparisons (or the error that stopped them)."""
    row: dict = {"kernel": spec.name.removesuffix(".kir.toml")}
    try:
        loaded = load_kernel(CORPUS / (spec.name.split(".")[0] + ".cu"), spec_path=spec,
                             sizes=sizes)
    except KirError as exc:
        row["error"] = _short(exc)
        return row
    row["sizes"] = ", ".join(f"{k}={v}" for k, v in loaded.bound.sizes.items())
    inputs = loaded.bound.make_inputs(seed)
    reference = loaded.bound.reference(copy_inputs(inputs))

    def tolerance(out):
        return loaded.bound.tolerance(loaded.bound.spec.args[out].dtype)

    outputs = {}
    for label, target in (("emitted", "mlx-cuda"), ("original", "cupy-original")):
        try:
            outputs[label] = RUNNERS[target](loaded, copy_inputs(inputs))
            row[f"{label} vs ref"] = _verdict(compare_outputs(outputs[label], reference,
                                                              tolerance))
        except Exception as exc:  # noqa: BLE001 - each failure is a row, not a crash
            row[f"{label} vs ref"] = _short(exc)
            row.setdefault("trace", traceback.format_exc(limit=3))
    if len(outputs) == 2:
        row["emitted vs original"] = _verdict(compare_outputs(outputs["emitted"],
                                                              outputs["original"], tolerance))
    return row


COLUMNS = ("kernel", "sizes", "emitted vs ref", "original vs ref", "emitted vs original")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("corpus_gpu.md"))
    parser.add_argument("--only", nargs="*", help="spec names (e.g. llm_train.adamw)")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    specs = sorted(CORPUS.glob("*.kir.toml"))
    if args.only:
        specs = [s for s in specs if s.name.removesuffix(".kir.toml") in args.only]
    rows = []
    for spec in specs:
        first = load_kernel(CORPUS / (spec.name.split(".")[0] + ".cu"), spec_path=spec)
        for sizes in ({}, dict(first.spec.ragged)):
            row = check(spec, sizes, args.seed)
            rows.append(row)
            print("  ".join(str(row.get(c, row.get("error", ""))) for c in COLUMNS), flush=True)
    failed = [r for r in rows if any(not str(r.get(c, "PASS")).startswith("PASS")
                                     for c in COLUMNS[2:]) or "error" in r]
    lines = [f"# kir corpus on the GPU ({datetime.date.today()}, {platform.node()})", "",
             "Emitted CUDA through MLX and the original through CuPy/NVRTC, each against "
             "the numpy reference and against each other.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [str(r.get(c, r.get("error", "") if c == "sizes" else "")) for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"{len(rows) - len(failed)} of {len(rows)} kernel-size pairs pass all three "
              "checks."]
    for r in failed:
        if "trace" in r:
            lines += ["", f"`{r['kernel']}` ({r.get('sizes', '')}):", "```", r["trace"], "```"]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"\n{len(rows) - len(failed)} of {len(rows)} pass; table in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
