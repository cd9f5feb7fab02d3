"""How many candidates per second the search's own loop can propose: the search run against
an evaluator that answers at once, so what remains is building the hints, breeding genomes,
applying their rules, verifying and fingerprinting the results — the ceiling on evaluation
throughput whatever the device (the GPU workers only add to it). No GPU needed.

    python3 benchmarks/search_loop_rate.py examples/flash_attn.cu --size B=1 --size H=16 \\
        --size N=1024 --size D=64 [--budget 100] [--target cuda] [--profile]

The stand-in evaluator's "time" of a kernel is a fixed function of its fingerprint, so two
runs with one seed take the same path and their wall times compare. ``--times-from DB``
answers instead with the times a real search measured (its tuning database, e.g. from the
H200), so the population evolves as it did there (towards the large tensor-core kernels
whose rewriting costs most); a candidate that search never judged counts as invalid.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


class InstantEvaluator:
    """Answers every candidate at once with a made-up time derived from its fingerprint."""

    modelled = False
    target = "none"
    device = "none (benchmarks/search_loop_rate.py)"

    def __init__(self, times: dict[str, float] | None = None) -> None:
        self.stats: dict = {}
        self.times = times

    def evaluate(self, kernel):
        from kir.search.evaluator import Evaluation, Status

        if self.times is None:
            return Evaluation.timed(1 + int(kernel.fingerprint()[:8], 16) % 1000 / 1000)
        known = self.times.get(kernel.fingerprint())
        if known is None:
            return Evaluation.rejected(Status.INVALID, "not judged by the recorded search")
        return Evaluation.timed(known)

    def evaluate_many(self, kernels):
        for kernel in kernels:
            yield self.evaluate(kernel)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--spec")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--target", default="cuda", choices=["cuda", "metal"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--times-from", metavar="DB",
                        help="a real search's tuning database: answer with its times")
    parser.add_argument("--profile", action="store_true", help="print the top of a cProfile")
    parser.add_argument("--sort", default="tottime", help="the profile's order (cumulative...)")
    parser.add_argument("--top", type=int, default=25, help="how many profile lines")
    args = parser.parse_args(argv)

    from kir.backends import TARGETS
    from kir.driver.load import load_kernel, parse_size_overrides
    from kir.driver.registry import load_registry
    from kir.rules import context_for
    from kir.search import SearchConfig
    from kir.search.engine import search
    from kir.search.hints import hints

    loaded = load_kernel(Path(args.file), spec_path=args.spec,
                         sizes=parse_size_overrides(args.size, option="--size"))
    registry = load_registry()
    ctx = context_for(loaded, TARGETS[args.target])
    profile = None
    if args.profile:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    started = time.perf_counter()
    seeds = [hint.steps for hint in hints(loaded.kernel, registry, ctx)]
    hinted = time.perf_counter()
    times = recorded_times(args.times_from) if args.times_from else None
    result = search(loaded.kernel, registry, InstantEvaluator(times), ctx,
                    SearchConfig(budget=args.budget, time_limit_s=3600, seed=args.seed),
                    None, seeds)
    done = time.perf_counter()
    if profile is not None:
        import pstats

        profile.disable()
        pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)
    evaluations = len(result.history)
    print(json.dumps({"file": args.file, "sizes": args.size, "hints_s": round(hinted - started, 2),
                      "recipes": len(seeds), "search_s": round(done - hinted, 2),
                      "evaluations": evaluations,
                      "per_s": round(evaluations / (done - hinted), 2),
                      "with_hints_per_s": round(evaluations / (done - started), 2)}))
    return 0


def recorded_times(path: str) -> dict[str, float]:
    """Fingerprint -> time of every valid candidate in a tuning database (any key)."""
    from kir.search.db import TuningDB

    with TuningDB(path) as db:
        return {row.fingerprint: row.evaluation.time_ms
                for run in db.runs() for row in db.rows(run.key)
                if row.evaluation.ok and row.evaluation.time_ms is not None}


if __name__ == "__main__":
    raise SystemExit(main())
