"""The search driver: apply genomes, deduplicate, consult the tuning database, evaluate,
keep the history and the best.

:func:`search` is the entry point; the strategies themselves (evolve, random, greedy) live in
:mod:`kir.search.strategies` and only ask a :class:`Session` to judge genomes.
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from kir.errors import KirError
from kir.ir import Kernel
from kir.rules import Applied, Rule, RuleContext, RuleError, Step, apply_trace
from kir.search.db import TuningDB, TuningKey, kir_version
from kir.search.evaluator import Evaluation, Evaluator, Status
from kir.search.genome import Genome, canonical, genome_text
from kir.search.phases import APPLY, DATABASE, EVALUATIONS, Phases, evaluator_phases

from kir.search.records import (  # noqa: F401 - importable from here as before
    STRATEGIES,
    EvalRecord,
    Progress,
    SearchConfig,
    SearchResult,
)


class StopSearch(Exception):
    """Raised inside a strategy when the budget or the time limit is reached."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Candidate:
    """A judged genome: normalized steps, the kernel they make, its verdict."""

    genome: Genome
    kernel: Kernel | None
    fingerprint: str
    evaluation: Evaluation

    @property
    def fitness(self) -> float:
        """Lower is better; anything not "ok" is worse than every valid candidate."""
        ev = self.evaluation
        return ev.time_ms if ev.ok and ev.time_ms is not None else float("inf")


@dataclass
class Session:
    """The state one search shares between its strategy and the bookkeeping."""

    base: Kernel
    registry: Mapping[str, Rule]
    evaluator: Evaluator
    ctx: RuleContext
    config: SearchConfig
    db: TuningDB | None = None
    progress: Callable[[Progress], None] | None = None
    key: TuningKey | None = None  # the tuning database key (default: from ctx.sizes)
    rng: random.Random = field(init=False)
    seen: dict[str, Candidate] = field(init=False, default_factory=dict)
    history: list[EvalRecord] = field(init=False, default_factory=list)
    counts: Counter = field(init=False, default_factory=Counter)
    best: Candidate | None = field(init=False, default=None)
    baseline: Candidate | None = field(init=False, default=None)
    calls: int = field(init=False, default=0)
    cached: int = field(init=False, default=0)
    duplicates: int = field(init=False, default=0)
    _applied: dict[Genome, Applied] = field(init=False, default_factory=dict)
    _start: float = field(init=False, default_factory=time.monotonic)
    _start_cpu: float = field(init=False, default_factory=time.process_time)
    _seconds: Counter = field(init=False, default_factory=Counter)  # the engine's phases
    interrupted: bool = field(init=False, default=False)  # Ctrl-C arrived (see _noting_ctrl_c)
    _evaluator_before: Phases = field(init=False, default_factory=Phases)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.config.seed)
        self._evaluator_before = evaluator_phases(self.evaluator)
        if self.db is not None and self.key is None:
            self.key = default_key(self.base, self.evaluator, self.ctx.sizes)

    # --------------------------------------------------------------------------- helpers

    def apply(self, genome: Sequence[Step]) -> Applied:
        """Apply a genome to the base kernel (memoized; rules are deterministic)."""
        started = time.perf_counter()
        try:
            return self._apply(tuple(genome))
        finally:
            self._seconds[APPLY] += time.perf_counter() - started

    def _apply(self, genome: Genome) -> Applied:
        hit = self._applied.get(genome)
        if hit is not None:
            return hit
        failures = getattr(self.registry, "failures", None)
        stopped = [s.rule for s in genome if failures is not None and not failures.usable(s.rule)]
        if stopped:  # each try would cost the rule's whole time limit again
            raise RuleError(f"rule {stopped[0]} is not tried again: it ran past its time limit",
                            rule=stopped[0], origin=None, timed_out=True)
        if len(self._applied) > 4096:  # bound memory on long searches
            self._applied.clear()
        # Mutants share a prefix with a parent already applied: start from the longest one.
        cut = next((k for k in range(len(genome) - 1, 0, -1) if genome[:k] in self._applied), 0)
        start = self._applied[genome[:cut]] if cut else None
        if start is None:
            hit = apply_trace(self.base, genome, self.registry, self.ctx)
        else:
            rest = apply_trace(start.kernel, genome[cut:], self.registry, self.ctx)
            hit = Applied(rest.kernel, start.applied + rest.applied,
                          start.skipped + rest.skipped, start.kernels + rest.kernels)
        self._applied[genome] = hit
        self._applied.setdefault(hit.applied, hit)
        return hit

    # ------------------------------------------------------------------------ judging

    def judge(self, genome: Sequence[Step]) -> tuple[Candidate, bool]:
        """Judge one genome; returns the candidate and whether it was new."""
        return self.judge_many([genome])[0]

    def judge_many(self, genomes: Sequence[Sequence[Step]]) -> list[tuple[Candidate, bool]]:
        """Judge a batch of genomes: apply and deduplicate each, answer what the tuning
        database knows, hand the rest to the evaluator (``evaluate_many`` when it has it),
        recording every result as it arrives. At the budget or time limit, records what
        completed and raises :class:`StopSearch`."""
        out: list[tuple[Candidate, bool]] = []
        fresh: list[Candidate] = []
        batch: dict[str, Candidate] = {}  # new in this batch, not yet evaluated
        stop: str | None = None
        for genome in genomes:
            stop = self._stop_reason(len(fresh))
            if stop:
                break
            cand, new, pending = self.admit(genome, batch)
            if pending:
                fresh.append(cand)
            out.append((cand, new))
        done = self._evaluate(fresh)
        if done < len(fresh):
            stop = stop or self._stop_reason(0) or "time"
        if stop:
            raise StopSearch(stop)
        return out

    def admit(self, genome: Sequence[Step],
              pending: dict[str, Candidate]) -> tuple[Candidate, bool, bool]:
        """Apply and deduplicate one genome and answer it from the tuning database when it
        can. Returns the candidate, whether it is new, and whether it still needs the
        evaluator (then it is added to ``pending``, the candidates awaiting a verdict, by
        fingerprint; a later duplicate of one of them is answered with it)."""
        genome = canonical(genome, self.registry)
        try:
            applied = self.apply(genome)
            started = time.perf_counter()
            fp = fingerprint(applied.kernel)  # a malformed kernel fails here, not later
            self._seconds[APPLY] += time.perf_counter() - started
        except Exception as exc:  # noqa: BLE001 - a rule's bug rejects the candidate only
            # (a RuleError names the rule and its file, and the registry counted it)
            text = genome_text(genome)
            why = exc.message if isinstance(exc, RuleError) else _describe(exc, "applying")
            cand = Candidate(tuple(genome), None, "apply:" + "|".join(text),
                             Evaluation.rejected(Status.CRASH, why))
            known = self.seen.get(cand.fingerprint)
            if known is None:
                self._record(cand, cached=False)
            return known or cand, known is None, False
        known = self.seen.get(fp) or pending.get(fp)
        if known is not None:
            self.duplicates += 1
            return known, False, False
        cached = self._lookup(fp)
        cand = Candidate(applied.applied, applied.kernel, fp, cached or _PENDING)
        if cached is not None:
            self._record(cand, cached=True)
            return cand, True, False
        pending[fp] = cand
        return cand, True, True

    def complete(self, cand: Candidate, evaluation: Evaluation) -> None:
        """Record the evaluator's verdict on ``cand`` (in the tuning database as well)."""
        cand.evaluation = evaluation
        self.calls += 1
        if self.db is not None and self.key is not None:
            started = time.perf_counter()
            self.db.record(self.key, cand.fingerprint, genome_text(cand.genome), evaluation)
            self._seconds[DATABASE] += time.perf_counter() - started
        self._record(cand, cached=False)

    def _stop_reason(self, pending: int) -> str | None:
        if self.interrupted:
            return "interrupted"
        if len(self.history) + pending >= self.config.budget:
            return "budget"
        limit = self.config.time_limit_s
        if limit is not None and time.monotonic() - self._start >= limit:
            return "time"
        return None

    def _evaluate(self, fresh: list[Candidate]) -> int:
        """Evaluate new candidates in order, recording each; returns how many completed
        (fewer when the time limit ran out in between)."""
        if not fresh:
            return 0
        many = getattr(self.evaluator, "evaluate_many", None)
        iterator = None
        if callable(many) and len(fresh) > 1:
            iterator = iter(many([cand.kernel for cand in fresh]))
        done = 0
        for cand in fresh:
            if done and self._stop_reason(0) in ("time", "interrupted"):
                break
            evaluation, iterator = self._call(iterator, cand.kernel)
            self.complete(cand, evaluation)
            done += 1
        if done < len(fresh) and hasattr(iterator, "close"):
            iterator.close()  # type: ignore[union-attr]
        return done

    def _call(self, iterator, kernel: Kernel) -> tuple[Evaluation, object]:
        """One verdict, from the batch iterator or ``evaluate``; an exception rejects this
        candidate only (and, from a batch iterator, which cannot go on after raising, sends
        the rest of the batch through ``evaluate``)."""
        try:
            result = next(iterator) if iterator is not None else self.evaluator.evaluate(kernel)
        except StopIteration:
            return Evaluation.rejected(Status.CRASH, "evaluate_many returned too few results"), None
        except KirError as exc:
            return Evaluation.rejected(Status.INVALID, exc.message), None
        except Exception as exc:  # noqa: BLE001 - a crashing candidate must not end the search
            return Evaluation.rejected(Status.CRASH, _describe(exc, "evaluating")), None
        if not isinstance(result, Evaluation):
            result = Evaluation.rejected(Status.CRASH, f"evaluator returned {type(result).__name__}")
        return result, iterator

    def _lookup(self, fp: str) -> Evaluation | None:
        if self.db is None or self.key is None:
            return None
        started = time.perf_counter()
        try:
            return self.db.lookup(self.key, fp)
        finally:
            self._seconds[DATABASE] += time.perf_counter() - started

    def _record(self, cand: Candidate, *, cached: bool) -> None:
        self.seen[cand.fingerprint] = cand
        ev = cand.evaluation
        self.counts[ev.status] += 1
        if cached:
            self.cached += 1
        if not cand.genome and self.baseline is None and cand.kernel is not None:
            self.baseline = cand
        if ev.ok and (self.best is None or cand.fitness < self.best.fitness):
            self.best = cand
            note_best = getattr(self.evaluator, "note_best", None)
            if callable(note_best):  # e.g. the GPU evaluator gives up timing losers early
                note_best(cand.fitness, cand.kernel)  # and races near-best ones against it
        best_ms = self.best.evaluation.time_ms if self.best else None
        self.history.append(EvalRecord(len(self.history), genome_text(cand.genome),
                                       cand.fingerprint, ev.status, ev.time_ms, ev.error,
                                       best_ms, cached, time.monotonic() - self._start))
        if self.progress is not None:
            valid = self.counts["ok"]
            self.progress(Progress(len(self.history), valid, len(self.history) - valid,
                                   best_ms, self.baseline_ms, self.config.budget, self.cached))

    @property
    def baseline_ms(self) -> float | None:
        return self.baseline.evaluation.time_ms if self.baseline else None

    def phases(self) -> Phases:
        """Where this search's seconds went: applying rules (with fingerprinting), the
        tuning database, then the evaluator's phases since the search started."""
        own = Phases({APPLY: self._seconds[APPLY], DATABASE: self._seconds[DATABASE]},
                     {EVALUATIONS: len(self.history)},
                     process_cpu_s=time.process_time() - self._start_cpu)
        return own + evaluator_phases(self.evaluator).since(self._evaluator_before)

    def result(self, stopped: str) -> SearchResult:
        """The search's outcome so far."""
        best = self.best
        return SearchResult(
            best.genome if best else (), best.kernel if best and best.kernel else self.base,
            best.evaluation.time_ms if best else None, self.baseline_ms, tuple(self.history),
            dict(self.counts), time.monotonic() - self._start, bool(self.evaluator.modelled),
            self.calls, self.cached, self.duplicates, stopped,
            self.evaluator.target, self.evaluator.device, self.phases())


_PENDING = Evaluation.rejected(Status.NOT_APPLICABLE, "not evaluated yet")


def _describe(exc: BaseException, doing: str) -> str:
    return f"{doing} raised {type(exc).__name__}: {exc}"


def default_key(kernel: Kernel, evaluator: Evaluator, sizes: Mapping[str, int],
                validation: str = "") -> TuningKey:
    """The tuning database key of a search of ``kernel`` at ``sizes`` through ``evaluator``;
    ``validation`` fingerprints what verdicts were judged by (see :class:`TuningKey`). An
    evaluator with a ``descriptor`` (:class:`kir.search.device.DeviceDescriptor`) adds its
    MLX version and operating system."""
    device = getattr(evaluator, "descriptor", None)  # a DeviceDescriptor, when it has one
    return TuningKey.make(fingerprint(kernel), dict(sizes), evaluator.target, evaluator.device,
                          kir_version(), kernel.name, validation,
                          getattr(device, "mlx", ""), getattr(device, "os", ""))


def fingerprint(kernel: Kernel) -> str:
    """The kernel's content hash (:meth:`Kernel.fingerprint`)."""
    return kernel.fingerprint()


def search(kernel: Kernel, registry: Mapping[str, Rule], evaluator: Evaluator,
           ctx: RuleContext | None = None, config: SearchConfig | None = None,
           db: TuningDB | None = None, hints: Sequence[Sequence[Step]] = (),
           progress: Callable[[Progress], None] | None = None,
           key: TuningKey | None = None) -> SearchResult:
    """Search for the fastest valid rewrite of ``kernel``.

    The unrewritten kernel is evaluated first (the baseline; when it is rejected the search
    stops there, ``stopped="baseline_failed"``), then ``hints`` (known CUDA practice), then
    whatever the strategy proposes, until the budget, the time limit, Ctrl-C or the search
    space runs out. With ``db`` every evaluation is written as it completes and
    candidates already measured are answered from it, so a killed search resumes and a
    repeated one finishes at once. ``key`` is the database key (default:
    :func:`default_key` at the rule context's sizes); it must say everything a verdict
    depends on, or a stored verdict answers a search it does not apply to.
    """
    from kir.search.strategies import run_strategy

    session = Session(kernel, registry, evaluator, ctx or RuleContext(),
                      config or SearchConfig(), db, progress, key)
    try:
        with _noting_ctrl_c(session):
            stopped = run_strategy(session, [tuple(h) for h in hints])
    except StopSearch as stop:
        stopped = stop.reason
    except KeyboardInterrupt:
        # Ctrl-C: every completed evaluation is recorded, so the best so far is as good a
        # result as any; the caller writes it and exits 130.
        stopped = "interrupted"
    return session.result(stopped)


@contextlib.contextmanager
def _noting_ctrl_c(session: Session):
    """While the search runs, Ctrl-C also sets ``session.interrupted`` (then raises
    KeyboardInterrupt as Python's own handler does). Python drops an exception raised while
    it runs a finalizer or a callback ("Exception ignored in ..."), so a KeyboardInterrupt
    can vanish and the search would run on to its budget: seen when Ctrl-C came while a
    validation worker was being forked ("Exception ignored in: <function _releaseLock>",
    logging's after-fork callback; 1 of 15 interrupted searches on a loaded machine). The
    flag stops it at the next candidate regardless. Only in the main thread, and only over
    Python's default handler (a caller's own handler, or Ctrl-C ignored, is left as is)."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def note(signum, frame):  # noqa: ARG001
        session.interrupted = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
