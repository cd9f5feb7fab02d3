"""Search throughput on one GPU machine: the local GpuPool against the Ray executor.

    python benchmarks/ray_gpu_throughput.py [--kernel examples/softmax.cu] [--target cuda]
        [--budget 60] [--gpu-workers 4] [--actors 1] [--out DIR]

Runs the same search (same kernel, seed and budget, no tuning database, so every candidate is
evaluated) three ways and reports evaluations per second of wall time:

1. ``local``: ``MLXEvaluator`` with its CPU validation pool and a ``GpuPool`` of
   ``--gpu-workers`` processes (what ``kir compile --search`` does on this machine);
2. ``ray``: a local Ray cluster on this machine (all its CPUs, ``--actors`` units of the
   device resource), validation as Ray CPU tasks and the GPU work in ``--actors`` device
   actors with ``--gpu-workers / --actors`` GPU processes each — the generational search, as
   the default;
3. ``ray-steady``: the same executor with the steady-state strategy (no generation barrier).

Every GPU process of every run logs when it runs a kernel and when it times one; the script
checks that no timing overlapped any other process's run or timing (the per-device timing lock
held across actors and workers) and says so in the output. Writes ``ray_gpu_throughput.json``
and ``.md`` under ``--out``.

Needs MLX with a GPU back end and Ray (``pip install -e ".[ray]"``; on a machine without
network, see ``benchmarks/pack_ray_bundle.sh``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from kir.measure.gpu.jobs import EmulatorRunner, MLXRunner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class TimingLog:
    """Mixin for a runner: log each process's runs and timings (start, end) to a file, one
    JSON per line, so the overlap check can see them."""

    def __init__(self, log: str = "") -> None:
        super().__init__()
        self.log = log

    def __getstate__(self) -> dict:
        return {"log": self.log}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["log"])

    def _note(self, what: str, start: float) -> None:
        with open(self.log, "a") as out:
            out.write(json.dumps([what, os.getpid(), start, time.time()]) + "\n")

    def run(self, built, case):
        start = time.time()
        try:
            return super().run(built, case)
        finally:
            self._note("run", start)

    def time(self, built, inputs, warmup, repeat, give_up_ms=None):
        start = time.time()
        try:
            return super().time(built, inputs, warmup, repeat, give_up_ms)
        finally:
            self._note("time", start)


class LoggingMLXRunner(TimingLog, MLXRunner):
    """MLX on this machine's GPU, logged."""


class LoggingEmulatorRunner(TimingLog, EmulatorRunner):
    """The CPU emulator, logged: ``--emulator`` dry runs where there is no GPU (its times
    are the emulator's, not a GPU's)."""


def overlaps(log: Path) -> int:
    """Timings that overlapped another process's run or timing."""
    if not log.exists():
        return 0
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    count = 0
    for what, pid, t0, t1 in rows:
        if what != "time":
            continue
        count += any(other != pid and r0 < t1 and r1 > t0 for _, other, r0, r1 in rows)
    return count


def search_with(evaluator, loaded, budget: int, strategy: str, seed: int) -> dict:
    from kir.backends import target_for

    from kir.driver.registry import load_registry
    from kir.rules import context_for
    from kir.search import SearchConfig, search
    from kir.search.hints import hints

    registry = load_registry([])
    target = "model" if evaluator.modelled else evaluator.target
    ctx = context_for(loaded, target_for(target))
    seeds = [h.steps for h in hints(loaded.kernel, registry, ctx)]
    # One job first, untimed: a fleet's device workers are long-lived and warm (MLX loaded,
    # inputs and expected outputs on the GPU); the local pool gets the same courtesy.
    warm = time.monotonic()
    evaluator.evaluate(loaded.kernel)
    warmup_s = time.monotonic() - warm
    started = time.monotonic()
    result = search(loaded.kernel, registry, evaluator, ctx,
                    SearchConfig(strategy=strategy, budget=budget, seed=seed), None, seeds)
    wall = time.monotonic() - started
    return {"warmup_s": round(warmup_s, 2), "wall_s": round(wall, 2),
            "evaluations": result.evaluator_calls,
            "evals_per_s": round(result.evaluator_calls / wall, 3) if wall else None,
            "best_ms": result.best_ms, "baseline_ms": result.baseline_ms,
            "counts": {str(k): v for k, v in result.counts.items()},
            "device": result.device}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default=str(ROOT / "examples" / "softmax.cu"))
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--target", default="cuda", choices=["cuda", "metal"])
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--gpu-workers", type=int, default=4)
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("ray-gpu-out"))
    parser.add_argument("--emulator", action="store_true",
                        help="a dry run on the CPU emulator (no GPU): checks the script only")
    args = parser.parse_args()
    # The GPU processes and actors import the runner by this module's name, not __main__.
    import ray_gpu_throughput as this

    runner_class = this.LoggingEmulatorRunner if args.emulator else this.LoggingMLXRunner
    args.out.mkdir(parents=True, exist_ok=True)

    from kir.driver.load import load_kernel, parse_size_overrides
    from kir.measure.mlx import MLXEvaluator
    from kir.measure.remote import RemoteEvaluator

    loaded = load_kernel(args.kernel, sizes=parse_size_overrides(args.size))
    cores = os.cpu_count() or 2
    runs = {}
    log = args.out / "local.log"
    log.unlink(missing_ok=True)
    with MLXEvaluator(loaded, args.target, runner=runner_class(str(log)),
                      workers=max(2, cores // 4), gpu_workers=args.gpu_workers) as local:
        runs["local"] = search_with(local, loaded, args.budget, "evolve", args.seed)
    runs["local"]["overlapping_timings"] = overlaps(log)

    from kir.measure.ray_connect import connect
    from kir.measure.ray_executor import RayExecutor

    # The actors import this script's runner class by module name.
    path = os.pathsep.join([str(HERE), *filter(None, sys.path)])
    ray = connect(None, num_cpus=cores, resources={"gpu": args.actors},
                  runtime_env={"env_vars": {"PYTHONPATH": path}})
    for name, strategy in (("ray", "evolve"), ("ray-steady", "steady")):
        log = args.out / f"{name}.log"
        log.unlink(missing_ok=True)
        pool = RayExecutor("gpu", args.target, runner=runner_class(str(log)),
                           gpu_workers=max(1, args.gpu_workers // args.actors))
        with RemoteEvaluator(loaded, pool) as remote:
            runs[name] = search_with(remote, loaded, args.budget, strategy, args.seed)
        runs[name]["overlapping_timings"] = overlaps(log)
        runs[name]["lost_workers"] = pool.lost
    ray.shutdown()

    summary = {"emulator": args.emulator, "kernel": args.kernel,
               "sizes": dict(loaded.bound.sizes), "target": args.target,
               "budget": args.budget, "gpu_workers": args.gpu_workers, "actors": args.actors,
               "cores": cores, "runs": runs}
    (args.out / "ray_gpu_throughput.json").write_text(json.dumps(summary, indent=2))
    lines = [f"{Path(args.kernel).name} at {loaded.bound.sizes}, {args.target}, budget "
             f"{args.budget}, {args.gpu_workers} GPU workers, {args.actors} actor(s), "
             f"{cores} cores" + (" (CPU emulator dry run: not GPU times)" if args.emulator
                                  else ""), "",
             "| run | evaluations | wall s | evaluations/s | best ms | overlapping timings |",
             "|---|---|---|---|---|---|"]
    for name, run in runs.items():
        lines.append(f"| {name} | {run['evaluations']} | {run['wall_s']} | "
                     f"{run['evals_per_s']} | {run['best_ms']} | {run['overlapping_timings']} |")
    (args.out / "ray_gpu_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
