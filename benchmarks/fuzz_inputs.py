"""The long fuzz runs of what a user hands kir besides CUDA: specs, traces and rules.

    python benchmarks/fuzz_inputs.py spec --count 100000
    python benchmarks/fuzz_inputs.py trace --count 100000
    python benchmarks/fuzz_inputs.py rule --count 100000 [--rule-s 0.05]

Each input is numbered by a seed (``tests/fuzz/specgen.py``, ``tracegen.py``, ``rulegen.py``
say what they generate), so a failure replays with ``--start SEED --count 1``. A failure is an
input whose oracle fails (another exception than a located KirError, a bad round trip) or
that takes longer than ``--timeout`` seconds (a hang past its limit); it is saved to
``--failures``. Rules run under ``--rule-s`` seconds of CPU time per guarded call (six times
as long on the wall clock); a spec's numpy warnings (an overflow making inputs) are failures.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz.cudagen import FuzzFailure  # noqa: E402

from kir.limits import Limits, configured, time_limit  # noqa: E402


class _Hang(Exception):
    pass


def _run_one(kind: str, seed: int, folder: Path) -> tuple[str, bytes]:
    """The outcome of input ``seed`` and its bytes (for saving a failure)."""
    if kind == "spec":
        from fuzz.specgen import spec_input, spec_outcome

        data, overrides, kernel = spec_input(seed)
        return spec_outcome(data, overrides, kernel, folder), data
    if kind == "trace":
        from fuzz.tracegen import trace_input, trace_outcome

        name, data = trace_input(seed)
        return trace_outcome(name, data, folder), data
    from fuzz.rulegen import rule_outcome, rule_source

    source = rule_source(seed)
    return rule_outcome(source, folder, seed), source.encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["spec", "trace", "rule"])
    parser.add_argument("--count", type=int, default=10_000, help="inputs to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds per input before it counts as a hang")
    parser.add_argument("--rule-s", type=float, default=0.05,
                        help="the rule limit (CPU seconds per guarded call) for rule inputs")
    parser.add_argument("--failures", default="fuzz-failures", help="where failing inputs go")
    args = parser.parse_args(argv)
    if args.kind == "spec":
        warnings.simplefilter("error", RuntimeWarning)

    counts: collections.Counter[str] = collections.Counter()
    slowest = (0.0, -1)
    begin = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix=f"kir-fuzz-{args.kind}-"))
    # Generated rules run under a short limit (many of them loop); the catalog's rules in a
    # replayed trace under the default one, as `kir apply --trace` runs them.
    limits = Limits(rule_s=args.rule_s) if args.kind == "rule" else Limits()
    with configured(limits):
        for seed in range(args.start, args.start + args.count):
            started = time.perf_counter()
            data = b""
            try:
                with time_limit(args.timeout, lambda overrun: _Hang()):
                    outcome, data = _run_one(args.kind, seed, folder)
                counts[outcome] += 1
                failure = None
            except FuzzFailure as exc:
                failure = str(exc)
                data = exc.text.encode("utf-8", "replace")
            except _Hang:
                failure = f"no answer within {args.timeout:g} s"
            except Exception as exc:  # noqa: BLE001 - the harness itself must not stop
                failure = f"harness: {type(exc).__name__}: {exc}"
            elapsed = time.perf_counter() - started
            slowest = max(slowest, (elapsed, seed))
            if failure is not None:
                counts["FAILURE"] += 1
                out = Path(args.failures)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"{args.kind}-seed{seed}").write_bytes(data)
                print(f"seed {seed}: {failure.splitlines()[0][:200]}", flush=True)
            done = seed - args.start + 1
            if done % 10_000 == 0:
                print(f"  {done} inputs, {time.perf_counter() - begin:.0f} s, {dict(counts)}",
                      flush=True)
    wall = time.perf_counter() - begin
    print(f"{args.kind} inputs: {args.count} (seeds {args.start}..{args.start + args.count - 1})")
    print(f"outcomes: {dict(counts)}; failures (other exceptions, errors without location, "
          f"bad round trips, hangs past {args.timeout:g} s): {counts['FAILURE']}")
    print(f"wall: {wall:.0f} s ({1000 * wall / max(args.count, 1):.1f} ms per input), "
          f"slowest input: seed {slowest[1]} at {slowest[0]:.2f} s")
    return 1 if counts["FAILURE"] else 0


if __name__ == "__main__":
    sys.exit(main())
