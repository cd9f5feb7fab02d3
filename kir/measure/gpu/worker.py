"""Time GPU candidates in a worker process that a crash or a hang cannot take down.

A candidate that reads out of bounds on an NVIDIA GPU does not just fail: it poisons the CUDA
context, and every later MLX call in that process fails with "an illegal memory access was
encountered". A kernel that never terminates hangs its caller. So the search process never
touches the GPU itself: :class:`GpuWorker` keeps one persistent worker process (a fresh
``python`` started with :mod:`subprocess`, so it inherits no CUDA or Metal state and no
threads from the parent, and re-runs no user ``__main__``) that owns the GPU and answers one
:class:`GpuJob` at a time, pickled over its stdin/stdout pipes.

Isolation, in order of what can go wrong with a candidate:

* an exception (a compile error, wrong outputs, NaN) — the worker answers a verdict:
  "compile_error", "invalid", "nan", or "ok" with the timing;
* a GPU fault the device cannot recover from (CUDA's illegal address, launch failure, a Metal
  command-buffer fault; see :func:`is_fatal_gpu_error`) — the worker answers "crash" and then
  exits, since every later call in that process would fail; the next job starts a new worker.
  The message varies (on an H200 one out-of-bounds store surfaced as "illegal memory access",
  another as "operation not supported on global/shared address space", sometimes only in the
  next allocation), so after EVERY job the runner also probes the device
  (:meth:`Runner.health`: a tiny kernel and read-back) and a failed probe makes this
  candidate the "crash", not whichever candidate comes next;
* the worker dies (segfault, ``abort()``, out of memory) — the parent sees the pipe close,
  records "crash" with the exit signal and the tail of the worker's log (Python's
  ``faulthandler`` writes the stack of every thread there), and starts a new worker;
* the worker does not answer within the job's timeout (``timeout_s``, plus ``startup_s`` for
  a fresh worker's first job: MLX start-up, the reference outputs) — the parent asks the
  worker for its stacks (SIGUSR1 → faulthandler), kills it, records "timeout" with that
  trace, and the next job gets a new worker;
* the search process dies — on Linux the worker is killed with it (``PR_SET_PDEATHSIG``),
  elsewhere it exits at the EOF on its stdin once it is idle.

Jobs are small: the candidate kernel, the spec's path and sizes, the target and timing
settings. The worker rebuilds the bound spec, the seeded inputs and the expected outputs
itself and caches them, so no big array crosses the pipe. Without a spec reference the
expected outputs are the unrewritten kernel's (``GpuJob.baseline``) on this same GPU.

What runs the emitted kernel is a :class:`Runner` (picklable, so a module-level class that
the worker can import with the parent's ``sys.path``; it is sent to the worker once):
:class:`MLXRunner` on a real GPU, :class:`EmulatorRunner` on the CPU emulator of emitted
source (how the tests exercise all of the above without a GPU). Jobs and runners live in
:mod:`kir.measure.gpu.jobs`.
"""

from __future__ import annotations

import faulthandler
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from kir.measure.cpu_pool import become_worker
from kir.measure.gpu.jobs import (
    TRACE_CHARS,
    EmulatorRunner,
    GpuJob,
    MLXRunner,
    Runner,
    build_gpu_case,
    is_fatal_gpu_error,
    run_job,
)
from kir.search.evaluator import Evaluation, Status

__all__ = ["EmulatorRunner", "GpuJob", "GpuWorker", "MLXRunner", "Runner", "build_gpu_case",
           "is_fatal_gpu_error", "main", "run_job"]

# The worker imports kir with the parent's sys.path from its first statement on: ``python -c``
# would otherwise put the working directory first, where a source checkout's bare ``kir/``
# folder shadows an installed kir.
_COMMAND = ("import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
            "from kir.measure.gpu.worker import main; main()")


def main() -> None:
    """The worker process: read the pickled runner, then answer jobs until told to stop
    (None) or the parent goes away."""
    # The protocol keeps private copies of stdin/stdout; fd 1 then points at the log (stderr,
    # which the parent opened) so nothing MLX or a driver prints can corrupt the pipe.
    conn_in = Connection(os.dup(0), writable=False)
    conn_out = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    become_worker()
    faulthandler.enable(all_threads=True)  # a fatal signal leaves Python stacks in the log
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # the parent's "where?"
    runner: Runner | None = None
    unusable = ""
    try:
        runner = conn_in.recv()
    except (EOFError, OSError):
        return
    except Exception as exc:  # noqa: BLE001 - e.g. a runner class defined in __main__
        unusable = f"the GPU worker cannot load its runner: {type(exc).__name__}: {exc}"
    cache: dict = {}
    while True:
        try:
            job = conn_in.recv()
        except (EOFError, OSError):
            return
        except Exception as exc:  # noqa: BLE001 - a job this process cannot unpickle
            conn_out.send((Evaluation.rejected(Status.CRASH, f"the GPU worker cannot load the job: {type(exc).__name__}: {exc}"),
                False))
            continue
        if job is None:
            return
        if runner is None:
            conn_out.send((Evaluation.rejected(Status.CRASH, unusable), False))
            continue
        try:
            verdict, fatal = run_job(job, runner, cache)
        except BaseException as exc:  # noqa: BLE001 - answer, whatever happened
            verdict, fatal = Evaluation.rejected(Status.CRASH, f"the GPU worker raised {type(exc).__name__}: {exc}"), False
        conn_out.send((verdict, fatal))
        if fatal:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(3)  # the GPU context is unusable: a fresh worker takes the next job


@dataclass
class _Process:
    process: subprocess.Popen
    send: Connection
    receive: Connection
    log_path: str
    jobs: int = 0


@dataclass
class GpuWorker:
    """The parent's handle on the GPU worker: :meth:`run` sends one job and returns its
    verdict; a worker that dies or passes its timeout is killed and replaced."""

    runner: Runner = field(default_factory=MLXRunner)
    timeout_s: float = 60.0
    startup_s: float = 60.0
    started: int = 0  # workers started so far (tests watch replacements)
    _current: _Process | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        """The live worker's process id, if one is running."""
        return self._current.process.pid if self._current else None

    def _start(self) -> _Process:
        fd, log_path = tempfile.mkstemp(prefix="kir-gpu-worker-", suffix=".log")
        with os.fdopen(fd, "wb") as log:
            command = [sys.executable, "-c", _COMMAND, json.dumps(sys.path)]
            process = subprocess.Popen(command, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=log,
                                       start_new_session=True)
        # Connections on our own copies of the pipe ends (the Popen file objects close theirs).
        send = Connection(os.dup(process.stdin.fileno()), readable=False)
        receive = Connection(os.dup(process.stdout.fileno()), writable=False)
        process.stdin.close()
        process.stdout.close()
        self.started += 1
        self._current = _Process(process, send, receive, log_path)
        try:
            send.send(self.runner)
        except OSError:
            pass  # it died at once: the job's send or answer says so, with its log
        return self._current

    def run(self, job: GpuJob, *, _resent: bool = False) -> Evaluation:
        """Run ``job`` in the worker (starting one if needed) within the timeout."""
        worker = self._current or self._start()
        limit = self.timeout_s + (self.startup_s if worker.jobs == 0 else 0.0)
        limit *= 1 + len(getattr(job, "rivals", ()))  # a final timing builds each rival too
        worker.jobs += 1
        try:
            payload = pickle.dumps(job)
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable kernel
            return Evaluation.rejected(Status.CRASH, "cannot send the candidate to the GPU worker: "
                                       f"{type(exc).__name__}: {exc}")
        try:
            worker.send.send_bytes(payload)
        except OSError as exc:
            # It died between jobs: start another and send again (once).
            self._retire(kill=True)
            if _resent:
                return Evaluation.rejected(Status.CRASH, f"cannot reach a new GPU worker: {exc}")
            return self.run(job, _resent=True)
        if not worker.receive.poll(limit):
            trace = self._dump_stacks(worker)
            self._retire(kill=True)
            return Evaluation.rejected(Status.TIMEOUT, f"no answer from the GPU worker within {limit:g} s: killed",
                trace=trace)
        try:
            verdict, fatal = worker.receive.recv()
        except (EOFError, OSError):
            try:
                code = worker.process.wait(5.0)
            except subprocess.TimeoutExpired:
                code = None
            trace = _tail(worker.log_path)
            self._retire(kill=True)
            return Evaluation.rejected(Status.CRASH, f"the GPU worker died ({_exit_reason(code)}) running this candidate",
                trace=trace, exitcode=code)
        if fatal:
            self._retire(kill=False)
        return verdict

    def _dump_stacks(self, worker: _Process) -> str:
        """Ask a hung worker for its Python stacks (faulthandler on SIGUSR1); the log tail."""
        if hasattr(signal, "SIGUSR1") and worker.process.poll() is None:
            try:
                worker.process.send_signal(signal.SIGUSR1)
                time.sleep(0.3)
            except OSError:
                pass
        return _tail(worker.log_path)

    def _retire(self, *, kill: bool) -> None:
        """Stop the current worker (ours, by handle) and forget it."""
        worker, self._current = self._current, None
        if worker is None:
            return
        if not kill:
            _wait(worker.process, 10.0)
        if worker.process.poll() is None:
            worker.process.kill()
            _wait(worker.process, 5.0)
        worker.send.close()
        worker.receive.close()
        try:
            os.unlink(worker.log_path)
        except OSError:
            pass

    def kill(self) -> None:
        """Stop the worker at once, whatever it is doing."""
        self._retire(kill=True)

    def interrupt(self) -> None:
        """Kill the worker process from another thread while :meth:`run` waits for it: that
        run answers "crash" (the worker died) and cleans up as for any crash; the next job
        starts a new worker."""
        current = self._current
        if current is not None and current.process.poll() is None:
            current.process.kill()

    def close(self) -> None:
        """Ask the worker to stop, killing it if it does not."""
        worker = self._current
        if worker is None:
            return
        try:
            worker.send.send(None)
            _wait(worker.process, 5.0)
        except (OSError, ValueError):
            pass
        self._retire(kill=True)

    def __enter__(self) -> "GpuWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _wait(process: subprocess.Popen, timeout: float) -> None:
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - TRACE_CHARS))
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""
