"""Check a kernel's outputs against the reference on the GPU, without copying them back.

A search times hundreds of candidates at GPU sizes (a 8192 x 8192 softmax has 64 M outputs).
Pulling every candidate's outputs to the host and comparing them in numpy costs seconds per
candidate — more than compiling and timing it. :class:`DeviceReference` uploads the expected
outputs once and compares on the GPU with the rule of :func:`kir.spec.compare.compare_output`:
``|got - want| <= atol + rtol * |want|`` for every element, and no NaN or infinity where the
reference is finite. It compares in float32 against the reference rounded to float32 (the
rounding is below 2^-24 relative, far inside any float tolerance a spec uses).

It answers only what it can answer exactly like the host check: float outputs that are not
XOR-encoded, with a reference that is finite everywhere. For anything else
:meth:`DeviceReference.compare` returns None and the caller compares on the host.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from kir.spec.compare import CheckResult, OutputCheck


class DeviceReference:
    """The expected outputs of one check case, on the GPU (built lazily, per output)."""

    def __init__(self, expected: Mapping[str, np.ndarray],
                 tolerance: Callable[[str], tuple[float, float]]) -> None:
        self.expected = expected
        self.tolerance = tolerance
        self._device: dict[str, Any] = {}  # name -> mx array, or None (host only)

    def _want(self, name: str):
        if name not in self._device:
            want = np.asarray(self.expected[name])
            usable = want.dtype.kind == "f" and bool(np.isfinite(want).all())
            if usable:
                import mlx.core as mx

                array = mx.array(want.astype(np.float32))
                mx.eval(array)
                self._device[name] = array
            else:
                self._device[name] = None
        return self._device[name]

    def compare(self, outputs: Mapping[str, Any], encoded: set[str]) -> CheckResult | None:
        """Compare MLX arrays ``outputs`` (by argument name) on the GPU; None when some output
        needs the host check (encoded, not float, a reference with NaN/Inf, a shape that
        differs)."""
        import mlx.core as mx

        checks = []
        for name, want_host in self.expected.items():
            got = outputs.get(name)
            want = None if name in encoded or got is None else self._want(name)
            if want is None or tuple(got.shape) != tuple(want_host.shape) or \
                    not mx.issubdtype(got.dtype, mx.floating):
                return None
            rtol, atol = self.tolerance(name)
            g = got.astype(mx.float32)
            diff = mx.abs(g - want)
            finite = mx.isfinite(diff)
            ok = finite & (diff <= atol + rtol * mx.abs(want))
            finite_diff = mx.where(finite, diff, 0.0)
            rel = finite_diff / mx.maximum(mx.abs(want), np.finfo(np.float32).tiny)
            stats = [mx.sum(~ok), mx.sum(~mx.isfinite(g)), mx.max(finite_diff), mx.max(rel)]
            mx.eval(stats)
            mismatches, nonfinite, max_abs, max_rel = (s.item() for s in stats)
            note = ""
            if nonfinite:
                note = f"{int(nonfinite)} NaN/Inf where the reference is finite"
                max_abs = float("inf")
            checks.append(OutputCheck(name, not mismatches, float(max_abs), float(max_rel),
                                      int(mismatches), int(want_host.size), note,
                                      int(nonfinite)))
        return CheckResult(tuple(checks))
