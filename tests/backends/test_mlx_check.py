"""The GPU-side output check agrees with the host check (kir.spec.compare) — run here on MLX's CPU
device, which executes the same MLX operations the GPU does."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason="MLX is a dependency; without it nothing to test")

from kir.backends.mlx_check import DeviceReference  # noqa: E402

from kir.spec.compare import compare_outputs  # noqa: E402

TOL = {"y": (1e-4, 1e-5), "z": (1e-3, 1e-3)}


def cases():
    rng = np.random.default_rng(0)
    want = {"y": rng.standard_normal((64, 33)), "z": rng.standard_normal(500) * 100}
    exact = {k: v.astype(np.float32) for k, v in want.items()}
    yield "exact", want, exact
    near = {k: (v * (1 + 5e-5)).astype(np.float32) for k, v in want.items()}
    yield "within tolerance", want, near
    far = {k: v.copy().astype(np.float32) for k, v in exact.items()}
    far["y"][3, 4] += 0.5
    far["z"][::7] *= 1.01
    yield "outside tolerance", want, far
    nan = {k: v.copy() for k, v in exact.items()}
    nan["y"][0, 0] = np.nan
    nan["z"][9] = np.inf
    yield "NaN and Inf", want, nan


@pytest.mark.parametrize("label,want,got", list(cases()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_device_check_matches_the_host_check(label, want, got):
    host = compare_outputs(got, want, TOL.get)
    device = DeviceReference(want, TOL.get).compare({k: mx.array(v) for k, v in got.items()},
                                                    set())
    assert device is not None
    assert device.ok == host.ok
    for d, h in zip(device.outputs, host.outputs):
        assert (d.name, d.ok, d.mismatches, d.nonfinite, d.size) == \
            (h.name, h.ok, h.mismatches, h.nonfinite, h.size), label
        if np.isfinite(h.max_abs_err):
            # the device compares against the reference rounded to f32: |z| <= ~400 rounds
            # by up to 2^-24 * 400 ~ 2.4e-5
            assert d.max_abs_err == pytest.approx(h.max_abs_err, rel=1e-3, abs=5e-5)
        else:
            assert not np.isfinite(d.max_abs_err)


def test_what_the_device_cannot_check_goes_back_to_the_host():
    want = {"y": np.ones(8)}
    ref = DeviceReference(want, TOL.get)
    ones = {"y": mx.ones(8)}
    assert ref.compare(ones, {"y"}) is None  # XOR-encoded: decoded on the host
    assert ref.compare({"y": mx.ones(8, dtype=mx.int32)}, set()) is None
    assert ref.compare({"y": mx.ones(9)}, set()) is None  # another shape
    with_nan = DeviceReference({"y": np.array([1.0, np.nan])}, TOL.get)
    assert with_nan.compare({"y": mx.array([1.0, np.nan])}, set()) is None
    assert ref.compare(ones, set()).ok
