"""The Ray executor: remote evaluation jobs on a Ray cluster.

One actor per device: a node that offers the custom resource ``NAME`` (``ray start
--resources '{"NAME": 1}'``) gets one :class:`DeviceActor` per unit of it, which keeps a
:class:`~kir.measure.portable.DeviceService` warm (MLX, GPU worker processes, the inputs and
expected outputs of the search) and announces its :class:`~kir.search.device.DeviceDescriptor`
when it starts. Validation fans out as CPU tasks that any node may run. Nothing is timed on
the coordinator: timing happens inside the actor, under its device's lock.

Faults, per job (a background thread watches every job in flight):

* an actor that dies (its machine, its process, ``ray.kill``) fails the job it was running;
  that job is sent once more, to another actor when there is one (Ray restarts a dead actor
  once where its node still lives), and a second loss is the job's "crash";
* a validation task whose worker process dies is retried once by Ray, then "crash";
* a validation task past ``validate_timeout_s`` is cancelled (its process killed): "timeout";
* a device job past ``measure_timeout_s`` (beyond the GPU worker's own timeouts) is a
  "timeout", and that actor is passed over while another is healthy.

The jobs carry no path of the coordinator's (:mod:`kir.measure.portable`); each search's
context goes into Ray's object store once and workers cache what they build from it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any

from kir.errors import KirError
from kir.measure.portable import DeviceService, EvalContext, EvalJob, validate
from kir.measure.ray_connect import require_ray
from kir.search.device import DeviceDescriptor
from kir.search.evaluator import Evaluation, Status


class DeviceActor:
    """The actor body (``ray.remote`` is applied when the executor starts, so this module
    imports without Ray): a :class:`DeviceService` and its descriptor."""

    def __init__(self, role: str, runner: Any, gpu_workers: int, gpu_timeout_s: float,
                 gpu_startup_s: float) -> None:
        self.service = DeviceService(role, runner, gpu_workers, gpu_timeout_s, gpu_startup_s)

    def describe(self) -> DeviceDescriptor:
        return self.service.describe()

    def measure(self, context: EvalContext, job: EvalJob, validated: Evaluation) -> Evaluation:
        return self.service.measure(context, job, validated)

    def pid(self) -> int:
        import os

        return os.getpid()


def validate_task(context: EvalContext, job: EvalJob) -> Evaluation:
    """The CPU task: :func:`kir.measure.portable.validate` in a Ray worker process."""
    return validate(context, job)


@dataclass
class _Job:
    """A job in flight: what to resend, and the future the evaluator waits on."""

    future: Future
    kind: str  # "validate" or "measure"
    context: EvalContext
    job: EvalJob
    validated: Evaluation | None
    deadline: float
    actor: int = -1
    attempts: int = 1


class RayExecutor:
    """Run :class:`~kir.measure.remote.RemoteEvaluator` jobs on the connected Ray cluster
    (:func:`kir.measure.ray_connect`): ``actors`` device actors (default: one per unit of
    ``resource`` in the cluster) in ``role`` ("auto", "metal", "cuda", "model:PROFILE";
    ``runner`` replaces MLX, e.g. the CPU emulator), validation as tasks of
    ``validate_cpus`` CPUs each."""

    def __init__(self, resource: str, role: str = "auto", *, runner: Any = None,
                 gpu_workers: int = 1, actors: int | None = None,
                 validate_timeout_s: float = 120.0, measure_timeout_s: float = 600.0,
                 startup_s: float = 180.0, gpu_timeout_s: float = 60.0,
                 gpu_startup_s: float = 60.0, validate_cpus: float = 1.0) -> None:
        ray = self._ray = require_ray()
        if not ray.is_initialized():
            raise KirError("the Ray executor needs a connection: call kir.measure.ray_connect()")
        self.resource = resource
        offered = ray.cluster_resources().get(resource, 0)
        count = int(actors if actors is not None else offered)
        if count < 1 or offered < 1:
            raise KirError(f"no node of the Ray cluster offers the resource {resource!r}",
                           hint=f"start device workers with: ray start --address HEAD:6379 "
                                f"--resources '{{\"{resource}\": 1}}' (docs/SCALE_OUT.md), "
                                "or pass --device-resource NAME")
        self.validate_timeout_s = validate_timeout_s
        self.measure_timeout_s = measure_timeout_s
        actor_class = ray.remote(DeviceActor)
        handles = [actor_class.options(resources={resource: 1}, num_cpus=0, max_restarts=1,
                                       max_concurrency=max(1, gpu_workers)).remote(
            role, runner, gpu_workers, gpu_timeout_s, gpu_startup_s) for _ in range(count)]
        descriptors = self._handshake(handles, startup_s)
        self.descriptor = descriptors[0]
        # Actors on another device (a different chip, MLX or OS under the same resource)
        # would be refused every job: leave them out and say so.
        self.notes = [f"device worker {i} is {d}, not {self.descriptor}: left out"
                      for i, d in enumerate(descriptors) if d != self.descriptor]
        self.actors = [h for h, d in zip(handles, descriptors) if d == self.descriptor]
        self._task = ray.remote(validate_task).options(num_cpus=validate_cpus, max_retries=1)
        cpus = int(ray.cluster_resources().get("CPU", 1) / max(validate_cpus, 0.01))
        self.capacity = max(1, cpus) + len(self.actors) * max(1, gpu_workers)
        self._load = [0] * len(self.actors)
        self._passed_over: set[int] = set()
        self._contexts: dict[str, Any] = {}
        self._pending: dict[Any, _Job] = {}
        self._guard = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self.lost = 0  # jobs whose worker was lost (each resent once)
        self._watcher = threading.Thread(target=self._watch, name="kir-ray-watch", daemon=True)
        self._watcher.start()

    def _handshake(self, handles: list, startup_s: float) -> list[DeviceDescriptor]:
        ray = self._ray
        try:
            return ray.get([h.describe.remote() for h in handles], timeout=startup_s)
        except ray.exceptions.GetTimeoutError:
            raise KirError(f"the device workers on {self.resource!r} did not start within "
                           f"{startup_s:g} s", hint="are the nodes offering it still up? "
                                                    "`ray status` lists them") from None
        except ray.exceptions.RayError as exc:
            raise KirError(f"a device worker on {self.resource!r} failed to start: "
                           f"{_cause(exc)}") from None

    # ------------------------------------------------------------------------- protocol

    def describe(self) -> DeviceDescriptor:
        return self.descriptor

    def validate(self, context: EvalContext, job: EvalJob) -> "Future[Evaluation]":
        return self._start(_Job(Future(), "validate", context, job, None,
                                time.monotonic() + self.validate_timeout_s))

    def measure(self, context: EvalContext, job: EvalJob,
                validated: Evaluation) -> "Future[Evaluation]":
        return self._start(_Job(Future(), "measure", context, job, validated,
                                time.monotonic() + self.measure_timeout_s))

    def close(self) -> None:
        """Stop watching and release the actors (their GPU workers exit with them)."""
        self._closed = True
        self._wake.set()
        self._watcher.join(timeout=5)
        with self._guard:
            pending, self._pending = list(self._pending.values()), {}
        for entry in pending:
            entry.future.cancel()
        for handle in self.actors:
            try:
                self._ray.kill(handle)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []

    # ------------------------------------------------------------------------- plumbing

    def _context_ref(self, context: EvalContext) -> Any:
        ref = self._contexts.get(context.digest)
        if ref is None:
            ref = self._contexts[context.digest] = self._ray.put(context)
        return ref

    def _start(self, entry: _Job) -> Future:
        with self._guard:
            ref = self._launch(entry)
            self._pending[ref] = entry
        entry.future.add_done_callback(lambda f, ref=ref: self._forget(f, ref))
        self._wake.set()
        return entry.future

    def _launch(self, entry: _Job) -> Any:
        """Submit ``entry`` (the guard held); returns its object ref."""
        context = self._context_ref(entry.context)
        if entry.kind == "validate":
            return self._task.remote(context, entry.job)
        entry.actor = self._pick(avoid=entry.actor)
        self._load[entry.actor] += 1
        return self.actors[entry.actor].measure.remote(context, entry.job, entry.validated)

    def _pick(self, avoid: int) -> int:
        """The least busy actor, passing over ``avoid`` and actors that failed recently
        while another is available."""
        if not self.actors:
            raise KirError("every device worker of this search is gone")
        choices = [i for i in range(len(self.actors))
                   if i != avoid and i not in self._passed_over]
        if not choices:
            self._passed_over.clear()  # they may have been restarted since
            choices = [i for i in range(len(self.actors)) if i != avoid] or [avoid]
        return min(choices, key=lambda i: (self._load[i], i))

    def _forget(self, future: Future, ref: Any) -> None:
        """A future cancelled by the evaluator: cancel the Ray work too."""
        if not future.cancelled():
            return
        with self._guard:
            entry = self._pending.pop(ref, None)
            if entry is not None:
                self._release(entry)
        if entry is not None:
            try:
                self._ray.cancel(ref, force=entry.kind == "validate")
            except Exception:  # noqa: BLE001 - finished meanwhile
                pass

    def _release(self, entry: _Job) -> None:
        """One job fewer on its actor (the guard held)."""
        if entry.kind == "measure" and 0 <= entry.actor < len(self._load):
            self._load[entry.actor] -= 1

    def _watch(self) -> None:
        ray = self._ray
        while not self._closed:
            with self._guard:
                refs = list(self._pending)
            if not refs:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=0.2)
            if ready:
                more, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                ready = list(dict.fromkeys(ready + more))
            for ref in ready:
                self._settle(ref)
            self._expire()

    def _settle(self, ref: Any) -> None:
        with self._guard:
            entry = self._pending.pop(ref, None)
            if entry is not None:
                self._release(entry)
        if entry is None:
            return  # cancelled meanwhile
        ray = self._ray
        try:
            verdict = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            self._lost(entry, exc)
            return
        except ray.exceptions.WorkerCrashedError as exc:
            verdict = Evaluation.rejected(Status.CRASH, "the validation worker process died "
                                          f"twice running this candidate ({_cause(exc)})")
        except ray.exceptions.TaskCancelledError:
            return
        except ray.exceptions.RayError as exc:
            verdict = Evaluation.rejected(Status.CRASH, f"the {entry.kind} worker raised: "
                                          f"{_cause(exc)}")
        _resolve(entry.future, verdict)

    def _lost(self, entry: _Job, exc: Exception) -> None:
        """A device actor died under ``entry``: resend it once, elsewhere if possible."""
        self.lost += 1
        with self._guard:
            self._passed_over.add(entry.actor)
            if entry.attempts < 2 and not entry.future.cancelled():
                entry.attempts += 1
                entry.deadline = time.monotonic() + self.measure_timeout_s
                ref = self._launch(entry)
                self._pending[ref] = entry
                entry.future.add_done_callback(lambda f, ref=ref: self._forget(f, ref))
                return
        _resolve(entry.future, Evaluation.rejected(
            Status.CRASH, f"the device worker was lost twice running this candidate "
                          f"({_cause(exc)})"))

    def _expire(self) -> None:
        now = time.monotonic()
        with self._guard:
            late = [(ref, entry) for ref, entry in self._pending.items() if entry.deadline < now]
            for ref, entry in late:
                del self._pending[ref]
                self._release(entry)
                if entry.kind == "measure":
                    self._passed_over.add(entry.actor)
        for ref, entry in late:
            try:
                self._ray.cancel(ref, force=entry.kind == "validate")
            except Exception:  # noqa: BLE001 - finished meanwhile
                pass
            limit = self.validate_timeout_s if entry.kind == "validate" \
                else self.measure_timeout_s
            what = "validating" if entry.kind == "validate" else "the device worker's answer"
            _resolve(entry.future, Evaluation.rejected(
                Status.TIMEOUT, f"{what} took longer than {limit:g} s on the cluster"))


def _resolve(future: Future, verdict: Evaluation) -> None:
    try:
        future.set_result(verdict)
    except InvalidStateError:  # cancelled by the evaluator meanwhile
        pass


def _cause(exc: BaseException) -> str:
    """What went wrong inside Ray's error, in a line: the exception its traceback ends with
    (Ray's own text repeats the whole traceback)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1][:300]}" \
            if str(cause).strip() else type(cause).__name__
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(exc).__name__
