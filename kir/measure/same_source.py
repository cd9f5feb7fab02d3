"""Candidates a GPU cannot tell apart: the same emitted source and the same launch.

Rules often make kernels that differ as IR but print the same code (a loop marked ``unroll``
and one with a ``#pragma unroll 0`` hint; steps that differ only in loop labels, which print
as comments), and on a GPU each fresh verdict costs a compile of about a second. The GPU
evaluator (:class:`kir.measure.mlx.MLXEvaluator`) keys each candidate by
:func:`source_key` before any work and answers a candidate whose key was judged already with
that verdict (:class:`SourceVerdicts`).

The key holds everything a verdict depends on:

* the GPU check and timing run the emitted call itself: its code (source and helpers, with
  comment-only lines left out: they cannot change what the compiler makes), inputs, outputs
  with their shapes, dtypes and initial-value encodings, grid, threadgroup and shared memory
  (every field of :class:`kir.backends.emitted.Emitted` but its name, a hash of the text
  comments included);
* validation runs the IR on the interpreter at the check and ragged sizes, where the source
  is the same code (sizes reach it as scalar arguments, never as text) but the grid comes
  from the launch's size expressions and the cases judged depend on whether the kernel is
  specialized: the key adds the kernel's launch (grid expressions, block, dynamic shared
  bytes, ``specialized``) and the scalar parameters it reads.

Not in the key: the IR itself. The verifier's checks and the interpreter's step count (its
limit makes a "timeout") could tell apart two kernels that print the same code only through
IR the printer drops, and what it drops today (loop kinds beside an unroll hint, labels) is
neither checked nor counted.
"""

from __future__ import annotations

import dataclasses
import hashlib

from kir.ir import Kernel
from kir.measure.cases import scalars_kept
from kir.search.evaluator import Evaluation

# What a GPU job spent on the first candidate: not spent again on its duplicates.
PHASE_DETAILS = frozenset({"build_s", "check_s", "lock_wait_s", "time_s", "warm_s"})


def code_lines(text: str) -> str:
    """``text`` without its comment-only lines (loop labels, helper notes)."""
    return "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith("//"))


def source_key(emitted, kernel: Kernel) -> str:
    """The hash of what ``kernel``'s verdict depends on, given its ``emitted`` call (see
    the module text)."""
    call = dataclasses.asdict(emitted)
    del call["name"]
    call["source"] = code_lines(emitted.source)
    call["header"] = code_lines(emitted.header)
    launch = kernel.launch
    validation = (launch.grid, launch.block, launch.shared_bytes, launch.specialized,
                  sorted(scalars_kept(kernel)))
    return hashlib.sha256(repr((call, validation)).encode()).hexdigest()


class SourceVerdicts:
    """Verdicts by :func:`source_key`, each with the fingerprint of the kernel judged."""

    def __init__(self) -> None:
        self._judged: dict[str, tuple[str, Evaluation]] = {}

    def __contains__(self, key: str | None) -> bool:
        return key is not None and key in self._judged

    def remember(self, key: str | None, kernel: Kernel, verdict: Evaluation) -> None:
        """Keep ``verdict`` on ``kernel`` for later candidates with the same key."""
        if key is not None and key not in self._judged:
            self._judged[key] = (kernel.fingerprint(), verdict)

    def answer(self, key: str) -> Evaluation:
        """The verdict judged under ``key``, for a duplicate: the same status, time and
        details (less the first one's phase seconds), plus ``same_source_as``."""
        first, verdict = self._judged[key]
        details = {k: v for k, v in verdict.details.items() if k not in PHASE_DETAILS}
        return dataclasses.replace(verdict, details={**details, "same_source_as": first})
