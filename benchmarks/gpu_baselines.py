"""The six examples on an NVIDIA GPU: kir's emitted CUDA (no rewrites) through MLX's
cuda_kernel, the ORIGINAL kernel through CuPy, and MLX's built-in where one exists.

    python benchmarks/gpu_baselines.py [--out DIR] [--repeat 10] [--only NAME ...]

For each example it first checks correctness at the spec's default and ragged sizes (emitted
CUDA on MLX against kir's interpreter; the original through CuPy against the numpy reference),
then times all three at the benchmark sizes below, where the emitted kernel is also compared
with the original's output. Median of ``--repeat`` runs after 3 warm-ups. Writes
``gpu_baselines.json`` and ``gpu_baselines.md`` to ``--out``.

Run it from outside the repository root when kir is installed non-editable (the root's
``kir/`` folder would shadow the installed package, which maps ``kir.backends`` etc.).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
from kir.backends import emit
from kir.backends.mlx_runner import MLXKernel, time_kernel
from kir.frontends.cuda import template_params
from mlx_builtins import BENCH_SIZES, builtin  # benchmarks/ is the script's folder

from kir.driver.load import load_kernel
from kir.driver.runners import copy_inputs, run_interp
from kir.spec.compare import compare_outputs

ROOT = Path(__file__).resolve().parent.parent



def time_mlx(thunk, repeat: int) -> float:
    import mlx.core as mx

    for _ in range(3):
        mx.eval(thunk())
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        mx.eval(thunk())
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class CupyOriginal:
    """The user's original .cu compiled by nvcc through CuPy, launched with the spec's grid."""

    def __init__(self, loaded) -> None:
        import cupy as cp

        self.cp = cp
        self.loaded = loaded
        params = template_params(loaded.source, str(loaded.path), loaded.kernel.name)
        values = loaded.bound.template_values()
        expr = loaded.kernel.name
        if params:
            expr += "<" + ", ".join(str(values[p]) for p in params) + ">"
        # NVRTC (the only CuPy back end that resolves C++ kernel names) cannot read the host
        # headers the file includes; drop those lines and give it the two macros they defined.
        code = "\n".join("" if line.lstrip().startswith("#include") else line
                         for line in loaded.source.splitlines())
        module = cp.RawModule(code=code, options=("-std=c++17",
                                                  "-DINFINITY=__int_as_float(0x7f800000)",
                                                  "-DFLT_MAX=3.402823466e+38f"),
                              name_expressions=[expr])
        self.function = module.get_function(expr)

    def args(self, inputs: dict) -> tuple[list, dict]:
        bound = self.loaded.bound
        args, device = [], {}
        for name, spec in bound.spec.args.items():
            value = inputs[name]
            if spec.is_buffer:
                device[name] = self.cp.asarray(value)
                args.append(device[name])
            else:
                args.append(np.dtype(np.float32 if spec.dtype == "f32" else np.int32).type(value))
        return args, device

    def launch(self, args: list) -> None:
        b = self.loaded.bound
        self.function(tuple(b.grid), tuple(b.block), tuple(args), shared_mem=b.shared_bytes)

    def __call__(self, inputs: dict) -> dict:
        args, device = self.args(copy_inputs(inputs))
        self.launch(args)
        self.cp.cuda.Device().synchronize()
        return {n: self.cp.asnumpy(device[n]) for n in self.loaded.bound.outputs}

    def time(self, inputs: dict, repeat: int) -> float:
        cp = self.cp
        times = []
        for i in range(3 + repeat):
            args, _ = self.args(copy_inputs(inputs))  # inout buffers start fresh every run
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            self.launch(args)
            stop.record()
            stop.synchronize()
            if i >= 3:
                times.append(cp.cuda.get_elapsed_time(start, stop))
        return statistics.median(times)


def tolerance_of(loaded):
    return lambda out: loaded.bound.tolerance(loaded.bound.spec.args[out].dtype)


def check_small(name: str) -> dict:
    """Correctness at the spec's default and ragged sizes."""
    path = ROOT / "examples" / f"{name}.cu"
    results = {}
    first = load_kernel(path)
    for label, sizes in (("default", {}), ("ragged", dict(first.spec.ragged))):
        loaded = load_kernel(path, sizes=sizes)
        inputs = loaded.bound.make_inputs(1)
        want = run_interp(loaded, copy_inputs(inputs))
        got = MLXKernel(emit(loaded.kernel, loaded.bound, "cuda"))(copy_inputs(inputs))
        emitted = compare_outputs(got, want, tolerance_of(loaded))
        reference = loaded.bound.reference(copy_inputs(inputs))
        original = compare_outputs(CupyOriginal(loaded)(inputs), reference, tolerance_of(loaded))
        results[label] = {"emitted_vs_interp": emitted.ok, "emitted_err": emitted.max_abs_err,
                          "original_vs_reference": original.ok,
                          "original_err": original.max_abs_err}
    return results


def bench(name: str, repeat: int) -> dict:
    path = ROOT / "examples" / f"{name}.cu"
    loaded = load_kernel(path, sizes=BENCH_SIZES[name])
    inputs = loaded.bound.make_inputs(2)
    kernel = MLXKernel(emit(loaded.kernel, loaded.bound, "cuda"))
    original = CupyOriginal(loaded)
    got = kernel(copy_inputs(inputs))
    want = original(inputs)
    agree = compare_outputs(got, want, tolerance_of(loaded))
    row = {"sizes": BENCH_SIZES[name], "emitted_matches_original": agree.ok,
           "max_abs_diff": agree.max_abs_err,
           "emitted_ms": time_kernel(kernel, inputs, warmup=3, repeat=repeat).median_ms,
           "original_cupy_ms": original.time(inputs, repeat)}
    found = builtin(name, inputs)
    if found:
        label, thunk = found
        row["builtin"] = label
        row["builtin_ms"] = time_mlx(thunk, repeat)
        row["emitted_over_builtin"] = row["builtin_ms"] / row["emitted_ms"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--only", nargs="*", default=list(BENCH_SIZES))
    args = parser.parse_args()
    import mlx.core as mx

    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "mlx": mx.__version__, "device": str(mx.default_device()),
              "machine": platform.node(), "examples": {}}
    for name in args.only:
        entry = {}
        try:
            entry["check"] = check_small(name)
            entry["bench"] = bench(name, args.repeat)
        except Exception as exc:  # keep measuring the others; the error is reported
            entry["error"] = f"{type(exc).__name__}: {exc}"
        report["examples"][name] = entry
        print(name, json.dumps(entry), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_baselines.json").write_text(json.dumps(report, indent=2))
    lines = ["| example | sizes | kir emitted (MLX cuda_kernel) | original (CuPy) | MLX built-in | "
             "emitted / built-in speed | checks |", "|---|---|---|---|---|---|---|"]
    for name, entry in report["examples"].items():
        if "error" in entry:
            lines.append(f"| {name} | | error: {entry['error']} | | | | |")
            continue
        b, c = entry["bench"], entry["check"]
        checks = all(v["emitted_vs_interp"] and v["original_vs_reference"] for v in c.values())
        sizes = " ".join(f"{k}={v}" for k, v in b["sizes"].items())
        built = f"{b['builtin']} {b['builtin_ms']:.3f} ms" if "builtin" in b else "—"
        ratio = f"{b['emitted_over_builtin']:.3f}×" if "builtin" in b else "—"
        verdict = "pass" if checks and b["emitted_matches_original"] else "FAIL"
        lines.append(f"| {name} | {sizes} | {b['emitted_ms']:.3f} ms | "
                     f"{b['original_cupy_ms']:.3f} ms | {built} | {ratio} | {verdict} |")
    (out / "gpu_baselines.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
