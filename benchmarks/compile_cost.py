"""What compiling one search candidate costs on CUDA, two ways: through MLX's
``mx.fast.cuda_kernel`` (NVRTC behind MLX's device headers, on the first call) and compiled
ahead by kir (:mod:`kir.backends.mlx_precompiled`: NVRTC on a lean prelude, then
``mx.fast.precompiled_cuda_kernel``), for a kernel and the search's hints for it (the
candidates a search judges first). Both binaries run once on the same inputs and their
outputs are compared: the two compiles must compute the same thing.

    python3 benchmarks/compile_cost.py examples/softmax.cu --size rows=8192 --size cols=8192

MLX's disk cache of compiled kernels is pointed at a fresh folder so that every MLX compile is
a real one. One JSON line per kernel: ``mlx_first_s`` (MLX's first call, compile included),
``ahead_compile_s`` (kir's NVRTC call), ``ahead_first_s`` (the precompiled kernel's first
call: loading the module and one run), ``run_s`` (a later call), ``max_diff`` between the two
binaries' outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--spec")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--hints", type=int, default=6, help="how many hints to compile")
    parser.add_argument("--out")
    args = parser.parse_args(argv)

    os.environ["MLX_PTX_CACHE_DIR"] = tempfile.mkdtemp(prefix="kir-ptx-")
    import mlx.core as mx
    import numpy as np

    from kir.backends import TARGETS, emit
    from kir.backends.mlx_precompiled import PrecompiledKernel
    from kir.backends.mlx_runner import MLXKernel
    from kir.driver.load import load_kernel, parse_size_overrides
    from kir.driver.registry import load_registry
    from kir.rules import apply_trace, context_for
    from kir.search.hints import hints

    loaded = load_kernel(Path(args.file), spec_path=args.spec,
                         sizes=parse_size_overrides(args.size, option="--size"))
    registry = load_registry()
    ctx = context_for(loaded, TARGETS["cuda"])
    inputs = loaded.bound.make_inputs(0)
    kernels = [("unrewritten", loaded.kernel)]
    for hint in hints(loaded.kernel, registry, ctx)[:args.hints]:
        try:
            kernels.append((hint.name, apply_trace(loaded.kernel, list(hint.steps), registry,
                                                   ctx, strict=True).kernel))
        except Exception as exc:  # noqa: BLE001 - a hint that does not apply is skipped
            print(json.dumps({"kernel": hint.name, "error": str(exc)[:200]}), flush=True)
    rows = []
    for label, kernel in kernels:
        row: dict = {"kernel": label}
        try:
            emitted = emit(kernel, loaded.bound, "cuda")

            def first_call(built):
                arrays, _ = built.prepare(inputs)
                mx.eval(arrays)
                started = time.perf_counter()
                outs = built.launch(arrays)
                mx.eval(outs)
                return time.perf_counter() - started, arrays, outs

            built = MLXKernel(emitted)
            row["mlx_first_s"], arrays, mlx_outs = first_call(built)
            started = time.perf_counter()
            mx.eval(built.launch(arrays))
            row["run_s"] = time.perf_counter() - started
            ahead = PrecompiledKernel(emitted)
            row["ahead_compile_s"] = ahead.compiled.seconds
            row["ahead_first_s"], _, ahead_outs = first_call(ahead)
            row["max_diff"] = max(float(np.max(np.abs(np.array(a) - np.array(b))))
                                  if a.size else 0.0 for a, b in zip(mlx_outs, ahead_outs))
        except Exception as exc:  # noqa: BLE001 - one kernel's failure is its row
            row["error"] = f"{type(exc).__name__}: {exc}"[:400]
        rows.append(row)
        print(json.dumps(row, default=float), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
