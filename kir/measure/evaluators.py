"""Evaluators the search can use: the Apple-GPU cost model, and MLX on a real GPU.

Both validate a candidate the same way, on the numpy interpreter: verify it against Metal's
limits, then run it on two random input sets at the spec's sizes and, when the spec gives
``ragged`` sizes, at those too (the same rewritten kernel: its grid expressions and scalar
arguments are re-evaluated with the ragged sizes), comparing with the reference (the spec's
reference function, or the unrewritten kernel). A rejection says why: "compile_error"
(verification), "invalid" (mismatch, with the worst error), "nan", "crash" (the run raised,
e.g. an out-of-bounds access), "timeout" (the interpreter's step limit, or the wall clock).

:class:`ModelEvaluator` then counts what the kernel does at the spec's sizes and returns the
cost model's time, always flagged as modelled. :class:`MLXEvaluator` times the emitted kernel
through MLX, one candidate at a time, in a worker process that a crashing or hanging candidate
cannot take down (:mod:`kir.measure.gpu.worker`). The search imports neither: the CLI hands one
in.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from kir import ir
from kir.driver.load import Loaded
from kir.errors import KirError
from kir.ir import Kernel
from kir.measure.cpu_pool import CheckPool
from kir.measure.gpu.pool import GpuPool
from kir.measure.gpu.worker import GpuJob, GpuWorker, MLXRunner, Runner, build_gpu_case
from kir.search.evaluator import Evaluation
from kir.spec.compare import CheckResult, compare_outputs

DEFAULT_SEEDS = (0, 1)
DEFAULT_MAX_STEPS = 2_000_000


@dataclass(frozen=True)
class Case:
    """One input set with its expected outputs."""

    label: str  # e.g. "sizes rows=64, cols=1000, seed 0"
    sizes: dict[str, int]
    inputs: dict[str, Any]
    expected: dict[str, np.ndarray]
    tolerances: dict[str, tuple[float, float]]
    ragged: bool = False  # at sizes other than the spec's (bound) ones


@dataclass(frozen=True)
class CheckContext:
    """Everything a worker needs to judge a candidate (pickled once per worker)."""

    cases: tuple[Case, ...]
    max_steps: int
    profile: str | None = None  # a cost-model profile: count case 0 and estimate
    notes: tuple[str, ...] = field(default=())
    scalars_used: frozenset[str] = frozenset()  # scalar params the original kernel reads


def scalars_used(kernel: Kernel) -> frozenset[str]:
    """Scalar parameters ``kernel`` reads anywhere."""
    names = {p.name for p in kernel.params if not p.is_buffer}
    return frozenset(n.name for n in kernel.body.walk()
                     if isinstance(n, ir.Var) and n.name in names)


def _copy(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def _sizes_label(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def build_cases(loaded: Loaded, validate_sizes: Sequence[dict[str, int]] | None = None,
                seeds: Sequence[int] = DEFAULT_SEEDS, max_steps: int = DEFAULT_MAX_STEPS,
                check_sizes: dict[str, int] | None = None
                ) -> tuple[tuple[Case, ...], tuple[str, ...]]:
    """The validation cases for ``loaded``: ``seeds`` at its sizes, then at each of
    ``validate_sizes`` (overrides; default: the spec's ``ragged`` sizes). A size set at which
    the unrewritten kernel itself disagrees with the spec's reference (a kernel with sizes
    baked in) is dropped, with a note saying so.

    ``check_sizes`` moves the interpreter's cases away from the sizes the kernel is compiled
    for (a GPU search at N=4096 validates on the interpreter at small sizes); every case is
    then "ragged" — not at the compiled sizes — so a candidate specialized to those sizes is
    left to the GPU check at the compiled sizes."""
    from kir.interp import run_kernel

    if loaded.bound is None:
        raise KirError(f"{loaded.path.name} has no spec: validation needs its sizes and inputs",
                       hint=f"write {loaded.path.with_suffix('.kir.toml').name} beside it")
    spec, base = loaded.spec, loaded.bound
    assert spec is not None
    compiled = dict(base.sizes)
    if check_sizes is not None:
        base = spec.bind({**base.sizes, **check_sizes})
    moved = base.sizes != compiled  # check sizes other than the compiled ones
    extra = [dict(s) for s in validate_sizes] if validate_sizes is not None else \
        ([dict(spec.ragged)] if spec.ragged else [])
    binds = [base] + [spec.bind({**base.sizes, **overrides}) for overrides in extra]
    cases: list[Case] = []
    notes: list[str] = []
    for i, bound in enumerate(binds):
        if i and bound.sizes == base.sizes:
            continue
        tolerances = {o: bound.tolerance(spec.args[o].dtype) for o in bound.outputs}
        found: list[Case] = []
        for seed in seeds:
            inputs = bound.make_inputs(seed)
            expected = bound.reference(_copy(inputs))
            baseline = None
            try:
                baseline = run_kernel(loaded.kernel, _copy(inputs), bound.sizes,
                                      max_steps=max_steps)
            except KirError as exc:
                if not i:
                    raise
                notes.append(f"not validating at {_sizes_label(bound.sizes)}: the original "
                             f"kernel fails there ({exc.message})")
                found = []
                break
            if expected is None:
                expected = {o: baseline[o] for o in bound.outputs}
            elif i and not compare_outputs(baseline, expected, tolerances.get).ok:
                notes.append(f"not validating at {_sizes_label(bound.sizes)}: the original "
                             "kernel disagrees with the reference there")
                found = []
                break
            found.append(Case(f"sizes {_sizes_label(bound.sizes)}, seed {seed}",
                              dict(bound.sizes), inputs, expected, tolerances,
                              bool(i) or moved))
        cases.extend(found)
    return tuple(cases), tuple(notes)


def check_kernel(kernel: Kernel, ctx: CheckContext) -> Evaluation:
    """Verify and validate ``kernel`` on every case; with ``ctx.profile`` also count case 0
    and return the modelled time. Module-level so worker processes can run it."""
    from kir.ir.verify import METAL_LIMITS, verify

    try:
        verify(kernel, METAL_LIMITS)
    except KirError as exc:
        return Evaluation.rejected("compile_error", f"verify: {exc}")
    counters = None
    worst = 0.0
    # A kernel that no longer reads a size parameter the original reads was specialized to
    # the spec's sizes (a rule baked the value in): other sizes cannot check it.
    specialized = kernel.launch.specialized or not ctx.scalars_used <= scalars_used(kernel)
    cases = [c for c in ctx.cases if not (specialized and c.ragged)]
    if not cases and ctx.profile is not None:
        # The cost model counts on the interpreter at the check sizes, where a kernel
        # specialized to the compiled sizes cannot run: there is nothing to judge it by.
        return Evaluation.rejected(
            "not_applicable", "specialized to the compiled sizes, but the cost model counts "
            "at the check sizes: use check sizes equal to the compiled ones to model it")
    for i, case in enumerate(cases):
        count = ctx.profile is not None and i == 0
        verdict, outputs, counted = _run_case(kernel, case, ctx.max_steps, count)
        if verdict is not None:
            return verdict
        counters = counted if count else counters
        verdict, err = _compare(outputs, case)
        if verdict is not None:
            return verdict
        worst = max(worst, err)
    notes = {"specialized": "validated at the spec's sizes only"} if specialized else {}
    if ctx.profile is None:
        return Evaluation("ok", 0.0, "", {"max_abs_err": worst, "cases": len(cases), **notes})
    from kir.cost import estimate

    cost = estimate(counters, ctx.profile)
    return Evaluation.timed(cost.time_ms, modelled=True, bound=cost.bound,
                            profile=cost.profile, breakdown=dict(cost.breakdown),
                            counters=counters.as_dict(), max_abs_err=worst,
                            cases=len(cases), **notes)


def _run_case(kernel: Kernel, case: Case, max_steps: int, count: bool):
    from kir.interp import Counters, run_kernel

    counters = Counters() if count else None
    try:
        outputs = run_kernel(kernel, _copy(case.inputs), case.sizes, max_steps=max_steps,
                             counters=counters)
    except KirError as exc:
        status = "timeout" if "did not terminate" in exc.message else "crash"
        return Evaluation.rejected(status, f"{case.label}: {exc}"), None, None
    except (RecursionError, MemoryError) as exc:
        return Evaluation.rejected("crash", f"{case.label}: {type(exc).__name__}"), None, None
    except Exception as exc:  # noqa: BLE001 - a rule produced something the run chokes on
        return Evaluation.rejected(
            "crash", f"{case.label}: interpreter raised {type(exc).__name__}: {exc}"), None, None
    return None, outputs, counters


def _compare(outputs: dict[str, np.ndarray], case: Case) -> tuple[Evaluation | None, float]:
    return verdict_of(compare_outputs(outputs, case.expected, case.tolerances.get), case)


def verdict_of(result: CheckResult, case: Case) -> tuple[Evaluation | None, float]:
    """A rejection ("nan" or "invalid", with the worst errors) or None, and the max error."""
    for check in result.outputs:
        if check.nonfinite:
            return Evaluation.rejected(
                "nan", f"{case.label}: output {check.name!r} has {check.nonfinite} NaN/Inf "
                "where the reference is finite", output=check.name), 0.0
    if not result.ok:
        failed = [o for o in result.outputs if not o.ok]
        return Evaluation.rejected(
            "invalid", f"{case.label}: " + "; ".join(o.describe() for o in failed),
            max_abs_err=result.max_abs_err,
            max_rel_err=max(o.max_rel_err for o in failed)), result.max_abs_err
    return None, result.max_abs_err


class _Validating:
    """Shared set-up: validation cases and a lazily started worker pool."""

    def __init__(self, loaded: Loaded, profile: str | None, *,
                 validate_sizes: Sequence[dict[str, int]] | None, seeds: Sequence[int],
                 max_steps: int, workers: int, timeout_s: float,
                 check_sizes: dict[str, int] | None = None) -> None:
        cases, notes = build_cases(loaded, validate_sizes, seeds, max_steps, check_sizes)
        self.loaded = loaded
        self.context = CheckContext(cases, max_steps, profile, notes,
                                    scalars_used(loaded.kernel))
        self.notes = notes
        self.workers = workers
        self.timeout_s = timeout_s
        self._pool: CheckPool | None = None

    def check(self, kernel: Kernel) -> Evaluation:
        """Verify, validate (and with a profile, model) ``kernel`` in this process."""
        return check_kernel(kernel, self.context)

    def check_many(self, kernels: Sequence[Kernel]) -> Iterator[Evaluation]:
        """:meth:`check` for each kernel in worker processes, verdicts in order."""
        if self._pool is None:
            self._pool = CheckPool(check_kernel, self.context, workers=self.workers,
                                   timeout_s=self.timeout_s)
        return self._pool.run(list(kernels))

    def close(self) -> None:
        """Stop the worker processes (a later batch starts new ones)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ModelEvaluator(_Validating):
    """Validate on the interpreter, then the Apple-GPU cost model's time: ``modelled``."""

    modelled = True

    def __init__(self, loaded: Loaded, profile: str = "apple-m2", *,
                 validate_sizes: Sequence[dict[str, int]] | None = None,
                 seeds: Sequence[int] = DEFAULT_SEEDS, max_steps: int = DEFAULT_MAX_STEPS,
                 workers: int = 2, timeout_s: float = 120.0,
                 check_sizes: dict[str, int] | None = None) -> None:
        from kir.cost import get_profile

        self.profile = get_profile(profile)
        super().__init__(loaded, self.profile.name, validate_sizes=validate_sizes,
                         seeds=seeds, max_steps=max_steps, workers=workers,
                         timeout_s=timeout_s, check_sizes=check_sizes)
        self.target = f"model:{self.profile.name}"
        self.device = f"model:{self.profile.name}"
        # The model counts the first validation case: its sizes are what every time is for.
        self.time_sizes = dict(self.context.cases[0].sizes) if self.context.cases else {}

    def evaluate(self, kernel: Kernel) -> Evaluation:
        """Judge one candidate in this process."""
        return self.check(kernel)

    def evaluate_many(self, kernels: Sequence[Kernel]) -> Iterator[Evaluation]:
        """Judge candidates in worker processes; verdicts in the order given."""
        return self.check_many(kernels)


class MLXEvaluator(_Validating):
    """Validate on the interpreter (in worker processes), then time the emitted kernel on
    this machine's GPU through MLX, one at a time: median of ``repeat`` runs.

    The GPU work happens in a separate worker process (:mod:`kir.measure.gpu.worker`), so a
    candidate that crashes or hangs it is recorded as "crash" / "timeout" and the next one
    gets a fresh worker. ``gpu_timeout_s`` bounds one candidate there (``gpu_startup_s`` more
    for a fresh worker's first job); ``runner`` replaces MLX (e.g. the CPU emulator).

    The search tells the evaluator its best time so far (:meth:`note_best`); a candidate
    whose first run is ``give_up_factor`` times slower than that is timed once only (its
    verdict says ``cut_short``): most candidates of a search lose by far, and timing each of
    them ``warmup + repeat`` times would spend the GPU time the search needs for the rest."""

    modelled = False

    def __init__(self, loaded: Loaded, target: str = "metal", *,
                 validate_sizes: Sequence[dict[str, int]] | None = None,
                 seeds: Sequence[int] = DEFAULT_SEEDS, max_steps: int = DEFAULT_MAX_STEPS,
                 workers: int = 2, timeout_s: float = 120.0, warmup: int = 3,
                 repeat: int = 10, check_sizes: dict[str, int] | None = None,
                 runner: Runner | None = None, gpu_timeout_s: float = 60.0,
                 gpu_startup_s: float = 60.0, give_up_factor: float | None = 3.0,
                 gpu_workers: int = 1) -> None:
        if target not in ("metal", "cuda"):
            raise KirError(f"unknown MLX target {target!r}", hint="choose 'metal' or 'cuda'")
        if runner is None:
            from kir.backends.mlx_runner import require_target

            require_target(target)
        super().__init__(loaded, None, validate_sizes=validate_sizes, seeds=seeds,
                         max_steps=max_steps, workers=workers, timeout_s=timeout_s,
                         check_sizes=check_sizes)
        self._gpu_case: Case | None = None
        self.target = target
        self.time_sizes = dict(loaded.bound.sizes)  # timed at the compiled sizes
        self.device = mlx_device_name(target) if runner is None else \
            f"{type(runner).__name__}:{target}"
        self.warmup = warmup
        self.repeat = repeat
        self.give_up_factor = give_up_factor
        self.best_ms: float | None = None
        # Where the evaluation time went: GPU jobs and their seconds, the compile + first
        # run ("build_s"), output check and timing seconds inside them, and the waits for
        # interpreter validation.
        self.stats: Counter = Counter()
        runner = runner or MLXRunner()
        self.gpu: GpuWorker | GpuPool = GpuWorker(
            runner, timeout_s=gpu_timeout_s, startup_s=gpu_startup_s) if gpu_workers <= 1 \
            else GpuPool(runner, gpu_workers, timeout_s=gpu_timeout_s, startup_s=gpu_startup_s)

    def close(self) -> None:
        """Stop the validation workers and the GPU worker."""
        super().close()
        self.gpu.close()

    def evaluate(self, kernel: Kernel) -> Evaluation:
        """Validate in this process, then time on the GPU."""
        verdict = self.check(kernel)
        return self.time(kernel) if verdict.ok else verdict

    def evaluate_many(self, kernels: Sequence[Kernel]) -> Iterator[Evaluation]:
        """Validate in worker processes, then check and time the valid ones on the GPU;
        verdicts in order. With a pool of GPU workers every valid candidate is handed to
        the pool as soon as its validation is in (they compile side by side)."""
        verdicts = self.check_many(kernels)
        if not isinstance(self.gpu, GpuPool):
            for kernel in kernels:
                verdict = self._checked(verdicts)
                yield self.time(kernel) if verdict.ok else verdict
            return
        pending: list = []
        try:
            for kernel in kernels:
                verdict = self._checked(verdicts)
                pending.append((self.gpu.submit(self.gpu_job(kernel)), time.perf_counter())
                               if verdict.ok else verdict)
            for item in pending:
                if isinstance(item, Evaluation):
                    yield item
                    continue
                future, submitted = item
                yield self._account(future.result(), time.perf_counter() - submitted)
        finally:  # the search stopped early: do not start what it will not read
            for item in pending:
                if not isinstance(item, Evaluation):
                    item[0].cancel()

    def _checked(self, verdicts: Iterator[Evaluation]) -> Evaluation:
        waited = time.perf_counter()
        verdict = next(verdicts)
        self.stats["check_wait_s"] += time.perf_counter() - waited
        return verdict

    def note_best(self, best_ms: float | None) -> None:
        """The search's best valid time so far (sets where timing gives up)."""
        self.best_ms = best_ms

    def gpu_job(self, kernel: Kernel) -> GpuJob:
        """The GPU worker's job for ``kernel``: check at the compiled sizes, then time."""
        bound = self.loaded.bound
        baseline = None if bound.spec.reference else self.loaded.kernel
        give_up = self.best_ms * self.give_up_factor \
            if self.best_ms and self.give_up_factor else None
        return GpuJob(kernel, str(bound.spec.path.resolve()), dict(bound.sizes), self.target,
                      self.warmup, self.repeat, 0, baseline, give_up)

    def gpu_case(self) -> Case:
        """Inputs at the compiled sizes with the spec reference's outputs (or, without a
        reference, the unrewritten kernel's outputs on the GPU): every timed candidate is
        first checked against them. Computed IN THIS PROCESS (for inspection); :meth:`time`
        has the GPU worker build its own copy."""
        if self._gpu_case is None:
            self._gpu_case = build_gpu_case(self.gpu_job(self.loaded.kernel),
                                            self.gpu.runner).case
        return self._gpu_case

    def time(self, kernel: Kernel) -> Evaluation:
        """Emit, build, check once on the GPU at the compiled sizes, then time (median) — in
        the GPU worker process, so a crash or a hang costs this candidate only."""
        started = time.perf_counter()
        verdict = self.gpu.run(self.gpu_job(kernel))
        return self._account(verdict, time.perf_counter() - started)

    def _account(self, verdict: Evaluation, wall_s: float) -> Evaluation:
        """Add one GPU job to :attr:`stats` (with a pool, jobs overlap: their seconds add up
        to more than the wall time)."""
        self.stats["gpu_jobs"] += 1
        self.stats["gpu_job_s"] += wall_s
        for phase in ("build_s", "check_s", "lock_wait_s", "time_s"):
            self.stats[phase] += float(verdict.details.get(phase, 0.0))
        self.stats["cut_short"] += bool(verdict.details.get("cut_short"))
        return verdict


def mlx_device_name(target: str) -> str:
    """A readable name of MLX's GPU (``Apple M2``, ``NVIDIA H200``), best effort: the tuning
    database keys results by it, so two different GPUs must not share a name."""
    try:
        import mlx.core as mx

        for getter in (getattr(mx, "device_info", None),
                       getattr(getattr(mx, target, None), "device_info", None)):
            if getter is not None:
                info = getter()
                name = info.get("device_name") or info.get("name")
                if name:
                    return str(name)
        # MLX's CUDA back end (0.30) names no device; the driver's tool does.
        name = nvidia_gpu_name() if target == "cuda" else None
        return name or f"mlx-{target}:{mx.default_device()}"
    except Exception:  # noqa: BLE001 - only a label
        return f"mlx-{target}"


def nvidia_gpu_name() -> str | None:
    """The name of the first GPU this process sees (``CUDA_VISIBLE_DEVICES``), from
    ``nvidia-smi``; None when there is no such tool or it fails."""
    import os
    import shutil
    import subprocess

    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    command = [tool, "--query-gpu=name", "--format=csv,noheader"]
    if visible and not visible.isdigit():
        command.append(f"--id={visible}")  # a UUID or PCI bus id
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not names:
        return None
    index = int(visible) if visible.isdigit() else 0
    return names[index] if index < len(names) else None
