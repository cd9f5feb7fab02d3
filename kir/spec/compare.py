"""Compare a kernel's outputs with a reference, within the spec's tolerances.

A comparison passes when every output element satisfies ``|got - want| <= atol + rtol*|want|``
and the kernel produced no NaN or infinity where the reference has a finite value (a NaN is
never "close"). Shapes must match exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK = 1 << 20  # elements compared at a time


@dataclass(frozen=True)
class OutputCheck:
    """How one output compared: worst absolute and relative error and the verdict."""

    name: str
    ok: bool
    max_abs_err: float
    max_rel_err: float
    mismatches: int
    size: int
    note: str = ""
    nonfinite: int = 0  # NaN/Inf elements where the reference is finite

    def describe(self) -> str:
        verdict = "ok" if self.ok else "MISMATCH"
        text = (f"{self.name}: {verdict}  max abs err {self.max_abs_err:.3g}, "
                f"max rel err {self.max_rel_err:.3g}")
        if self.mismatches:
            text += f", {self.mismatches}/{self.size} elements outside tolerance"
        if self.note:
            text += f" ({self.note})"
        return text


@dataclass(frozen=True)
class CheckResult:
    outputs: tuple[OutputCheck, ...]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs_err(self) -> float:
        return max((o.max_abs_err for o in self.outputs), default=0.0)

    def describe(self) -> str:
        return "\n".join(o.describe() for o in self.outputs)


def compare_output(name: str, got: np.ndarray, want: np.ndarray, rtol: float,
                   atol: float) -> OutputCheck:
    """Compare one array against its reference."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        if got.size == want.size:
            got = got.reshape(want.shape)
        else:
            return OutputCheck(name, False, float("inf"), float("inf"), want.size, want.size,
                               f"shape {got.shape} != reference shape {want.shape}")
    # Chunks of a million elements: the float64 temporaries stay in cache, which makes a
    # GPU-sized output (64 M elements) several times faster to check than whole-array math.
    g_all, w_all = got.reshape(-1), want.reshape(-1)
    max_abs = max_rel = 0.0
    mismatches = nonfinite = 0
    for lo in range(0, w_all.size, _CHUNK):
        g = g_all[lo:lo + _CHUNK].astype(np.float64)
        w = w_all[lo:lo + _CHUNK].astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        same_inf = np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w))
        exact = both_nan | same_inf
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(g - w)
            # A finite diff is required: against an infinite reference the bound is inf
            # too, and inf <= inf would pass any value (even the opposite infinity).
            bad = ~exact & ~(np.isfinite(diff) & (diff <= atol + rtol * np.abs(w)))
            finite = ~exact & np.isfinite(diff)
            if finite.any():
                max_abs = max(max_abs, float(diff[finite].max()))
                rel = diff[finite] / np.maximum(np.abs(w[finite]), np.finfo(np.float64).tiny)
                max_rel = max(max_rel, float(rel.max()))
        mismatches += int(bad.sum())
        nonfinite += int((~np.isfinite(g) & np.isfinite(w)).sum())
    note = ""
    if nonfinite:
        note = f"{nonfinite} NaN/Inf where the reference is finite"
        max_abs = float("inf")
    return OutputCheck(name, not mismatches, max_abs, max_rel, mismatches, int(want.size),
                       note, nonfinite)


def compare_outputs(got: dict[str, np.ndarray], want: dict[str, np.ndarray],
                    tolerance) -> CheckResult:
    """Compare each reference output ``want[name]`` with ``got[name]``; ``tolerance(name)``
    gives (rtol, atol) for that output."""
    checks = []
    for name, expected in want.items():
        rtol, atol = tolerance(name)
        if name not in got:
            checks.append(OutputCheck(name, False, float("inf"), float("inf"), 0, 0,
                                      "kernel did not produce this output"))
            continue
        checks.append(compare_output(name, got[name], expected, rtol, atol))
    return CheckResult(tuple(checks))


def nan_notes(expected: dict[str, np.ndarray], where: str = "") -> list[str]:
    """Notes for outputs whose expected values hold NaN: a check passes there whatever the
    kernel writes. Against kir's own interpreter (no reference in the spec) NaN also marks
    a value read from a lane that was not running a shuffle. ``where`` (" at N=64") says
    which inputs."""
    notes = []
    for name, want in expected.items():
        values = np.asarray(want)
        if values.dtype.kind in "fc" and np.isnan(values).any():
            notes.append(f"note: the expected '{name}' holds {int(np.isnan(values).sum())} NaN "
                         f"of {values.size} values on the inputs{where}: the check says "
                         "nothing about them (give the spec a reference, or inputs in the "
                         "kernel's domain)")
    return notes
