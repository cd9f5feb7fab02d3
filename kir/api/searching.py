"""One search path for the CLI and the Python API: pick the evaluator for a target, check
what can be checked before any budget is spent, search with hints and the tuning database,
then make the fastest known kernel the result (an earlier search's, or the winner without a
step that the transfer table shows was in the way).

:class:`SearchSession` does it; ``kir compile --search`` (:mod:`kir.commands.compile_search`)
and :meth:`kir.api.LoadedKernel.search` both drive one, and only differ in how they report.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from kir import limits
from kir.driver.load import Loaded
from kir.errors import KirError
from kir.api.finalists import faster_in_turns, retime_finalists
from kir.api.precision_note import precision_refusals
from kir.rules import apply_trace, context_for

DEFAULT_BUDGET = 40
MODEL_PROFILE = "apple-m2"
MODEL_NOTE = "no GPU: timings are modelled (Apple M2 cost model)"
UNBOUNDED = 10**9  # the budget of a search bounded by time only


def parse_duration(text: str | float | int) -> float:
    """``"90"``, ``"30s"``, ``"5m"``, ``"1h"`` (also ``"1m30s"``) or a number → seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text <= 0:
            raise KirError(f"bad time limit {text!r}: it must be more than zero")
        return float(text)
    return limits.parse_duration(text, "--time")


def resolve_target(requested: str | None) -> tuple[str, str | None]:
    """The timing target: the one asked for (checked to exist here), else what this machine
    has (MLX Metal, then MLX CUDA), else the cost model. Returns it and a note to print."""
    from kir.backends.mlx_runner import available_targets, require_target

    if requested in ("metal", "cuda"):
        require_target(requested, "search with --target model (the Apple-GPU cost model) "
                                  "instead")
        return requested, None
    if requested == "model":
        return "model", "timings are modelled (Apple M2 cost model), as asked"
    if requested is not None:
        raise KirError(f"unknown search target {requested!r}",
                       hint="choose metal, cuda or model (or none: this machine's GPU)")
    have = available_targets()
    for target in ("metal", "cuda"):
        if target in have:
            return target, None
    return "model", MODEL_NOTE


def make_evaluator(loaded: Loaded, target: str, check_sizes: dict[str, int] | None = None):
    """The evaluator for ``target`` ("model", "metal" or "cuda"); ``check_sizes`` moves the
    interpreter's validation (and the cost model's counting) to smaller sizes."""
    try:
        from kir.measure.mlx import MLXEvaluator
        from kir.measure.model import ModelEvaluator
    except ImportError as exc:
        raise KirError(f"the search evaluators are not available in this kir ({exc})",
                       hint="reinstall kir (pip install -e .)") from None
    timeout_s = limits.current().candidate_s  # checking one candidate, CPU time
    if target == "model":
        return ModelEvaluator(loaded, profile=MODEL_PROFILE, check_sizes=check_sizes,
                              timeout_s=timeout_s)
    cores = os.cpu_count() or 2
    # Every candidate is validated on the interpreter before its compile: with a quarter of
    # the cores validating, an attention search on the H200 (16 cores) kept those four busy
    # while its GPU workers waited (BENCHMARKS.md, round 22). Half of the cores but this
    # process and one spare validate; the GPU workers' compiles share the cores with them.
    workers = max(2, (cores - 2) // 2)
    return MLXEvaluator(loaded, target=target, check_sizes=check_sizes, timeout_s=timeout_s,
                        workers=workers, gpu_workers=gpu_worker_count(loaded, cores - 2))


# What one GPU worker process holds besides its check case: Python, MLX, the GPU context
# (about 0.6 GiB resident on the H200 with MLX 0.30.1; rounded up).
GPU_WORKER_BASE_BYTES = 1 << 30


def gpu_worker_count(loaded: Loaded, spare_cores: int,
                     generation: int | None = None) -> int:
    """How many GPU worker processes a search on this machine starts: one per candidate of a
    generation (``generation``, default the search's population less its elite) so that a
    generation compiles at once instead of in waves, at most one per spare core (a compile,
    NVRTC or Metal's, takes one core for one to three seconds) and as many as half the
    available memory holds, each worker keeping its own copy of the check case (inputs and
    expected outputs at the compiled sizes). Measured on the H200 (16 cores, BENCHMARKS.md
    round 10): 14 workers instead of 8 judged 10-30 % more candidates in a 60-s search."""
    from kir.search import SearchConfig

    if generation is None:
        config = SearchConfig()
        generation = config.population - config.elite
    count = max(1, min(generation, spare_cores))
    available = limits.available_memory()
    if available is not None:
        # memory_needed counts an interpreter run (four copies of every buffer); a GPU worker
        # keeps two: the inputs and the expected outputs (a run's outputs come and go).
        each = GPU_WORKER_BASE_BYTES + loaded.bound.memory_needed() // 2
        count = min(count, max(1, available // 2 // each))
    return count


def cluster_search_evaluator(loaded: Loaded, request: "SearchRequest",
                             check_sizes: dict[str, int] | None):
    """The evaluator of a search on ``request.cluster`` (:mod:`kir.measure.ray_connect`):
    a bad cluster name or a missing Ray fails here, before any work."""
    from kir.measure.ray_connect import cluster_evaluator, parse_cluster, require_ray, role_for

    parse_cluster(request.cluster)
    require_ray()
    return cluster_evaluator(loaded, request.cluster, request.device_resource,
                             role_for(request.target, MODEL_PROFILE), check_sizes)


def validation_fingerprint(loaded: Loaded, registry) -> str:
    """What a stored verdict depends on besides the candidate, its sizes and the target: the
    spec and its reference's source (:func:`kir.spec.bound.validation_fingerprint`) and every
    rule's source (:meth:`kir.driver.registry.Registry.fingerprint`)."""
    from kir.spec.bound import validation_fingerprint as spec_fingerprint

    return f"{spec_fingerprint(loaded.spec)}-{registry.fingerprint()}"


def sizes_label(sizes: Mapping[str, int]) -> str:
    """``rows=8, cols=64``."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def time_unit(evaluator) -> str:
    """What every time of this search is: measured or modelled, and at which sizes (a GPU
    times at the compiled sizes; the cost model prices there too when its counts at the check
    sizes extrapolate, else at the check sizes)."""
    sizes = getattr(evaluator, "time_sizes", None)
    where = f" at {sizes_label(sizes)}" if sizes else ""
    return f" (modelled{where})" if evaluator.modelled else (f" (measured{where})" if where
                                                            else "")


def emit_or_explain(kernel, loaded: Loaded, target: str) -> None:
    """Raise a KirError when the target's emitter refuses the unrewritten kernel: a search
    would spend its budget on candidates that can never be written out."""
    from kir.backends import emit

    try:
        emit(kernel, loaded.bound, target)
    except KirError as exc:
        raise KirError(f"the {target} emitter cannot write this kernel: {exc.message}",
                       exc.loc, source_line=exc.source_line,
                       hint=exc.hint or "no search was run") from None


def default_strategy(target: str) -> str:
    """The search strategy when none is asked for: ``evolve`` with the cost model, whose
    verdicts are deterministic (a search repeats from its seed), ``steady`` when timing on a
    GPU. There timings vary run to run, so no search repeats from its seed anyway, and
    generations wait for their slowest candidate: on the H200 (BENCHMARKS.md round 18)
    steady judged 1.3-2.5x the candidates a second, its results as fast."""
    return "evolve" if target == "model" else "steady"


@dataclass(frozen=True)
class SearchRequest:
    """What to search for: ``target`` ("metal", "cuda", "model", or None for this machine's
    GPU, else the model), ``budget`` evaluations and/or a ``time_limit`` ("5m" or seconds),
    the strategy and seed, ``check_sizes`` (None: the spec's ``check`` table), the tuning
    database (``db``: a path, None for the default one, False for none), extra rule
    files, and a cluster to judge candidates on (then the target is what its device workers
    have unless named)."""

    target: str | None = None
    budget: int | None = None
    time_limit: str | float | None = None
    strategy: str | None = None  # None: default_strategy(the target)
    seed: int = 0
    check_sizes: Mapping[str, int] | None = None
    db: str | Path | None | bool = None
    rules: Sequence[str | Path] = ()
    # Judge candidates on a cluster (``ray[:ADDRESS]``), its device workers on the nodes
    # offering ``device_resource`` (docs/SCALE_OUT.md); None: this machine's pools.
    cluster: str | None = None
    device_resource: str | None = None


@dataclass
class Searched:
    """A finished search with what writing it out needs: the loaded kernel, the engine's
    result, the transfer table, the kernels after each winning step, the timing and module
    targets, the unit every time is in, and the settings for the report."""

    loaded: Loaded
    result: object  # kir.search.SearchResult
    ablation: list = field(default_factory=list)
    step_kernels: tuple = ()
    target: str = "model"
    module_target: str = "metal"
    unit: str = ""
    time_sizes: Mapping[str, int] | None = None
    settings: dict = field(default_factory=dict)
    registry: object = None
    db_path: Path | None = None
    key: object = None
    ctx: object = None  # the rule context the steps replay in
    # The spec's reference_mlx timed on the GPU at the compiled sizes (ms), or why not.
    mlx_reference_ms: float | None = None
    mlx_reference_note: str = ""

    @property
    def speedup_over_mlx(self) -> float | None:
        """The MLX reference's time over the winner's, when both were measured."""
        if self.mlx_reference_ms and self.result.best_ms and not self.result.modelled:
            return self.mlx_reference_ms / self.result.best_ms
        return None

    @property
    def baseline_failed(self) -> bool:
        return self.result.stopped == "baseline_failed"


class SearchSession:
    """Everything decided and checked before a search spends its budget (target, emitter,
    registry, rule context, evaluator, database key), then :meth:`run`. ``note`` receives
    lines worth telling the user (the target chosen, where candidates are validated)."""

    def __init__(self, loaded: Loaded, request: SearchRequest,
                 note: Callable[[str], None] = lambda line: None) -> None:
        from kir.backends import TARGETS, target_for
        from kir.driver.registry import load_registry
        from kir.ir.verify import verify
        from kir.search import SearchConfig, default_db_path
        from kir.search.engine import default_key

        if loaded.bound is None:
            raise KirError(f"{loaded.path} has no spec: the search needs one to make inputs",
                           hint="write a .kir.toml beside the kernel (see examples/) or pass "
                                "--spec (kir spec init drafts one)")
        if request.budget is not None and request.budget < 1:
            raise KirError(f"--budget {request.budget}: the search needs at least one "
                           "evaluation", hint="leave --budget out for the default (40), or "
                                              "give --time")
        self.loaded = loaded
        self.request = request
        self.note = note
        self.evaluator = None
        if request.cluster:
            # The device workers say what they time (a GPU, or a chip's cost model).
            self.evaluator = cluster_search_evaluator(loaded, request,
                                                      self.check_sizes_of(request)[0])
            self.target = "model" if self.evaluator.modelled else self.evaluator.target
            note(f"judging candidates on the cluster: device {self.evaluator.descriptor}")
            for line in getattr(self.evaluator.executor, "notes", ()):
                note(line)
        else:
            if request.device_resource:
                raise KirError("--device-resource names the device workers of a cluster",
                               hint="add --cluster ray[:ADDRESS], or leave --device-resource "
                                    "out")
            self.target, target_note = resolve_target(request.target)
            if target_note:
                note(target_note)
        self.module_target = "cuda" if self.target == "cuda" else "metal"
        base = loaded.kernel
        # Before any budget is spent: the unrewritten kernel must fit the target and be
        # emittable.
        verify(base, TARGETS[self.module_target])
        emit_or_explain(base, loaded, self.module_target)
        self.registry = load_registry(request.rules)
        self.ctx = context_for(loaded, target_for(self.target))
        check_sizes, source = self.check_sizes_of(request)
        self.check_sizes = check_sizes
        if check_sizes:
            # Where the cost model prices them the evaluator says below (model_note).
            note(f"candidates are validated on the interpreter at {sizes_label(check_sizes)} "
                 f"({source})")
        self.limit = parse_duration(request.time_limit) if request.time_limit else None
        # A time limit alone should run until the time is up, not stop at the default budget.
        budget = request.budget or (UNBOUNDED if self.limit else DEFAULT_BUDGET)
        strategy = request.strategy or default_strategy(self.target)
        if request.strategy is None and strategy == "steady":
            note("strategy steady: each candidate is judged as a GPU worker frees up (GPU "
                 "timings vary run to run, so no GPU search repeats from its seed; "
                 "--strategy evolve searches by generations)")
        self.config = SearchConfig(strategy=strategy, budget=budget,
                                   time_limit_s=self.limit, seed=request.seed)
        self._hints: list | None = None  # built by run(), while the GPU workers start
        if request.db is False:
            self.db_path = None
        else:
            self.db_path = Path(request.db) if request.db not in (None, True) \
                else default_db_path()
        if self.evaluator is None:
            self.evaluator = make_evaluator(loaded, self.target, check_sizes)
            for line in getattr(self.evaluator, "notes", ()):  # sizes left out, NaN expected
                note(line if line.startswith("note: ") else f"note: {line}")
        if getattr(self.evaluator, "model_note", ""):
            note(self.evaluator.model_note)
        # Results depend on where candidates were validated, so the check sizes are part of
        # the tuning database key alongside the compiled sizes, and so is everything else a
        # verdict was judged by (spec, reference, rules).
        key_sizes = {**self.ctx.sizes,
                     **{f"check:{k}": v for k, v in (check_sizes or {}).items()}}
        self.key = default_key(base, self.evaluator, key_sizes,
                               validation_fingerprint(loaded, self.registry))

    def check_sizes_of(self, request: SearchRequest) -> tuple[dict[str, int] | None, str]:
        """Sizes the interpreter validates candidates at, and where they came from: the
        request's (``--check-size``), else the spec's ``check`` table, else sizes derived
        from the spec's defaults (:func:`kir.spec.shrink.check_sizes`), so a search at
        8192 x 8192 does not spend minutes per candidate on the interpreter; None when
        those are the compiled sizes. All of them meet the spec's ``require``."""
        if getattr(self, "_check_sizes", None) is None:  # deriving them runs the interpreter
            self._check_sizes = self._find_check_sizes(request)
        return self._check_sizes

    def _find_check_sizes(self, request: SearchRequest) -> tuple[dict[str, int] | None, str]:
        from kir.spec.shrink import check_sizes, shrink_until

        loaded = self.loaded
        if request.check_sizes:
            given = dict(request.check_sizes)
            loaded.spec.bind(given, "--check-size")  # unknown names fail here, named so
            return given, "--check-size"
        if loaded.spec.check:
            return dict(loaded.spec.check), "the spec's check table"
        try:
            derived = check_sizes(loaded.spec, loaded.bound.sizes)
        except KirError:
            return None, ""  # no smaller sizes meet the spec's constraints
        fits = _within_check_steps(loaded)
        derived = shrink_until(loaded.spec, derived, fits)
        ragged = dict(loaded.spec.ragged)
        if ragged:
            # Candidates are validated at the ragged sizes too (the spec's overrides on top
            # of these): the sizes those leave alone shrink until that run fits as well
            # (an attention spec's ragged N=200 over 4 heads cost 3x the check sizes).
            derived = shrink_until(loaded.spec, derived, lambda s: fits({**s, **ragged}),
                                   keep=set(ragged))
        if derived == dict(loaded.bound.sizes):
            return None, ""
        return derived, "derived from the spec's defaults: it has no check table"

    @property
    def hints(self) -> list:
        """The hints the search starts from (:func:`kir.search.hints.hints`), built once."""
        if self._hints is None:
            from kir.search.hints import hints

            self._hints = hints(self.loaded.kernel, self.registry, self.ctx)
        return self._hints

    @property
    def modelled(self) -> bool:
        return bool(self.evaluator.modelled)

    def run(self, progress=None) -> Searched:
        """Search; then adopt a faster stored kernel or a faster winner-without-a-step. The
        evaluator's workers are stopped when it returns. ``progress`` receives
        :class:`kir.search.Progress` after every evaluation."""
        from contextlib import nullcontext

        from kir.search import TuningDB, search
        from kir.search.genome import genome_text

        base, registry, ctx = self.loaded.kernel, self.registry, self.ctx
        database = TuningDB(self.db_path) if self.db_path is not None else nullcontext()
        with database as db, self.evaluator:
            start = getattr(self.evaluator, "start", None)
            if callable(start):
                start()  # GPU workers start while the hints are built
            result = search(base, registry, self.evaluator, ctx, self.config, db,
                            [h.steps for h in self.hints], progress=progress, key=self.key)
            for paragraph in registry.failures.summary():  # the search went on without them
                self.note(paragraph)
            for line in precision_refusals(result.history):
                self.note(line)
            if db is not None and db.damaged:
                self.note(f"tuning database {self.db_path}: {db.damaged} damaged row(s) "
                          "answered nothing; those candidates were judged again")
            rows: list = []
            if result.stopped != "baseline_failed":
                if db is not None:
                    result = adopt_stored_best(result, db, self.key, base, registry, ctx)
                if result.best_ms and result.stopped != "interrupted":
                    result = retime_finalists(
                        result, base, registry, ctx, self.evaluator, self.note,
                        hints=[genome_text(h.steps) for h in self.hints])
                    result, rows = ablate_and_adopt(result, base, registry, ctx,
                                                    self.evaluator, db, self.key)
        replay = apply_trace(base, result.best_steps, registry, ctx)
        settings = {"strategy": self.config.strategy, "seed": self.config.seed,
                    "hints": ", ".join(h.name for h in self.hints) or "none",
                    "tuning database": str(self.db_path) if self.db_path else "none"}
        searched = Searched(self.loaded, result, rows, replay.kernels, self.target,
                            self.module_target, time_unit(self.evaluator),
                            getattr(self.evaluator, "time_sizes", None), settings, registry,
                            self.db_path, self.key, ctx)
        if result.stopped not in ("baseline_failed", "interrupted"):
            self.time_mlx_reference(searched)
        return searched

    def time_mlx_reference(self, searched: Searched) -> None:
        """Time the spec's ``reference_mlx`` (the baseline a user's MLX program has without
        kir) on the GPU, after the search so no candidate's timing overlaps it."""
        if self.loaded.spec.reference_mlx is None:
            return
        if self.modelled:
            searched.mlx_reference_note = "not timed: no GPU (the cost model does not model MLX)"
        else:
            from kir.measure.mlx_reference import time_reference_mlx

            try:
                timing = time_reference_mlx(self.loaded.bound)
            except KirError as exc:
                searched.mlx_reference_note = f"not timed: {exc.message}"
            else:
                searched.mlx_reference_ms = timing.median_ms
        text = f"{searched.mlx_reference_ms:.4g} ms (measured, mx.compile)" \
            if searched.mlx_reference_ms is not None else searched.mlx_reference_note
        searched.settings[f"MLX reference ({self.loaded.spec.reference_mlx})"] = text


def adopt(result, base, steps, time_ms: float, registry, ctx, why: str,
          note: Callable[[str], None] | None = None):
    """``result`` with the kernel ``steps`` make from ``base`` as its best (at ``time_ms``),
    saying ``why`` (on stderr unless ``note`` says where)."""
    import sys

    replay = apply_trace(base, steps, registry, ctx)
    line = (f"{why} ({time_ms:.4g} ms against {result.best_ms:.4g} ms): that kernel is the "
            "result")
    (note or (lambda text: print(text, file=sys.stderr)))(line)
    return dataclasses.replace(result, best_steps=tuple(replay.applied),
                               best_kernel=replay.kernel, best_ms=time_ms)


def adopt_stored_best(result, db, key, base, registry, ctx):
    """When the tuning database holds a faster valid kernel under ``key`` than this search
    found (an earlier, longer search), that kernel is the result: the written kernel is
    always the fastest one known. Its steps must still replay to the same kernel."""
    from kir.rules import parse_step

    found = db.best(key)
    if not found or result.best_ms is None or found[1] >= result.best_ms:
        return result
    try:
        steps = [parse_step(text, registry) for text in found[0]]
        replayed = apply_trace(base, steps, registry, ctx).kernel
    except KirError:
        return result  # a rule renamed or removed since: the stored row cannot be rebuilt
    known = db.lookup(key, replayed.fingerprint())
    if known is None or not known.ok or known.time_ms != found[1]:
        return result  # the rules changed what those steps build
    return adopt(result, base, steps, found[1], registry, ctx,
                 "the tuning database holds a faster kernel from an earlier search")


def ablate_and_adopt(result, base, registry, ctx, evaluator, db, key):
    """The transfer table of the winning trace; when a kernel in it (the winner without one
    step) is faster than the winner, that kernel becomes the result, so the written kernel
    is always the fastest one measured, and the table is made once more for it (the
    ablation costs an evaluation per step, so no more rounds than that)."""
    from kir.report import ablate

    rows = ablate(base, result.best_steps, result.best_ms, registry, ctx, evaluator, db, key)
    faster = [r for r in rows if r.time_without_ms is not None
              and r.time_without_ms < result.best_ms]
    if not faster:
        return result, rows
    winner = min(faster, key=lambda r: r.time_without_ms)
    rest = [s for s in result.best_steps if str(s) != winner.step]
    time_ms = winner.time_without_ms
    retime = getattr(evaluator, "retime", None)
    if callable(retime) and not result.modelled:
        # The winner's time is its median alone, in turns (kir.api.finalists); the ablated
        # kernel's is a timing of its own, maybe the search's: compare them in turns too.
        time_ms = faster_in_turns(result.best_kernel,
                                  apply_trace(base, rest, registry, ctx).kernel, retime)
        if time_ms is None:
            return result, rows
    result = adopt(result, base, rest, time_ms, registry, ctx,
                   f"the winner without {winner.step} is faster")
    return result, ablate(base, result.best_steps, result.best_ms, registry, ctx, evaluator,
                          db, key)


# Loop iterations (kir.interp's steps) the unrewritten kernel may take at sizes a search
# derives for validation: every candidate is checked on the interpreter at them, often
# slower than the original (a widened block runs more lanes a chunk). 2^15 steps is about
# 0.15 s of attention on a 2-core VM; a FlashAttention spec's defaults (4 heads, 256
# queries) took 278,600, and validating each candidate there cost 6.6 s on the H200's host.
CHECK_STEPS = 1 << 15


def _within_check_steps(loaded):
    """Whether the unrewritten kernel, run on the interpreter at some sizes (seed 0's
    inputs), stays within :data:`CHECK_STEPS` loop iterations: a measure of the work there
    that does not depend on the machine (so the sizes, part of the tuning database's key,
    are the same everywhere). A kernel that fails otherwise is left to the search to
    report."""
    from kir.errors import StepLimitError
    from kir.interp import run_kernel
    from kir.limits import current

    def fits(sizes: dict[str, int]) -> bool:
        try:
            bound = loaded.spec.bind({**loaded.bound.sizes, **sizes})
        except KirError:
            return True  # sizes the spec's constraints refuse are not validated at
        try:
            run_kernel(loaded.kernel, bound.make_inputs(0), bound.sizes,
                       max_steps=CHECK_STEPS, time_limit_s=current().interp_s)
        except StepLimitError:
            return False
        except KirError:
            return True
        return True

    return fits
