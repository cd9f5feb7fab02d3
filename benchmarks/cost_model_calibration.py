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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kir.cost import get_profile  # noqa: E402
from tests.cost.calibration import model_rows  # noqa: E402

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
