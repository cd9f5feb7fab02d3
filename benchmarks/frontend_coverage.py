"""What share of a collection of CUDA kernels kir's frontend lowers, and why the rest are
refused: every ``__global__`` function (every instance of a macro-generated family) of every
``.cu``/``.cuh`` file under a folder, lowered with its spec where one names it (specs beside
the source as ``X.kir.toml`` or ``X.<name>.kir.toml``) or else with stand-in template
arguments (typename = f32, int = 32).

    python benchmarks/frontend_coverage.py [FOLDER ...] [-I DIR] [--out FILE]

The default folder is kir's own corpus, tests/corpus. Prints one line per kernel (its
refusal's file:line:col and message), the refusals grouped by kind, and the total; checks
that no refusal points into another kernel. BENCHMARKS.md records the output.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import sys
from pathlib import Path

from kir.driver.coverage import reason, survey

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[ROOT / "tests" / "corpus"])
    parser.add_argument("-I", "--include", action="append", type=Path, default=[],
                        help="header folder (repeatable)")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    lines = [f"# kir frontend coverage, {datetime.date.today()}: "
             + " ".join(str(f) for f in args.folders)]
    outcomes = [o for folder in args.folders for o in survey(folder, args.include)]
    width = max((len(f"{o.path.name}:{o.kernel}") for o in outcomes), default=10)
    for o in outcomes:
        name = f"{o.path.name}:{o.kernel}".ljust(width)
        if o.error is not None and o.error.loc is not None:
            o.error.loc = _shorter(o.error.loc)
        extra = " (spec)" if o.spec else (f" (assumed {o.assumed})" if o.assumed else "")
        if o.lowered:
            lines.append(f"  ok       {name}{extra}")
        else:
            where = str(o.error.loc) if o.error.loc else str(o.path)
            first = o.error.message.splitlines()[0]
            flag = "  <-- inside another kernel" if o.misplaced else ""
            lines.append(f"  refused  {name}  {where}: {first}{flag}")
    refused = [o for o in outcomes if not o.lowered]
    lines.append("")
    lines.append("refusals by kind:")
    for text, count in collections.Counter(reason(o.error) for o in refused).most_common():
        lines.append(f"  {count:4d}  {text}")
    lowered = len(outcomes) - len(refused)
    share = 100.0 * lowered / len(outcomes) if outcomes else 0.0
    with_spec = sum(1 for o in outcomes if o.spec)
    lines.append("")
    lines.append(f"lowered {lowered} of {len(outcomes)} kernels ({share:.0f}%); {with_spec} "
                 f"have a spec; {sum(o.misplaced for o in refused)} refusals point into "
                 "another kernel")
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    return 1 if any(o.misplaced for o in refused) else 0


def _shorter(loc):
    """The location with its file relative to the working folder when it is inside it."""
    from dataclasses import replace

    try:
        return replace(loc, file=str(Path(loc.file).resolve().relative_to(Path.cwd())))
    except (ValueError, TypeError):
        return loc


if __name__ == "__main__":
    sys.exit(main())
