"""Time per launch of MLX Metal kernels on kir's CPU emulator (kir.emulate.metal_kernel).

Two kernels written as MLX users write them: a 1M-element elementwise kernel (one thread per
element, threadgroup 256) and a 4096 x 4096 row sum (one 256-thread threadgroup per row,
simd_sum and threadgroup memory). Each is timed as a plain launch and as a checked launch
(``check=True``, what ``kir check`` runs). The first call compiles (into a fresh cache
folder, so it always does); the per-launch figure is the median of the later calls, the wall
time of the whole call (numpy in and out, the worker round trip).

    python benchmarks/emulate_mlx_kernels.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ["KIR_CACHE_DIR"] = tempfile.mkdtemp(prefix="kir-bench-")  # compile every kernel
atexit.register(shutil.rmtree, os.environ["KIR_CACHE_DIR"], True)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "emulate"))
from mlx_kernels import ROW_SUM  # noqa: E402

from kir.emulate import metal_kernel  # noqa: E402

ELEMENTWISE = """
    uint i = thread_position_in_grid.x;
    if (i >= x_shape[0]) return;
    out[i] = metal::exp(x[i]) * 0.5f + x[i];
"""


def timed(call, repeat: int) -> tuple[float, float]:
    """(first call seconds, median of the next ``repeat`` calls)."""
    started = time.perf_counter()
    call()
    first = time.perf_counter() - started
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return first, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1 << 20).astype(np.float32)
    m = rng.standard_normal((4096, 4096)).astype(np.float32)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    print("| kernel | build | first call, with the compile (s) | per launch (s) |")
    print("| --- | --- | --- | --- |")
    for check in (False, True):
        build = "checked" if check else "plain"
        ew = metal_kernel("bench_elementwise", ["x"], ["out"], ELEMENTWISE, numpy=True,
                          check=check)
        first, per = timed(lambda: ew(inputs=[x], grid=(x.size, 1, 1), threadgroup=(256, 1, 1),
                                      output_shapes=[x.shape], output_dtypes=[np.float32]),
                           args.repeat)
        print(f"| elementwise, 1M elements | {build} | {first:.2f} | {per:.3f} |", flush=True)
        rs = metal_kernel("bench_row_sum", ["x"], ["out"], ROW_SUM, numpy=True, check=check)
        first, per = timed(lambda: rs(inputs=[m], template=[("T", np.float32)],
                                      grid=(256, 4096, 1), threadgroup=(256, 1, 1),
                                      output_shapes=[(4096,)], output_dtypes=[np.float32]),
                           args.repeat)
        print(f"| row sum, 4096 x 4096 | {build} | {first:.2f} | {per:.3f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
