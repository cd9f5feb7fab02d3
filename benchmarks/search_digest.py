"""Digest of cost-model searches over the examples, to show a refactoring kept behaviour.

For each example: a search on the Apple-GPU cost model with a fixed seed and budget at small
sizes, no tuning database; prints one line per example with the winning trace, the best time
and a hash of the whole history (every genome, status and time, in order). Two runs of this
script on two commits print identical lines exactly when the searches behaved identically.

    python benchmarks/search_digest.py [--budget 30] [--seed 3]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SIZES = {"flash_attn": {"H": 1, "N": 64}, "softmax": {"rows": 8, "cols": 128},
         "layernorm": {"rows": 8, "cols": 128}, "sgemm": {}, "reduce": {},
         "selective_scan": {}}


def digest(name: str, budget: int, seed: int) -> str:
    from kir.backends import TARGETS

    from kir.commands.compile_search import make_evaluator
    from kir.driver.load import load_kernel
    from kir.driver.registry import load_registry
    from kir.rules import context_for
    from kir.search import SearchConfig, search
    from kir.search.hints import hints

    loaded = load_kernel(EXAMPLES / f"{name}.cu", sizes=SIZES[name])
    registry = load_registry(plugins=False)
    ctx = context_for(loaded, TARGETS["metal"])
    seeds = [h.steps for h in hints(loaded.kernel, registry, ctx)]
    with make_evaluator(loaded, "model") as evaluator:
        result = search(loaded.kernel, registry, evaluator, ctx,
                        SearchConfig(budget=budget, seed=seed), None, seeds)
    history = hashlib.sha256()
    for record in result.history:
        history.update(repr((record.genome, str(record.status), record.time_ms)).encode())
    steps = " ".join(str(s) for s in result.best_steps) or "(none)"
    return (f"{name}: best {result.best_ms!r} stopped {result.stopped} "
            f"history {history.hexdigest()[:16]} trace {steps}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("examples", nargs="*", default=sorted(SIZES))
    args = parser.parse_args(argv)
    for name in args.examples:
        print(digest(name, args.budget, args.seed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
