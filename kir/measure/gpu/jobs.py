"""What the GPU worker runs: jobs, runners, and the check-then-time of one candidate.

Kept apart from :mod:`kir.measure.gpu.worker` (the process management) so the worker's work
can be read, and run in-process, on its own. Backends are imported inside functions only.
"""

from __future__ import annotations

import statistics
import time
import traceback
from dataclasses import dataclass, replace
from typing import Any, Callable

from kir.errors import KirError
from kir.ir import Kernel
from kir.measure.cases import Case, copy_inputs, sizes_label, verdict_of
from kir.measure.gpu.leads import confirmed, holder_built, near_best, raced
from kir.measure.gpu.lock import GpuLock
from kir.measure.gpu.shared_case import prepared_case
from kir.search.evaluator import Evaluation, Status

TRACE_CHARS = 4000  # how much of a dead or hung worker's log a verdict keeps

# Errors after which a GPU context (CUDA) or device queue (Metal) is unusable in this process.
FATAL_PATTERNS = (
    "illegal memory access", "illegal address", "misaligned address", "illegal instruction",
    "unspecified launch failure", "launch failure", "device-side assert", "launch timed out",
    "hardware stack error", "context is destroyed", "uncorrectable ecc",
    "not supported on global/shared address space", "cudaerrorinvalidaddressspace",
    "cudaerrorillegal", "cudaerrorlaunch", "cudaerrormisaligned",
    "command buffer execution failed", "kiogpucommandbuffercallbackerror", "gpu address fault",
    "caused gpu timeout",
)


def is_fatal_gpu_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the GPU context of this process is now unusable."""
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(pattern in text for pattern in FATAL_PATTERNS)


@dataclass(frozen=True)
class GpuJob:
    """One candidate to check at the compiled sizes and time. ``baseline`` (the unrewritten
    kernel) gives the expected outputs when the spec has no reference; ``give_up_ms`` stops
    timing after one run slower than it (the search passes a multiple of its best time);
    ``lock_path`` names the lock that keeps parallel workers off the GPU while one times."""

    kernel: Kernel
    spec_path: str
    sizes: dict[str, int]
    target: str
    warmup: int = 3
    repeat: int = 10
    seed: int = 0
    baseline: Kernel | None = None
    give_up_ms: float | None = None
    lock_path: str | None = None  # shared by parallel workers, see kir.measure.gpu.lock
    # The search's best time so far, and the kernel holding it (emitted): a candidate timed
    # near that time is timed in turns with the holder; without the holder, one timed faster
    # is timed again and keeps the slower median (kir.measure.gpu.leads).
    confirm_below_ms: float | None = None
    holder: Any = None
    # A final timing's other kernels (kir.api.finalists), timed in turns with this one,
    # ``rounds`` times each, in this worker (see :func:`_time_in_turns`).
    rivals: tuple[Kernel, ...] = ()
    rounds: int = 1
    # The spec's text when it is not a file (a spec given to the Python API as TOML text or
    # a dict): the worker checks it as if read from spec_path.
    spec_text: str | None = None
    # The kernel already emitted at ``sizes`` (a kir.backends.Emitted): the evaluator keyed
    # the candidate by it (kir.measure.same_source), so the GPU runs exactly that call.
    emitted: Any = None
    # The same kernel emitted at ``warm_sizes``, small sizes it was validated at, when that
    # call builds the same GPU kernel (see :func:`_warm_up`): its run compiles the kernel
    # outside the GPU lock, so a timing elsewhere need not wait for the compile.
    warm_sizes: dict[str, int] | None = None
    warm_emitted: Any = None
    # Compile before the first run where the runner can (Runner.build_ahead): a search's
    # candidates. A result's final timing goes through the user's path (MLX compiles).
    compile_ahead: bool = True
    # A folder the pool's workers share check cases through (kir.measure.gpu.shared_case).
    case_dir: str | None = None
    # Only start up: make the check case (inputs, expected outputs) and touch the device,
    # so a candidate sent later finds this worker ready (kir.measure.gpu.pool). Its verdict
    # is "not_applicable" and nobody reads it.
    prepare_only: bool = False

    def spec(self):
        """The job's spec: its file, or its text read as if from that file."""
        from kir.spec import load_spec, load_spec_text

        return load_spec(self.spec_path) if self.spec_text is None else \
            load_spec_text(self.spec_text, self.spec_path)

    def case_key(self) -> tuple:
        """What the worker's cached inputs and expected outputs depend on."""
        return (self.spec_path, tuple(sorted(self.sizes.items())), self.target, self.seed,
                self.baseline)


class Runner:
    """Builds, runs, checks and times emitted kernels inside the worker. Subclasses must be
    picklable (module-level classes with plain attributes): the worker receives one at
    start-up."""

    def build(self, emitted: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """A callable running ``emitted`` once: numpy inputs in, outputs by name out."""
        raise NotImplementedError

    def compiles_ahead(self, target: str) -> bool:
        """Whether :meth:`build_ahead` compiles ``target``'s kernels before their first run
        (then a job needs no warm-up run to compile them outside the GPU lock)."""
        return False

    def build_ahead(self, emitted: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """:meth:`build`'s callable, compiled now where the runner can compile ahead of the
        first run (CUDA: :mod:`kir.backends.mlx_precompiled`); :meth:`build`'s otherwise."""
        return self.build(emitted)

    def run(self, built: Any, case: Any) -> Any:
        """Run ``built`` once on the case's inputs (the first run compiles); what
        :meth:`compare` takes."""

        return built(copy_inputs(case.inputs))

    def compare(self, ran: Any, case: Any) -> Any:
        """A :class:`kir.spec.compare.CheckResult` of one run's outputs against the case."""
        from kir.spec.compare import compare_outputs

        return compare_outputs(ran, case.expected, case.tolerances.get)

    def time(self, built: Any, inputs: dict[str, Any], warmup: int, repeat: int,
             give_up_ms: float | None = None) -> Any:
        """A :class:`kir.backends.mlx_runner.Timing` of ``built`` on ``inputs`` (cut short
        after one run slower than ``give_up_ms``, see :func:`~kir.backends.mlx_runner.measure`)."""
        raise NotImplementedError

    def fatal(self, exc: BaseException) -> bool:
        """Whether the worker must exit after ``exc`` (its GPU context is unusable)."""
        return is_fatal_gpu_error(exc)

    def health(self) -> str | None:
        """None when the device still computes correctly, else what went wrong."""
        return None


class MLXRunner(Runner):
    """Run through MLX on this machine's GPU (``mx.fast.metal_kernel`` / ``cuda_kernel``).

    Every candidate of a search runs on the same inputs: they are turned into MLX arrays once
    and kept on the GPU, and outputs are checked there (:mod:`kir.backends.mlx_check`), so a
    candidate costs its compile, one checked run and its timing — not seconds of copying
    64 M-element arrays back and forth."""

    def __init__(self) -> None:
        self._arrays: dict = {}  # prepared MLX inputs, see MLXKernel.prepare_cached
        self._references: dict[int, tuple[Any, Any]] = {}  # id(case) -> (case, on GPU)

    def __getstate__(self) -> dict:
        return {}  # caches hold GPU arrays: a worker starts with empty ones

    def __setstate__(self, state: dict) -> None:
        self.__init__()

    def build(self, emitted: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
        from kir.backends.mlx_runner import MLXKernel

        return MLXKernel(emitted)

    def compiles_ahead(self, target: str) -> bool:
        return target == "cuda"

    def build_ahead(self, emitted: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """A CUDA kernel compiled by kir now (NVRTC without MLX's headers, about a tenth of
        MLX's compile for small kernels), else MLX's kernel compiled on its first run: a
        Metal kernel, or one the lean prelude does not compile (MLX's verdict then stands).
        A kernel whose block needs more registers than the device has is refused here
        (:class:`~kir.backends.cubin.LaunchLimitError`): its launch would fail, and take the
        worker's CUDA graph with it."""
        if getattr(emitted, "target", None) == "cuda":
            from kir.backends.cubin import LaunchLimitError
            from kir.backends.mlx_precompiled import PrecompiledKernel

            try:
                return PrecompiledKernel(emitted)
            except LaunchLimitError:
                raise
            except KirError:
                pass
        return self.build(emitted)

    def run(self, built: Any, case: Any) -> Any:
        import mlx.core as mx

        arrays, keys = built.prepare_cached(case.inputs, self._arrays)
        outs = built.launch(arrays)
        mx.eval(outs)
        return built, outs, keys

    def compare(self, ran: Any, case: Any) -> Any:
        from kir.backends.mlx_check import DeviceReference

        built, outs, keys = ran
        held = self._references.get(id(case))
        if held is None or held[0] is not case:
            held = self._references[id(case)] = (
                case, DeviceReference(case.expected, case.tolerances.get))
        emitted = built.emitted
        on_device = held[1].compare(dict(zip(emitted.output_args, outs)),
                                    set(emitted.post_processed))
        if on_device is not None:
            return on_device
        return super().compare(built.finish(outs, keys), case)

    def time(self, built: Any, inputs: dict[str, Any], warmup: int, repeat: int,
             give_up_ms: float | None = None) -> Any:
        import mlx.core as mx

        from kir.backends.mlx_runner import measure

        arrays, _ = built.prepare_cached(inputs, self._arrays)
        return measure(lambda: mx.eval(built.launch(arrays)), warmup, repeat, give_up_ms)

    def health(self) -> str | None:
        """A tiny allocation, kernel and read-back: fails once a fault broke the context."""
        try:
            import mlx.core as mx

            total = (mx.arange(1024, dtype=mx.float32) * 2).sum()
            mx.eval(total)
            value = float(total.item())
        except Exception as exc:  # noqa: BLE001 - any failure means the context is gone
            return f"{type(exc).__name__}: {exc}"
        return None if value == 1047552.0 else f"a probe computed {value}, not 1047552"


class EmulatorRunner(Runner):
    """Run on the CPU emulator of emitted source; the time is the wall time of whole calls
    (for tests and GPU-less dry runs: not a measure of any GPU)."""

    def build(self, emitted: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
        from kir.backends.emulated_runner import EmulatedKernel

        return EmulatedKernel(emitted)

    def time(self, built: Any, inputs: dict[str, Any], warmup: int, repeat: int,
             give_up_ms: float | None = None) -> Any:
        from kir.backends.mlx_runner import measure

        return measure(lambda: built(copy_inputs(inputs)), warmup, repeat, give_up_ms)


@dataclass
class _Prepared:
    bound: Any
    case: Case


def build_gpu_case(job: GpuJob, runner: Runner,
                   expected: dict[str, Any] | None = None) -> _Prepared:
    """The bound spec and the check case at the job's sizes: seeded inputs, and the spec
    reference's outputs (or, without one, the baseline kernel's outputs through ``runner``)
    unless ``expected`` gives them (another worker computed them:
    :mod:`kir.measure.gpu.shared_case`)."""
    from kir.backends import emit

    bound = job.spec().bind(dict(job.sizes))
    inputs = bound.make_inputs(job.seed)
    if expected is None:
        expected = bound.reference(copy_inputs(inputs))
    if expected is None:
        if job.baseline is None:
            raise KirError(f"{bound.spec.path.name} has no reference and the job no baseline "
                           "kernel: nothing to check GPU outputs against")
        expected = runner.build(emit(job.baseline, bound, job.target))(copy_inputs(inputs))
    tolerances = {o: bound.tolerance(bound.spec.args[o].dtype) for o in bound.outputs}
    case = Case(f"GPU at sizes {sizes_label(bound.sizes)}, seed {job.seed}",
                dict(bound.sizes), inputs, expected, tolerances)
    return _Prepared(bound, case)


def run_job(job: GpuJob, runner: Runner,
            cache: dict[tuple, Any]) -> tuple[Evaluation, bool]:
    """Emit, build, check once at the compiled sizes, then time. Returns the verdict and
    whether the worker must exit (its GPU context is unusable).

    After every candidate the runner probes the GPU (:meth:`Runner.health`): a fault shows
    under many messages, some raised only by the next call, so a context the candidate broke
    is blamed on it, not on whichever candidate comes next."""
    lock = GpuLock(job.lock_path)
    if job.prepare_only:
        return _prepare(job, runner, cache, lock), False
    try:
        verdict, fatal = _check_and_time(job, runner, cache, lock)
        with lock.shared():
            sick = runner.health()
    finally:
        lock.close()
    if sick is None:
        return verdict, fatal
    error = f"{job.target}: the GPU context is unusable after this candidate ({sick})"
    if verdict.error:
        error += f"; the candidate's own error: {verdict.error}"
    return Evaluation.rejected(Status.CRASH, error, trace=verdict.details.get("trace", "")), True


def _cached_case(job: GpuJob, runner: Runner, cache: dict[tuple, Any],
                 lock: GpuLock) -> _Prepared:
    """The job's check case, built once a worker. The spec's reference runs on the CPU and
    holds no GPU lock: held shared, it kept every timing waiting while the workers of a
    fresh pool computed their cases (on the H200 the first verdict of an N=4096 attention
    search came at 39 s; on a test's emulator the first job waited out the others' whole
    start-up). Without a reference the expected outputs are the baseline kernel's, run on
    the GPU: that case is built under the shared lock."""
    key = job.case_key()
    if key not in cache:
        if job.baseline is None:
            cache[key] = prepared_case(job, runner)
        else:
            with lock.shared():
                cache[key] = prepared_case(job, runner)
    return cache[key]


def _prepare(job: GpuJob, runner: Runner, cache: dict[tuple, Any], lock: GpuLock) -> Evaluation:
    """A preparation job's work: the check case built and cached as a candidate's first job
    would, and the device touched (:meth:`Runner.health` runs a tiny kernel), neither
    keeping a timing elsewhere waiting."""
    try:
        _cached_case(job, runner, cache, lock)
        # Unlocked: what takes the time here is MLX's start and the GPU context, not the
        # probe's one tiny kernel (a timing elsewhere meanwhile is disturbed no more than by
        # the unlocked warm-up runs of _warm_up).
        problem = runner.health()
    except Exception as exc:  # noqa: BLE001 - the next candidate meets it again and says so
        problem = f"{type(exc).__name__}: {exc}"
    finally:
        lock.close()
    return Evaluation.rejected(Status.NOT_APPLICABLE, problem or "prepared")


def _check_and_time(job: GpuJob, runner: Runner, cache: dict[tuple, Any],
                    lock: GpuLock) -> tuple[Evaluation, bool]:
    from kir.backends import emit

    try:
        prepared = _cached_case(job, runner, cache, lock)
    except Exception as exc:  # noqa: BLE001 - a verdict, the worker lives on
        fatal = runner.fatal(exc)
        return Evaluation.rejected(Status.CRASH, f"setting up the GPU check failed: "
                                   f"{type(exc).__name__}: {exc}", trace=_trace()), fatal
    case = prepared.case
    started = time.perf_counter()
    shared_wait = 0.0
    try:
        emitted = job.emitted if job.emitted is not None else \
            emit(job.kernel, prepared.bound, job.target)
        built = runner.build_ahead(emitted) if job.compile_ahead else runner.build(emitted)
        ahead = getattr(built, "compiled_ahead", False)  # a runner's callable may not say
        warm_s = _warm_up(job, runner, cache) \
            if job.warm_emitted is not None and not ahead else None
        waiting = time.perf_counter()
        with lock.shared():  # other workers may compile and check meanwhile, not time
            shared_wait = time.perf_counter() - waiting
            ran = runner.run(built, case)  # the first run compiles (NVRTC / Metal)
    except KirError as exc:
        return Evaluation.rejected(Status.COMPILE_ERROR, f"{job.target}: {exc}"), False
    except Exception as exc:  # noqa: BLE001 - MLX reports compile errors as exceptions
        if runner.fatal(exc):
            return Evaluation.rejected(Status.CRASH, f"{job.target}: GPU fault: {exc}",
                                       trace=_trace()), True
        return Evaluation.rejected(Status.COMPILE_ERROR,
                                   f"{job.target}: {type(exc).__name__}: {exc}"), False
    built_at = time.perf_counter()
    try:
        with lock.shared():
            verdict, err = verdict_of(runner.compare(ran, case), case)
    except Exception as exc:  # noqa: BLE001 - reading the outputs back can fault too
        return Evaluation.rejected(Status.CRASH, f"checking the outputs raised "
                                   f"{type(exc).__name__}: {exc}", trace=_trace()), \
            runner.fatal(exc)
    del ran  # the outputs: free them before timing
    if verdict is not None:
        return Evaluation(verdict.status, None, f"on the GPU: {verdict.error}",
                          verdict.details), False
    rivals, fatal = _rivals_built(job, runner, prepared, lock)
    if fatal:
        return Evaluation.rejected(Status.CRASH, f"{job.target}: GPU fault building a rival: "
                                   f"{rivals}", trace=_trace()), True
    checked_at = time.perf_counter()
    lead, race = None, {}
    try:
        with lock.exclusive():  # alone on the GPU
            locked_at = time.perf_counter()
            timing = runner.time(built, case.inputs, job.warmup, job.repeat, job.give_up_ms)
            racing = job.holder is not None and near_best(job, timing)
            if not racing:
                timing, lead = confirmed(job, runner, built, case.inputs, timing)
            turns = _time_in_turns(job, runner, built, timing, rivals, case.inputs)
        if racing:
            timing, lead, race = _raced_or_confirmed(job, runner, built, case, timing, cache,
                                                     lock)
    except Exception as exc:  # noqa: BLE001
        return Evaluation.rejected(Status.CRASH, f"timing raised {type(exc).__name__}: {exc}",
                                   trace=_trace()), runner.fatal(exc)
    done = time.perf_counter()
    # Where a candidate's seconds went (build = compile + the first run, and the emit when
    # the job does not carry the emitted call; waits for the GPU lock apart): what the
    # search's throughput depends on, kept with every verdict.
    phases = {"build_s": round(built_at - started - shared_wait, 4),
              "check_s": round(checked_at - built_at, 4),
              "lock_wait_s": round(shared_wait + locked_at - checked_at, 4),
              "time_s": round(done - locked_at, 4)}
    extra = {"cut_short": True} if timing.cut_short else {}
    if lead:
        extra["lead_ms"] = lead
    extra.update(race)
    if turns is not None:
        extra["turns_ms"] = turns
        timing = replace(timing, median_ms=statistics.median(turns[0]))  # over the rounds
    if warm_s is not None:  # inside build_s: the compile, when the warm-up did it
        extra["warm_s"] = round(warm_s, 4)
    if ahead:
        extra["compiled_ahead"] = True
    return Evaluation.timed(timing.median_ms, modelled=False, min_ms=timing.min_ms,
                            max_ms=timing.max_ms, spread=timing.spread, runs=timing.runs,
                            max_abs_err=err, **phases, **extra), False


def _raced_or_confirmed(job: GpuJob, runner: Runner, built: Any, case: Any, timing: Any,
                        cache: dict[tuple, Any],
                        lock: GpuLock) -> tuple[Any, list[float] | None, dict[str, Any]]:
    """A timing near the search's best raced against the holder (:func:`leads.raced`),
    the holder built beforehand without holding the GPU alone; where it cannot be built,
    the lead timed twice (:func:`leads.confirmed`). Returns the timing to record, the two
    medians of a lead timed twice, and what the verdict's details say of the race. Its
    seconds, the holder's build included, count as the job's timing (``time_s``)."""
    holder = holder_built(job, runner, case, cache, lock)  # as a candidate is built
    with lock.exclusive():
        if isinstance(holder, str):
            kept, lead = confirmed(job, runner, built, case.inputs, timing)
            return kept, lead, {"race_refused": holder}
        kept, race = raced(job, runner, built, holder, case.inputs, timing)
    return kept, None, {"race": race}


def _rivals_built(job: GpuJob, runner: Runner, prepared: Any,
                  lock: GpuLock) -> tuple[list[Any], bool] | tuple[str, bool]:
    """The rivals of a final timing, each emitted, built and checked at the compiled sizes
    like the job's own kernel: per rival its callable, or why it cannot be timed (a string).
    Returns (that list, False), or (the error, True) when a rival left the GPU context
    unusable."""
    from kir.backends import emit

    built = []
    for kernel in job.rivals:
        try:
            rival = runner.build(emit(kernel, prepared.bound, job.target))
            with lock.shared():
                verdict, _ = verdict_of(runner.compare(runner.run(rival, prepared.case),
                                                       prepared.case), prepared.case)
            built.append(rival if verdict is None else f"on the GPU: {verdict.error}")
        except Exception as exc:  # noqa: BLE001 - the rival's own verdict
            if runner.fatal(exc):
                return f"{type(exc).__name__}: {exc}", True
            built.append(f"{type(exc).__name__}: {exc}")
    return built, False


def _time_in_turns(job: GpuJob, runner: Runner, built: Any, first: Any, rivals: list[Any],
                   inputs: dict[str, Any]) -> list[list[float] | str] | None:
    """A final timing: this kernel and its rivals timed in turns, ``job.rounds`` rounds, in
    one worker (compiled once each) holding the GPU alone. Timed one after another, each in
    a worker of its own, a finalist's single median moved by up to 25% between minutes on
    an idle H200 (BENCHMARKS.md round 23), and the fastest of three such timings reported
    the luckiest, not the fastest kernel. ``first`` is this kernel's timing of round one.
    Returns per kernel (this one first) its median of each round, or a rival's error."""
    if not job.rivals:
        return None
    turns: list[list[float] | str] = [[first.median_ms]] + \
        [[] if not isinstance(r, str) else r for r in rivals]
    for round_ in range(max(job.rounds, 1)):
        for index, callable_ in enumerate([built, *rivals]):
            if isinstance(callable_, str) or (index == 0 and round_ == 0):
                continue
            turns[index].append(runner.time(callable_, inputs, job.warmup, job.repeat,
                                            None).median_ms)
    return turns


def _warm_up(job: GpuJob, runner: Runner, cache: dict[tuple, Any]) -> float:
    """Run the job's kernel once at its small validated sizes, holding no lock: the first
    run compiles (NVRTC / the Metal compiler, about a second of CPU), and the later run at
    the compiled sizes finds the kernel built. Compiling under the shared lock (as the first
    run at the compiled sizes does) makes every timing wait for the compiles in progress, so
    with several workers the GPU lock, not the CPU, limited a search's candidates a second.

    Sound to run unlocked because the candidate passed the interpreter at these sizes (no
    access out of bounds there) and the evaluator sends a warm-up only for a kernel not
    specialized to the compiled sizes whose call at these sizes builds the very same GPU
    kernel (source, helpers and shared memory alike); the GPU work is one launch at
    validation sizes, microseconds beside a timing's median of many runs. Outputs are not
    checked here: the check at the compiled sizes follows. Returns its seconds."""
    started = time.perf_counter()
    key = ("warm", job.spec_path, tuple(sorted(job.warm_sizes.items())), job.seed)
    if key not in cache:
        inputs = job.spec().bind(dict(job.warm_sizes)).make_inputs(job.seed)
        cache[key] = Case(f"warm-up at sizes {sizes_label(job.warm_sizes)}",
                          dict(job.warm_sizes), inputs, {}, {})
    runner.run(runner.build(job.warm_emitted), cache[key])  # its outputs are dropped
    return time.perf_counter() - started


def _trace() -> str:
    return traceback.format_exc()[-TRACE_CHARS:]
