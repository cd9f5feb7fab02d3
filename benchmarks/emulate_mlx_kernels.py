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


def cpu_seconds() -> float:
    """CPU time of this process and of the emulator's worker process (Linux /proc): on a
    shared machine it says what a launch costs better than the wall clock does."""
    from kir.backends.emulate import worker

    total = time.process_time()
    if worker._worker is not None and Path(f"/proc/{worker._worker.process.pid}/stat").exists():
        fields = Path(f"/proc/{worker._worker.process.pid}/stat").read_text().rsplit(")", 1)[1]
        utime, stime = fields.split()[11:13]
        total += (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")
    return total


def timed(call, repeat: int) -> tuple[float, float, float]:
    """(first call seconds, median wall and median CPU seconds of the next ``repeat``)."""
    started = time.perf_counter()
    call()
    first = time.perf_counter() - started
    walls, cpus = [], []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), cpu_seconds()
        call()
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_seconds() - cpu)
    return first, statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1 << 20).astype(np.float32)
    m = rng.standard_normal((4096, 4096)).astype(np.float32)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    print("| kernel | build | first call, with the compile (s) | per launch, wall (s) | "
          "per launch, CPU (s) |")
    print("| --- | --- | --- | --- | --- |")
    for check in (False, True):
        build = "checked" if check else "plain"
        ew = metal_kernel("bench_elementwise", ["x"], ["out"], ELEMENTWISE, numpy=True,
                          check=check)
        def run_elementwise() -> None:
            ew(inputs=[x], grid=(x.size, 1, 1), threadgroup=(256, 1, 1),
               output_shapes=[x.shape], output_dtypes=[np.float32])

        first, per, cpu = timed(run_elementwise, args.repeat)
        print(f"| elementwise, 1M elements | {build} | {first:.2f} | {per:.3f} | {cpu:.3f} |",
              flush=True)
        rs = metal_kernel("bench_row_sum", ["x"], ["out"], ROW_SUM, numpy=True, check=check)
        def run_row_sum() -> None:
            rs(inputs=[m], template=[("T", np.float32)], grid=(256, 4096, 1),
               threadgroup=(256, 1, 1), output_shapes=[(4096,)], output_dtypes=[np.float32])

        first, per, cpu = timed(run_row_sum, args.repeat)
        print(f"| row sum, 4096 x 4096 | {build} | {first:.2f} | {per:.3f} | {cpu:.3f} |",
              flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
