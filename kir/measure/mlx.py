"""MLX on a real GPU as an evaluator: validate on the interpreter (in worker processes), then
check and time the emitted kernel on the GPU in worker processes a crashing or hanging
candidate cannot take down (:mod:`kir.measure.gpu`). A candidate whose emitted call was
judged already is answered without either (:mod:`kir.measure.same_source`)."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterator, Sequence

from kir.driver.load import Loaded
from kir.errors import KirError
from kir.ir import Kernel
from kir.measure.cases import DEFAULT_MAX_STEPS, DEFAULT_SEEDS, Case, Validating, judged_cases
from kir.measure.device import describe_gpu
from kir.measure.gpu.pool import GpuPool
from kir.measure.gpu.worker import GpuJob, GpuWorker, MLXRunner, Runner, build_gpu_case
from kir.measure.same_source import SourceVerdicts, source_key
from kir.search.evaluator import Evaluation, Status
from kir.search.phases import Phases

# The verdict of a candidate dropped because the search stopped (MLXEvaluator.quiesce).
STOPPED = Evaluation.rejected(Status.NOT_APPLICABLE, "not judged: the search had stopped")


class MLXEvaluator(Validating):
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
                         check_sizes=check_sizes, target=target)
        self._gpu_case: Case | None = None
        self.target = target
        self.time_sizes = dict(loaded.bound.sizes)  # timed at the compiled sizes
        self.descriptor = describe_gpu(target, runner)
        self.device = self.descriptor.device
        self.warmup = warmup
        self.repeat = repeat
        self.give_up_factor = give_up_factor
        # The search's best time and the emitted call holding it, together (note_best): a
        # job is built from one pair, never from a new time and the old holder.
        self._lead: tuple[float | None, Any] = (None, None)
        self._warm_bound = self._smallest_validated() if 0 in seeds else None
        # ``stats`` (from Validating) adds where the GPU evaluation time went: GPU jobs and
        # their seconds, the compile + first run ("build_s"), output check and timing
        # seconds inside them, emitting here, and the candidates answered by source.
        self.same_source = SourceVerdicts()
        self._submitter: ThreadPoolExecutor | None = None  # for submit(), made on first use
        self._judging = threading.Lock()  # emitting and the shared tables, one at a time
        self._stopping = threading.Event()  # set while quiesce drops what is in flight
        runner = runner or MLXRunner()
        self.gpu: GpuWorker | GpuPool = GpuWorker(
            runner, timeout_s=gpu_timeout_s, startup_s=gpu_startup_s) if gpu_workers <= 1 \
            else GpuPool(runner, gpu_workers, timeout_s=gpu_timeout_s, startup_s=gpu_startup_s)

    def start(self) -> None:
        """Start the GPU workers now, on the unrewritten kernel's check case, so that their
        start-up (MLX, the GPU context, the reference at the compiled sizes) overlaps what
        the caller does before its first candidate: a search builds its hints meanwhile
        (seconds for an attention kernel). A single worker starts with its first job."""
        if isinstance(self.gpu, GpuPool):  # a preparation job runs no kernel: none emitted
            self.gpu.prepare(self.gpu_job(self.loaded.kernel))

    @property
    def capacity(self) -> int:
        """Candidates worth having in flight at once (the steady-state search keeps this many
        submitted): one per GPU worker and one per validation worker, so that the next
        candidates validate while the GPU workers compile. With one per GPU worker and one
        more, an attention search on the H200 held its 14 GPU workers to about 8 jobs at
        once, the others' candidates still validating (BENCHMARKS.md, round 22)."""
        if not isinstance(self.gpu, GpuPool):
            return 1
        return self.gpu.workers + max(1, self.workers)

    def submit(self, kernel: Kernel) -> "Future[Evaluation]":
        """Start judging ``kernel``; the future holds what :meth:`evaluate` would return.
        Validation runs in the interpreter's worker processes, beside the other threads'
        (one at a time in this process, it bounded a steady attention search on the H200 to
        0.4 candidates/s: 47 of its 60 s validating); the GPU job then runs on the pool
        beside the others, so a steady-state search keeps every GPU worker compiling instead
        of waiting for a generation's slowest candidate."""
        if self._submitter is None:
            self._submitter = ThreadPoolExecutor(self.capacity, thread_name_prefix="kir-judge")
        return self._submitter.submit(self._judge_one, kernel)

    def _judge_one(self, kernel: Kernel) -> Evaluation:
        """:meth:`evaluate`'s work, safe beside other threads doing the same (submit). Once
        :meth:`quiesce` has begun, a candidate goes no further (no verdict of it is read)."""
        if self._stopping.is_set():
            return self._dropped()
        with self._judging:
            emitted, key = self.emitted_call(kernel)
            if key in self.same_source:
                return self._duplicate(key)
        verdict = self.check_one(kernel)
        if self._stopping.is_set():
            return self._dropped()  # not remembered: it may be a cancelled check's
        if verdict.ok:
            started = time.perf_counter()
            result = self.gpu.run(self.gpu_job(kernel, emitted))
            if self._stopping.is_set():
                return self._dropped()  # its worker may have been killed under it
            with self._judging:
                verdict = self._account(result, time.perf_counter() - started)
        with self._judging:
            self.same_source.remember(key, kernel, verdict)
        return verdict

    def _dropped(self) -> Evaluation:
        """STOPPED, counted: a candidate submitted but not judged when the search stopped. A
        search whose candidates all end so (the time line's ``dropped at the stop``) spent
        its time waiting, not judging."""
        with self._judging:
            self.stats["dropped"] += 1
        return STOPPED

    def quiesce(self) -> None:
        """End the work still in flight: submitted candidates are dropped, their validations
        and GPU jobs stopped (:meth:`_stop_submitter`); a generation's GPU jobs
        (:meth:`evaluate_many`) are waited for. A search that stops at its time limit leaves
        up to :attr:`capacity` candidates compiling, validating and checking, and the
        finalists timed meanwhile shared the host's cores and the GPU with them: the timing
        a user's result reports must be made alone (:mod:`kir.api.finalists`). Their
        verdicts are not needed any more."""
        self._stop_submitter()
        if isinstance(self.gpu, GpuPool):  # a generation's GPU jobs (evaluate_many)
            self.gpu.wait_idle(self.gpu.timeout_s)

    def _stop_submitter(self) -> None:
        """Drop the submitted candidates: those not started, and those validating or on a
        GPU worker (their worker processes are killed). On the H200 a 60-s attention search
        left 15 candidates in flight, and waiting for them to finish took 15 s (BENCHMARKS.md,
        round 22)."""
        if self._submitter is not None:
            self._stopping.set()
            try:
                self.cancel_checks()
                if isinstance(self.gpu, GpuPool):
                    self.gpu.interrupt_running()
                self._submitter.shutdown(wait=True, cancel_futures=True)
            finally:
                self._submitter = None
                self._stopping.clear()

    def close(self) -> None:
        """Stop the validation workers and the GPU worker."""
        self._stop_submitter()
        super().close()
        self.gpu.close()

    def evaluate(self, kernel: Kernel) -> Evaluation:
        """Validate (in a worker process when there are several), then time on the GPU (or,
        when a candidate with the same emitted call was judged, its verdict)."""
        return self._judge_one(kernel)

    def evaluate_many(self, kernels: Sequence[Kernel]) -> Iterator[Evaluation]:
        """Validate in worker processes, then check and time the valid ones on the GPU;
        verdicts in order. Only the first of the candidates sharing an emitted call is
        judged; the others get its verdict."""
        calls = [self.emitted_call(kernel) for kernel in kernels]
        first: list[int] = []  # the positions judged, in order
        keys: set[str | None] = set()
        for i, (_, key) in enumerate(calls):
            if key is None or (key not in self.same_source and key not in keys):
                first.append(i)
                keys.add(key)
        judged = self._judge_many([kernels[i] for i in first], [calls[i][0] for i in first])
        first_set = set(first)
        try:
            for i, (kernel, (_, key)) in enumerate(zip(kernels, calls)):
                if i not in first_set:  # its first came earlier in the order: judged
                    yield self._duplicate(key)
                    continue
                verdict = next(judged)
                self.same_source.remember(key, kernel, verdict)
                yield verdict
        finally:
            judged.close()

    def _judge_many(self, kernels: Sequence[Kernel], calls: Sequence[Any]
                    ) -> Iterator[Evaluation]:
        """Validate ``kernels``, then check and time the valid ones; verdicts in order.
        With a pool of GPU workers every valid candidate is handed to the pool as soon as
        its validation is in (they compile side by side)."""
        verdicts = self.check_many(kernels)
        if not isinstance(self.gpu, GpuPool):
            for kernel, emitted in zip(kernels, calls):
                verdict = next(verdicts)
                yield self.time(kernel, emitted) if verdict.ok else verdict
            return
        pending: list = []
        try:
            for kernel, emitted in zip(kernels, calls):
                verdict = next(verdicts)
                pending.append((self.gpu.submit(self.gpu_job(kernel, emitted)),
                                time.perf_counter()) if verdict.ok else verdict)
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

    def emitted_call(self, kernel: Kernel) -> tuple[Any, str | None]:
        """``kernel`` emitted for the GPU at the compiled sizes (what its GPU job runs) and
        its :func:`~kir.measure.same_source.source_key`; (None, None) when the emitter
        refuses it (validation then says why, as for any candidate)."""
        from kir.backends import emit

        started = time.perf_counter()
        try:
            emitted = emit(kernel, self.loaded.bound, self.target)
            return emitted, source_key(emitted, kernel)
        except Exception:  # noqa: BLE001 - judged (and reported) on the usual path
            return None, None
        finally:
            self.stats["emit_s"] += time.perf_counter() - started

    def _duplicate(self, key: str) -> Evaluation:
        self.stats["source_duplicates"] += 1
        return self.same_source.answer(key)

    def phases(self) -> Phases:
        """Where evaluation time went (:mod:`kir.search.phases`): this process emitting and
        waiting for validation, then inside the GPU jobs compiling (with the first run),
        checking the outputs, timing and waiting for the GPU lock; with a pool of GPU
        workers those seconds overlap."""
        stats = self.stats
        seconds = {"emit": stats["emit_s"], self.validate_phase: stats["check_wait_s"],
                   "compile": stats["build_s"], "check": stats["check_s"],
                   "time": stats["time_s"], "lock wait": stats["lock_wait_s"]}
        counts = {"GPU jobs": stats["gpu_jobs"], "source duplicates": stats["source_duplicates"],
                  "cut short": stats["cut_short"], "raced": stats["raced"],
                  "timed out": stats["timed_out"], "dropped at the stop": stats["dropped"]}
        if self.target == "cuda":  # kir compiles CUDA candidates (kir.backends.mlx_precompiled)
            counts["compiled by kir"] = stats["compiled_ahead"]
        return Phases(seconds, counts, overlapping=isinstance(self.gpu, GpuPool))

    def note_best(self, best_ms: float | None, kernel: Kernel | None = None) -> None:
        """The search's best valid time so far (sets where timing gives up) and, when
        given, the kernel holding it: a candidate timed near that time is timed in turns
        with it (:mod:`kir.measure.gpu.leads`). A best without its kernel, or one the
        emitter refuses, has its leads timed twice instead."""
        holder = self.emitted_call(kernel)[0] if kernel is not None else None
        self._lead = (best_ms, holder)

    def retime(self, kernel: Kernel, warmup: int = 5, repeat: int = 20,
               rivals: Sequence[Kernel] = (), rounds: int = 1) -> Evaluation:
        """Check and time ``kernel`` again with nothing else running (after a search: see
        :mod:`kir.api.finalists`), ``warmup`` + ``repeat`` runs as MLX's built-ins are
        timed, never cut short, compiled by MLX itself as the user's module will be (the
        search's candidates were compiled by kir: :mod:`kir.backends.mlx_precompiled`).
        With ``rivals``, they and ``kernel`` are timed in turns, ``rounds`` times, in one
        worker: the verdict's time is ``kernel``'s median over the rounds and its
        ``details["turns_ms"]`` each kernel's medians (``kernel`` first; a rival that could
        not be timed has its error there instead)."""
        self.quiesce()
        job = dataclasses.replace(self.gpu_job(kernel, self.emitted_call(kernel)[0]),
                                  warmup=warmup, repeat=repeat, give_up_ms=None,
                                  confirm_below_ms=None, holder=None, compile_ahead=False,
                                  rivals=tuple(rivals), rounds=rounds)
        started = time.perf_counter()
        return self._account(self.gpu.run(job), time.perf_counter() - started)

    def gpu_job(self, kernel: Kernel, emitted: Any = None) -> GpuJob:
        """The GPU worker's job for ``kernel``: check at the compiled sizes, then time
        (``emitted``: the kernel already emitted, see :meth:`emitted_call`)."""
        bound = self.loaded.bound
        baseline = None if bound.spec.reference else self.loaded.kernel
        best_ms, holder = self._lead
        give_up = best_ms * self.give_up_factor if best_ms and self.give_up_factor else None
        path = bound.spec.path.resolve()
        warm = self.warm_call(kernel, emitted)
        return GpuJob(kernel, str(path), dict(bound.sizes), self.target,
                      self.warmup, self.repeat, 0, baseline, give_up,
                      spec_text=None if path.is_file() else bound.spec.text, emitted=emitted,
                      warm_sizes=dict(self._warm_bound.sizes) if warm else None,
                      warm_emitted=warm, confirm_below_ms=best_ms,
                      holder=holder if best_ms else None)

    def warm_call(self, kernel: Kernel, emitted: Any) -> Any:
        """``kernel`` emitted at the smallest sizes it is validated at, for the GPU worker to
        compile it there outside the GPU lock (:func:`kir.measure.gpu.jobs._warm_up`); None
        where that would not help or not be safe: no smaller validated sizes, a kernel
        specialized to the compiled sizes (not validated elsewhere), a call that would
        build another GPU kernel than the one at the compiled sizes, or a runner that
        compiles the kernel before its first run anyway (MLX's on CUDA: then this second
        emit, in the search's busiest process, would buy nothing)."""
        from kir.backends import emit
        from kir.backends.mlx_runner import source_hash

        if emitted is None or self._warm_bound is None \
                or self.gpu.runner.compiles_ahead(self.target):
            return None
        judged, specialized = judged_cases(kernel, self.context)
        if specialized or not any(c.sizes == self._warm_bound.sizes for c in judged):
            return None  # not validated at the warm-up's sizes: running it there may fault
        try:
            small = emit(kernel, self._warm_bound, self.target)
        except Exception:  # noqa: BLE001 - the compiled-size call is what gets judged
            return None
        return small if source_hash(small) == source_hash(emitted) else None

    def gpu_case(self) -> Case:
        """Inputs at the compiled sizes with the spec reference's outputs (or, without a
        reference, the unrewritten kernel's outputs on the GPU): every timed candidate is
        first checked against them. Computed IN THIS PROCESS (for inspection); :meth:`time`
        has the GPU worker build its own copy."""
        if self._gpu_case is None:
            self._gpu_case = build_gpu_case(self.gpu_job(self.loaded.kernel),
                                            self.gpu.runner).case
        return self._gpu_case

    def time(self, kernel: Kernel, emitted: Any = None) -> Evaluation:
        """Emit (unless ``emitted`` is given), build, check once on the GPU at the compiled
        sizes, then time (median) — in the GPU worker process, so a crash or a hang costs
        this candidate only."""
        started = time.perf_counter()
        verdict = self.gpu.run(self.gpu_job(kernel, emitted))
        return self._account(verdict, time.perf_counter() - started)

    def _smallest_validated(self):
        """The bound spec at the validation case with the fewest input elements, when those
        sizes are not the compiled ones (else a warm-up would cost what the check does).
        The worker makes the warm-up's inputs with seed 0, one of the validation seeds."""
        cases = [c for c in self.context.cases if c.sizes != self.time_sizes]
        if not cases:
            return None
        smallest = min(cases, key=lambda c: sum(math.prod(getattr(v, "shape", ()))
                                                for v in c.inputs.values()))
        return self.loaded.spec.bind(dict(smallest.sizes))

    def _account(self, verdict: Evaluation, wall_s: float) -> Evaluation:
        """Add one GPU job to :attr:`stats` (with a pool, jobs overlap: their seconds add up
        to more than the wall time)."""
        self.stats["gpu_jobs"] += 1
        self.stats["gpu_job_s"] += wall_s
        for phase in ("build_s", "check_s", "lock_wait_s", "time_s"):
            self.stats[phase] += float(verdict.details.get(phase, 0.0))
        self.stats["cut_short"] += bool(verdict.details.get("cut_short"))
        self.stats["compiled_ahead"] += bool(verdict.details.get("compiled_ahead"))
        self.stats["raced"] += "race" in verdict.details  # kir.measure.gpu.leads
        self.stats["timed_out"] += verdict.status == Status.TIMEOUT  # the worker was killed
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
