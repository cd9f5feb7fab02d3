"""Location-free evaluation jobs, and the two kinds of worker that answer them.

A search that runs its candidates on other machines cannot send them a path: the jobs carry
content. :class:`EvalContext` holds what every job of one search shares — the unrewritten
kernel as IR text, the spec as a :class:`~kir.measure.bundle.SpecBundle` (TOML text and the
reference module's source), the compiled and check sizes, the seeds, and the
:class:`~kir.search.device.DeviceDescriptor` the jobs are built for — and is addressed by its
hash (:attr:`EvalContext.digest`), so a worker builds its validation cases once per search and
caches them. :class:`EvalJob` is one candidate: its IR text, its fingerprint (the worker
checks that the text parses back to the same kernel) and where timing may give up.

Work is split as on one machine (:mod:`kir.measure.mlx`): :func:`validate` runs the candidate
on the interpreter against the spec (any CPU can do it), and a :class:`DeviceService` — one
per device — finishes a validated candidate: the GPU check and the timing in its own
:class:`~kir.measure.gpu.pool.GpuPool` (its timing lock shared by every service of that device
on the host), or, for a modelled device, the cost model's count and price. A service refuses
a job built for another device (:class:`WrongDevice`); the coordinator never times anything.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from kir.driver.load import Loaded
from kir.errors import KirError
from kir.ir import Kernel
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.measure.bundle import SpecBundle
from kir.measure.cases import (
    DEFAULT_MAX_STEPS,
    DEFAULT_SEEDS,
    CheckContext,
    build_cases,
    check_kernel,
    scalars_used,
)
from kir.measure.model_sizes import with_model_sizes
from kir.search.device import DeviceDescriptor
from kir.search.evaluator import Evaluation, Status

MODEL_PREFIX = "model:"


class WrongDevice(KirError):
    """A job reached a worker of another device: it is not judged there."""


@dataclass(frozen=True)
class EvalContext:
    """What every job of one search shares; nothing in it names a file of the coordinator.
    ``source_name`` labels the kernel in messages (the user's file name)."""

    kernel_ir: str
    source_name: str
    bundle: SpecBundle
    sizes: dict[str, int]  # the compiled sizes (GPU timing)
    device: DeviceDescriptor  # the device the jobs are for
    check_sizes: dict[str, int] | None = None  # the interpreter's sizes, when not compiled
    validate_sizes: tuple[dict[str, int], ...] | None = None
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    max_steps: int = DEFAULT_MAX_STEPS
    warmup: int = 3
    repeat: int = 10

    @classmethod
    def of(cls, loaded: Loaded, device: DeviceDescriptor, **settings: Any) -> "EvalContext":
        """The context of a search of ``loaded`` on ``device``."""
        if loaded.bound is None:
            raise KirError(f"{loaded.path.name} has no spec: remote validation needs one",
                           hint=f"write {loaded.path.with_suffix('.kir.toml').name} beside it")
        validate = settings.pop("validate_sizes", None)
        return cls(portable_ir(loaded.kernel), loaded.path.name,
                   SpecBundle.of(loaded.bound.spec), dict(loaded.bound.sizes), device,
                   validate_sizes=None if validate is None else tuple(map(dict, validate)),
                   **settings)

    @cached_property
    def digest(self) -> str:
        """A hash of the whole context: workers cache what they build from it by this."""
        fields = [self.kernel_ir, self.source_name, self.bundle.digest,
                  json.dumps([self.sizes, self.check_sizes, self.validate_sizes,
                              list(self.seeds), self.max_steps, self.warmup, self.repeat],
                             sort_keys=True), repr(self.device)]
        return hashlib.sha256("\0".join(fields).encode()).hexdigest()[:24]

    @property
    def modelled(self) -> bool:
        return self.device.target.startswith(MODEL_PREFIX)


@dataclass(frozen=True)
class EvalJob:
    """One candidate of the search whose context has ``context`` as digest."""

    context: str
    kernel_ir: str
    fingerprint: str
    give_up_ms: float | None = None
    confirm_below_ms: float | None = None  # see kir.measure.gpu.jobs.GpuJob
    holder_ir: str | None = None  # the kernel holding confirm_below_ms, as IR text

    @classmethod
    def of(cls, context: EvalContext, kernel: Kernel, give_up_ms: float | None = None,
           confirm_below_ms: float | None = None,
           holder: Kernel | None = None) -> "EvalJob":
        return cls(context.digest, portable_ir(kernel), kernel.fingerprint(), give_up_ms,
                   confirm_below_ms, None if holder is None else portable_ir(holder))


# The ``# file:line:col`` comment of an IR line (kir.ir.printer); group 1 is the folder part.
_LOCATION = re.compile(r"(#\s)(?:[^\n]*/)?([^/\n]*:\d+:\d+)[ \t]*$", re.MULTILINE)


def portable_ir(kernel: Kernel) -> str:
    """``kernel`` as IR text whose source locations name files without their folders: the
    messages a worker writes still point at ``softmax.cu:29:5``, and no path of the
    coordinator's travels (the fingerprint, which ignores locations, is unchanged)."""
    return _LOCATION.sub(r"\1\2", print_kernel(kernel))


@dataclass
class Prepared:
    """What a worker builds from a context, once: the kernel and bound spec as loaded from
    the bundle, and the validation cases."""

    loaded: Loaded
    spec_path: Path
    check: CheckContext


_PREPARED: dict[str, Prepared] = {}  # by context digest, per worker process
_GUARD = threading.Lock()
_KEEP = 8  # contexts a worker keeps (a campaign's searches come one after another)


def prepare(context: EvalContext) -> Prepared:
    """The worker's copy of ``context`` (built on first use: the spec written out from the
    bundle and loaded, the cases computed with the reference)."""
    with _GUARD:
        found = _PREPARED.get(context.digest)
        if found is not None:
            return found
        spec_path = context.bundle.materialize()
        spec = _load_spec(spec_path)
        base = parse_kernel(context.kernel_ir, context.source_name)
        loaded = Loaded(base, spec.bind(dict(context.sizes)), Path(context.source_name),
                        context.kernel_ir)
        cases, notes = build_cases(loaded, context.validate_sizes, context.seeds,
                                   context.max_steps, context.check_sizes)
        target = "metal" if context.modelled else context.device.target
        check = CheckContext(cases, context.max_steps, None, notes, scalars_used(base), target,
                             loaded.bound)
        if context.modelled:  # priced at the compiled sizes, as a local ModelEvaluator does
            check, _ = with_model_sizes(check, loaded, context.seeds[0])
        if len(_PREPARED) >= _KEEP:
            _PREPARED.pop(next(iter(_PREPARED)))
        prepared = _PREPARED[context.digest] = Prepared(loaded, spec_path, check)
        return prepared


def _load_spec(path: Path):
    from kir.spec import load_spec

    return load_spec(path)


def candidate(job: EvalJob) -> Kernel:
    """The job's kernel, parsed from its IR text; a text that does not parse back to the
    fingerprint it was sent with raises (a kir bug: nothing to judge)."""
    kernel = parse_kernel(job.kernel_ir, "<candidate>")
    if kernel.fingerprint() != job.fingerprint:
        raise KirError(f"candidate {job.fingerprint}: its IR text parses back to another "
                       f"kernel ({kernel.fingerprint()})",
                       hint="a printer/parser round-trip bug in kir: please report it")
    return kernel


def validate(context: EvalContext, job: EvalJob) -> Evaluation:
    """Verify and validate the job's candidate on the interpreter (any CPU worker): the
    verdict :meth:`kir.measure.cases.Validating.check` gives on one machine."""
    try:
        prepared = prepare(context)
        kernel = candidate(job)
    except KirError as exc:
        return Evaluation.rejected(Status.CRASH, f"the worker cannot rebuild the job: {exc}")
    return check_kernel(kernel, prepared.check)


@dataclass
class DeviceService:
    """The device end of remote evaluation: one per device, kept warm between jobs (a Ray
    actor wraps one). ``role`` is "metal", "cuda", "auto" (this machine's MLX GPU) or
    "model:PROFILE" (the cost model of that Apple GPU); ``runner`` replaces MLX (the CPU
    emulator, in tests). GPU jobs run in a :class:`~kir.measure.gpu.pool.GpuPool` of
    ``gpu_workers`` processes whose timing lock is one file per device on this host."""

    role: str = "auto"
    runner: Any = None
    gpu_workers: int = 1
    gpu_timeout_s: float = 60.0
    gpu_startup_s: float = 60.0
    descriptor: DeviceDescriptor = field(init=False)
    _pool: Any = field(init=False, default=None, repr=False)
    # The last holder's IR text and its emitted call (or None): emitted once, not per job.
    _holder: tuple[str, Any] | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        from kir.measure.device import describe_gpu, describe_model

        if self.role.startswith(MODEL_PREFIX):
            self.descriptor = describe_model(self.role[len(MODEL_PREFIX):])
            return
        target = self.role
        if target == "auto":
            from kir.backends.mlx_runner import available_targets

            have = [t for t in ("metal", "cuda") if t in available_targets()]
            if self.runner is None and not have:
                raise KirError("this worker has no MLX GPU (neither Metal nor CUDA)",
                               hint="start it on a machine with one, or give it a model role "
                                    "(model:apple-m2)")
            target = have[0] if have else "metal"
        elif target not in ("metal", "cuda"):
            raise KirError(f"unknown device role {self.role!r}",
                           hint="use auto, metal, cuda or model:PROFILE")
        self.descriptor = describe_gpu(target, self.runner)

    def describe(self) -> DeviceDescriptor:
        """What this worker announces."""
        return self.descriptor

    def measure(self, context: EvalContext, job: EvalJob, validated: Evaluation) -> Evaluation:
        """Finish a candidate that passed validation (``validated``): the GPU check at the
        compiled sizes and the timing, or the cost model's price. Raises
        :class:`WrongDevice` for a job built for another device."""
        differs = self.descriptor.mismatch(context.device)
        if differs:
            raise WrongDevice(f"this worker is {self.descriptor}, the job was built for "
                              f"{context.device} ({differs})")
        if not validated.ok:
            return validated
        try:
            prepared = prepare(context)
            kernel = candidate(job)
        except KirError as exc:
            return Evaluation.rejected(Status.CRASH, f"the worker cannot rebuild the job: {exc}")
        if context.modelled:
            from kir.measure.model import model_validated

            return model_validated(kernel, prepared.check, validated,
                                   self.descriptor.target[len(MODEL_PREFIX):])
        return self._gpu().run(self._gpu_job(context, prepared, kernel, job))

    def _gpu_job(self, context: EvalContext, prepared: Prepared, kernel: Kernel, job: EvalJob):
        from kir.measure.gpu.jobs import GpuJob

        bound = prepared.loaded.bound
        baseline = None if bound.spec.reference else prepared.loaded.kernel
        holder = None
        if job.holder_ir is not None and job.confirm_below_ms is not None:
            holder = self._holder_call(job.holder_ir, bound)
        return GpuJob(kernel, str(prepared.spec_path), dict(bound.sizes),
                      self.descriptor.target, context.warmup, context.repeat, 0, baseline,
                      job.give_up_ms, confirm_below_ms=job.confirm_below_ms, holder=holder)

    def _holder_call(self, holder_ir: str, bound: Any) -> Any:
        """The holder's emitted call for the GPU job, emitted once while the best stands;
        None where it does not emit (the lead is then timed twice)."""
        from kir.backends import emit

        if self._holder is None or self._holder[0] != holder_ir:
            try:
                emitted = emit(parse_kernel(holder_ir, "<holder>"), bound,
                               self.descriptor.target)
            except Exception:  # noqa: BLE001 - judged already; the lead is timed twice
                emitted = None
            self._holder = (holder_ir, emitted)
        return self._holder[1]

    def _gpu(self):
        if self._pool is None:
            from kir.measure.gpu.jobs import MLXRunner
            from kir.measure.gpu.pool import GpuPool

            self._pool = GpuPool(self.runner or MLXRunner(), self.gpu_workers,
                                 timeout_s=self.gpu_timeout_s, startup_s=self.gpu_startup_s,
                                 lock_path=device_lock_path(self.descriptor))
        return self._pool

    def close(self) -> None:
        """Stop the GPU worker processes."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def device_lock_path(descriptor: DeviceDescriptor) -> str:
    """The timing lock of ``descriptor``'s GPU on this host: one file per device, so every
    worker timing on that GPU takes turns with the others."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", descriptor.device).strip("-") or "gpu"
    return str(Path(tempfile.gettempdir()) / f"kir-device-{name}.lock")
