"""The long frontend fuzz run: N inputs through ``load_cuda``, counting outcomes.

Each input is numbered by a seed (``tests/fuzz/cudagen.py``: three in four mutate an example
kernel, one in four is generated), so any failure replays with ``--start SEED --count 1``.
The oracle: a kernel that prints and parses back to itself, or a KirError with file:line:col
in the input; anything else, or an input taking longer than ``--timeout`` seconds, is a
failure, saved to ``--failures`` (default ``fuzz-failures/``).

    python benchmarks/fuzz_frontend.py --count 100000
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz.cudagen import FuzzFailure, examples, frontend_outcome, input_for  # noqa: E402


class _Hang(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001 - signal handler signature
    raise _Hang()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="inputs to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per input")
    parser.add_argument("--failures", default="fuzz-failures", help="where failing inputs go")
    args = parser.parse_args(argv)

    sources = examples()
    counts: collections.Counter[str] = collections.Counter()
    slowest = (0.0, -1)
    total_chars = 0
    signal.signal(signal.SIGALRM, _alarm)
    begin = time.perf_counter()
    for seed in range(args.start, args.start + args.count):
        text = input_for(seed, sources)
        total_chars += len(text)
        started = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
        try:
            counts[frontend_outcome(text)] += 1
            failure = None
        except FuzzFailure as exc:
            failure = str(exc)
        except _Hang:
            failure = f"no answer within {args.timeout:g} s"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed = time.perf_counter() - started
        slowest = max(slowest, (elapsed, seed))
        if failure is not None:
            counts["FAILURE"] += 1
            folder = Path(args.failures)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"seed{seed}.cu").write_text(text)
            print(f"seed {seed}: {failure.splitlines()[0][:200]}", flush=True)
        done = seed - args.start + 1
        if done % 10_000 == 0:
            print(f"  {done} inputs, {time.perf_counter() - begin:.0f} s, {dict(counts)}",
                  flush=True)
    wall = time.perf_counter() - begin
    print(f"inputs: {args.count} (seeds {args.start}..{args.start + args.count - 1}), "
          f"{total_chars / max(args.count, 1):.0f} characters on average")
    print(f"kernels: {counts['kernel']}, KirErrors with file:line:col: {counts['error']}, "
          f"failures (other exceptions, errors without location, hangs, bad round trips): "
          f"{counts['FAILURE']}")
    print(f"wall: {wall:.0f} s ({1000 * wall / max(args.count, 1):.1f} ms per input), "
          f"slowest input: seed {slowest[1]} at {slowest[0]:.2f} s")
    return 1 if counts["FAILURE"] else 0


if __name__ == "__main__":
    sys.exit(main())
