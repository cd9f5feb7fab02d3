"""Validation: the cases a candidate is judged on and the check every evaluator runs.

A candidate is verified against the target's limits, then run on the numpy interpreter on two
random input sets at the spec's sizes (or its check sizes) and, when the spec gives ``ragged``
sizes, on one more at those (the same rewritten kernel: its grid expressions and scalar
arguments are re-evaluated with the ragged sizes), and compared with the reference (the
spec's reference function, or the unrewritten kernel). A rejection says why:
``compile_error`` (verification), ``invalid`` (mismatch, with the worst error), ``nan``,
``crash`` (the run raised, e.g. an out-of-bounds access), ``timeout`` (the interpreter's step
limit, or the wall clock).

:class:`Validating` holds the cases and a pool of worker processes that checks candidates
(:mod:`kir.measure.cpu_pool`); the evaluators (:mod:`kir.measure.model`,
:mod:`kir.measure.mlx`) build on it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from kir import ir
from kir.driver.load import Loaded
from kir.errors import KirError, RaceError, StepLimitError
from kir.ir import Kernel
from kir.limits import WALL_FACTOR, current
from kir.measure.cpu_pool import CheckPool
from kir.search.evaluator import Evaluation, Status
from kir.search.phases import Phases
from kir.spec.compare import CheckResult, compare_outputs, nan_notes

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
    # Whether the run looks for shared-memory races (kir.interp.races): on the first case
    # only, the smallest, as a race is in the code, not in the data or the sizes; the others
    # run without the marks' cost (a third to twice an interpreter run's time, which halved
    # the attention search's rate on the H200 when every case paid it). The unrewritten
    # kernel's own runs, which make the cases, look for races at every size.
    races: bool = True


@dataclass(frozen=True)
class CheckContext:
    """Everything a worker needs to judge a candidate (pickled once per worker)."""

    cases: tuple[Case, ...]
    max_steps: int
    profile: str | None = None  # a cost-model profile: count case 0 and estimate
    notes: tuple[str, ...] = field(default=())
    scalars_used: frozenset[str] = frozenset()  # scalar params the original kernel reads
    # The target candidates are for (a kir.backends.TARGETS name): its limits are verified
    # and its emitter must accept the candidate (with ``bound``, the spec at the compiled
    # sizes), or the candidate could never be written out.
    target: str = "metal"
    bound: Any = None
    # Wall-clock seconds one candidate's runs may take together (the ``candidate_s`` limit):
    # past them it is "timeout", in a worker or in the search's own process alike.
    time_limit_s: float | None = None
    # The cost model prices at ``model_sizes`` (the compiled sizes) when they differ from
    # case 0's, from counts at a few smaller size sets (:func:`with_model_sizes`; inputs
    # made with ``model_seed``).
    model_sizes: Mapping[str, int] | None = None
    model_seed: int = 0


def scalars_used(kernel: Kernel) -> frozenset[str]:
    """Scalar parameters ``kernel`` reads anywhere."""
    names = {p.name for p in kernel.params if not p.is_buffer}
    return frozenset(n.name for n in kernel.body.walk()
                     if isinstance(n, ir.Var) and n.name in names)


def scalars_kept(kernel: ir.Kernel) -> frozenset[str]:
    """Scalar parameters ``kernel`` reads, and those it declares it does not depend on
    (``Launch.ignores``): a scalar the original reads that is in neither was baked in."""
    return scalars_used(kernel) | frozenset(kernel.launch.ignores)


def sizes_baked_in(kernel: ir.Kernel, original_scalars: frozenset[str]) -> bool:
    """Whether ``kernel`` is right only at the sizes it was rewritten at: a rule said so
    (``Launch.specialized``), or it stopped reading a scalar the original reads
    (``original_scalars``) without declaring it does not depend on it."""
    return kernel.launch.specialized or not original_scalars <= scalars_kept(kernel)


def copy_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """A copy of an input set whose arrays a run may write without touching the original."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def sizes_label(sizes: dict[str, int]) -> str:
    """``rows=8, cols=64``."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def seeds_at(index: int, seeds: Sequence[int]) -> Sequence[int]:
    """The seeds of the ``index``-th size set: all of them at the first, one at each further
    one. The further (ragged) sets are there for bounds and tails, which seldom depend on the
    values, and the inputs still differ from case to case; a second input there was most of
    the cost of validating an attention candidate (N=200 against the check size's N=64),
    and that validation is what bounded a GPU search of attention (BENCHMARKS.md, round 22).
    The GPU checks every timed candidate once more, on other inputs, at the compiled sizes."""
    return seeds if index == 0 or not seeds else (seeds[index % len(seeds)],)


def build_cases(loaded: Loaded, validate_sizes: Sequence[dict[str, int]] | None = None,
                seeds: Sequence[int] = DEFAULT_SEEDS, max_steps: int = DEFAULT_MAX_STEPS,
                check_sizes: dict[str, int] | None = None
                ) -> tuple[tuple[Case, ...], tuple[str, ...]]:
    """The validation cases for ``loaded``: ``seeds`` at its sizes, then one seed at each of
    ``validate_sizes`` (overrides; default: the spec's ``ragged`` sizes; the next seed in
    turn, so the inputs differ from the first set's). A size set at which
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
    notes: list[str] = []
    binds = [base]
    for overrides in extra:
        merged = {**base.sizes, **overrides}
        broken = spec.broken_requirements(merged)
        if broken:  # ragged sizes on top of check sizes may break a constraint
            notes.append(f"not validating at {sizes_label(merged)}: it breaks the spec's "
                         f"require {broken[0]!r}")
            continue
        binds.append(spec.bind(merged))
    cases: list[Case] = []
    for i, bound in enumerate(binds):
        if i and bound.sizes == base.sizes:
            continue
        tolerances = {o: bound.tolerance(spec.args[o].dtype) for o in bound.outputs}
        found: list[Case] = []
        for seed in seeds_at(i, seeds):
            inputs = bound.make_inputs(seed)
            expected = bound.reference(copy_inputs(inputs))
            baseline = None
            try:
                baseline = run_kernel(loaded.kernel, copy_inputs(inputs), bound.sizes,
                                      max_steps=max_steps, time_limit_s=current().interp_s)
            except KirError as exc:
                if not i or isinstance(exc, RaceError):  # a race is the kernel's at any size
                    raise
                notes.append(f"not validating at {sizes_label(bound.sizes)}: the original "
                             f"kernel fails there ({exc.message})")
                found = []
                break
            if expected is None:
                expected = {o: baseline[o] for o in bound.outputs}
            elif i and not compare_outputs(baseline, expected, tolerances.get).ok:
                notes.append(f"not validating at {sizes_label(bound.sizes)}: the original "
                             "kernel disagrees with the reference there")
                found = []
                break
            notes.extend(n for n in nan_notes(expected, f" at {sizes_label(bound.sizes)}")
                         if n not in notes)
            found.append(Case(f"sizes {sizes_label(bound.sizes)}, seed {seed}",
                              dict(bound.sizes), inputs, expected, tolerances,
                              bool(i) or moved, races=not found and not cases))
        cases.extend(found)
    return tuple(cases), tuple(notes)


def check_kernel(kernel: Kernel, ctx: CheckContext) -> Evaluation:
    """Verify and validate ``kernel`` on every case; with ``ctx.profile`` also count case 0
    and return the modelled time. Module-level so worker processes can run it."""
    from kir.backends import TARGETS, emit
    from kir.ir.verify import verify

    try:
        verify(kernel, TARGETS[ctx.target])
    except KirError as exc:
        return Evaluation.rejected(Status.COMPILE_ERROR, f"verify: {exc}")
    if ctx.bound is not None:
        try:
            emit(kernel, ctx.bound, ctx.target)
        except KirError as exc:
            return Evaluation.rejected(Status.COMPILE_ERROR,
                                       f"the {ctx.target} emitter refuses it: {exc}")
    counters = None
    worst = 0.0
    cases, specialized = judged_cases(kernel, ctx)
    if not cases and ctx.profile is not None:
        return Evaluation.rejected(Status.NOT_APPLICABLE, NOT_MODELLABLE)
    deadline = None if ctx.time_limit_s is None else time.process_time() + ctx.time_limit_s
    for i, case in enumerate(cases):
        # Case 0's counts are the model's unless it prices at other sizes (model_counts).
        count = ctx.profile is not None and i == 0 and ctx.model_sizes is None
        left = None if deadline is None else max(deadline - time.process_time(), 0.001)
        verdict, outputs, counted = run_case(kernel, case, ctx.max_steps, count, left)
        if verdict is not None:
            return verdict
        counters = counted if count else counters
        verdict, err = _compare(outputs, case)
        if verdict is not None:
            return verdict
        worst = max(worst, err)
    notes = SPECIALIZED_NOTE if specialized else {}
    if ctx.profile is None:
        return Evaluation(Status.OK, 0.0, "", {"max_abs_err": worst, "cases": len(cases), **notes})
    from kir.measure.model_sizes import model_counts

    verdict, counters = model_counts(kernel, ctx, cases[0], counters)
    if verdict is not None:
        return verdict
    return model_time(counters, ctx.profile, worst, len(cases), notes)


# The cost model counts on the interpreter at the check sizes, where a kernel specialized to
# the compiled sizes cannot run: there is nothing to judge it by.
NOT_MODELLABLE = ("specialized to the compiled sizes, but the cost model counts at the check "
                  "sizes: use check sizes equal to the compiled ones to model it")
SPECIALIZED_NOTE = {"specialized": "validated at the spec's sizes only"}


def judged_cases(kernel: Kernel, ctx: CheckContext) -> tuple[list[Case], bool]:
    """The cases ``kernel`` is judged on, and whether it is specialized: a kernel that no
    longer reads a size parameter the original reads was specialized to the spec's sizes (a
    rule baked the value in), and other sizes cannot check it."""
    specialized = sizes_baked_in(kernel, ctx.scalars_used)
    return [c for c in ctx.cases if not (specialized and c.ragged)], specialized


def model_time(counters: Any, profile: str, worst: float, cases: int,
               notes: dict[str, str]) -> Evaluation:
    """The cost model's verdict from the counts of a validated kernel's first case."""
    from kir.cost import estimate

    cost = estimate(counters, profile)
    return Evaluation.timed(cost.time_ms, modelled=True, bound=cost.bound,
                            profile=cost.profile, breakdown=dict(cost.breakdown),
                            counters=counters.as_dict(), max_abs_err=worst,
                            cases=cases, **notes)


def run_case(kernel: Kernel, case: Case, max_steps: int, count: bool,
             time_limit_s: float | None = None):
    from kir.interp import Counters, run_kernel

    counters = Counters() if count else None
    try:
        outputs = run_kernel(kernel, copy_inputs(case.inputs), case.sizes, max_steps=max_steps,
                             counters=counters, time_limit_s=time_limit_s, races=case.races)
    except StepLimitError as exc:
        return Evaluation.rejected(Status.TIMEOUT, f"{case.label}: {exc}"), None, None
    except KirError as exc:
        return Evaluation.rejected(Status.CRASH, f"{case.label}: {exc}"), None, None
    except (RecursionError, MemoryError) as exc:
        return Evaluation.rejected(Status.CRASH, f"{case.label}: {type(exc).__name__}"), None, None
    except Exception as exc:  # noqa: BLE001 - a rule produced something the run chokes on
        return Evaluation.rejected(Status.CRASH, f"{case.label}: interpreter raised {type(exc).__name__}: {exc}"), None, None
    return None, outputs, counters


def _compare(outputs: dict[str, np.ndarray], case: Case) -> tuple[Evaluation | None, float]:
    return verdict_of(compare_outputs(outputs, case.expected, case.tolerances.get), case)


def verdict_of(result: CheckResult, case: Case) -> tuple[Evaluation | None, float]:
    """A rejection ("nan" or "invalid", with the worst errors) or None, and the max error."""
    for check in result.outputs:
        if check.nonfinite:
            return Evaluation.rejected(Status.NAN, f"{case.label}: output {check.name!r} has {check.nonfinite} NaN/Inf "
                "where the reference is finite", output=check.name), 0.0
    if not result.ok:
        failed = [o for o in result.outputs if not o.ok]
        return Evaluation.rejected(Status.INVALID, f"{case.label}: " + "; ".join(o.describe() for o in failed),
            max_abs_err=result.max_abs_err,
            max_rel_err=max(o.max_rel_err for o in failed)), result.max_abs_err
    return None, result.max_abs_err


class Validating:
    """Shared set-up: validation cases and a lazily started worker pool. ``stats`` counts
    where the evaluation time went (``check_wait_s``: this process waiting for validation,
    or running it); :meth:`phases` says it to the search."""

    validate_phase = "validate (interpreter)"

    def __init__(self, loaded: Loaded, profile: str | None, *,
                 validate_sizes: Sequence[dict[str, int]] | None, seeds: Sequence[int],
                 max_steps: int, workers: int, timeout_s: float,
                 check_sizes: dict[str, int] | None = None, target: str = "metal") -> None:
        cases, notes = build_cases(loaded, validate_sizes, seeds, max_steps, check_sizes)
        self.loaded = loaded
        # ``timeout_s`` is CPU time, counted by the candidate's own runs (a busy machine does
        # not turn a slow candidate into a "timeout"); the pool kills a worker that has not
        # answered after WALL_FACTOR times as long on the wall clock (a hang in C code).
        self.context = CheckContext(cases, max_steps, profile, notes,
                                    scalars_used(loaded.kernel), target, loaded.bound,
                                    time_limit_s=timeout_s)
        self.notes = notes
        self.workers = workers
        self.timeout_s = timeout_s
        self._pool: CheckPool | None = None
        self._pool_lock = threading.Lock()  # threads of a steady search share one pool
        self.stats: Counter = Counter()

    def check(self, kernel: Kernel) -> Evaluation:
        """Verify, validate (and with a profile, model) ``kernel`` in this process."""
        started = time.perf_counter()
        try:
            return check_kernel(kernel, self.context)
        finally:
            self.stats["check_wait_s"] += time.perf_counter() - started

    def check_many(self, kernels: Sequence[Kernel]) -> Iterator[Evaluation]:
        """:meth:`check` for each kernel in worker processes, verdicts in order."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = CheckPool(check_kernel, self.context, workers=self.workers,
                                       timeout_s=self.timeout_s * WALL_FACTOR)
            pool = self._pool
        return self._waited(pool.run(list(kernels)))

    def check_one(self, kernel: Kernel) -> Evaluation:
        """:meth:`check` in a worker process; threads may call it side by side (a steady
        search judges one candidate a thread), sharing the workers. In this process when
        there is one worker: a process round trip would buy nothing."""
        if self.workers <= 1:
            return self.check(kernel)
        verdicts = self.check_many([kernel])
        try:
            return next(verdicts)
        finally:
            verdicts.close()

    def cancel_checks(self) -> None:
        """Stop the validations under way or waiting, of every thread
        (:meth:`CheckPool.cancel`)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.cancel()

    def _waited(self, verdicts: Iterator[Evaluation]) -> Iterator[Evaluation]:
        # Only the waits count: the workers validate while this process does other work
        # (a GPU job, the search's bookkeeping), and that time is not validation's.
        try:
            while True:
                started = time.perf_counter()
                verdict = next(verdicts, None)
                self.stats["check_wait_s"] += time.perf_counter() - started
                if verdict is None:
                    return
                yield verdict
        finally:
            close = getattr(verdicts, "close", None)
            if close is not None:
                close()

    def phases(self) -> Phases:
        """Where evaluation time went (:mod:`kir.search.phases`): the wait for validation."""
        return Phases({self.validate_phase: self.stats["check_wait_s"]})

    def close(self) -> None:
        """Stop the worker processes (a later batch starts new ones)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
