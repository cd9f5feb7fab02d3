"""Time building the search's hints for kernels: the recipes every `kir compile --search`
applies before its first evaluation (each step's sites analysed, each step applied), on the
CPU, one process. Prints one line per kernel: seconds (best of ``--repeat``), hints built.

    python3 benchmarks/hint_build_time.py examples/flash_attn.cu:H=2,N=64 \\
        tests/rules/data/flash_attn_rows.cu:H=2,N=64 examples/layernorm.cu
"""

from __future__ import annotations

import argparse
import time

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.rules import context_for
from kir.search.hints import hints


def _parse(arg: str) -> tuple[str, dict[str, int]]:
    """``FILE`` or ``FILE:NAME=VALUE,...`` (spec sizes)."""
    path, _, sizes = arg.partition(":")
    return path, {k: int(v) for k, v in (kv.split("=") for kv in sizes.split(",") if kv)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="+", help="FILE or FILE:NAME=VALUE,...")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    registry = load_registry()
    for arg in args.kernels:
        path, sizes = _parse(arg)
        loaded = load_kernel(path, sizes=sizes or None)
        ctx = context_for(loaded)
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            built = hints(loaded.kernel, registry, ctx)
            best = min(best, time.perf_counter() - started)
        print(f"{arg}: {best:.2f} s, {len(built)} hints")


if __name__ == "__main__":
    main()
