"""Numerics of validation: tolerances by dtype, NaN/Inf handling, and stress inputs (softmax at
±80, -inf masks); zero-length rows are refused by the spec (see docs/RELIABILITY.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target, copy_inputs, reference_outputs, run_interp
from kir.errors import KirError
from kir.spec.bound import DEFAULT_TOLERANCES
from kir.spec.compare import compare_output

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "examples" / "softmax.cu"
INF, NAN = np.inf, np.nan


@pytest.mark.parametrize("got, want, ok", [
    ([1.0, NAN], [1.0, 2.0], False),          # NaN where the reference is finite
    ([1.0, INF], [1.0, 2.0], False),          # Inf where the reference is finite
    ([1.0, -INF], [1.0, -INF], True),         # matching infinities
    ([1.0, INF], [1.0, -INF], False),         # opposite infinities
    ([NAN, 2.0], [NAN, 2.0], True),           # NaN where the reference has NaN
    ([1.0, 2.0], [1.0, NAN], False),          # a number where the reference has NaN
    ([5.0, 1.0], [INF, 1.0], False),          # a finite value against an infinite reference
    ([1.0 + 1e-6], [1.0], True), ([1.001], [1.0], False),
])
def test_nan_and_inf_rules(got, want, ok):
    result = compare_output("y", np.array(got, np.float32), np.array(want, np.float32),
                            1e-4, 1e-5)
    assert result.ok is ok, result.describe()
    if not ok and not np.isnan(want).any():
        assert result.mismatches >= 1


def test_nan_is_named_in_the_report():
    result = compare_output("y", np.array([NAN], np.float32), np.array([1.0], np.float32),
                            1e-4, 1e-5)
    assert "NaN/Inf where the reference is finite" in result.describe()


def test_tolerance_defaults_by_dtype_and_spec_override(tmp_path):
    bound = load_kernel(SOFTMAX, sizes={"rows": 2, "cols": 64}).bound
    assert bound.tolerance("f32") == DEFAULT_TOLERANCES["f32"] == (1e-4, 1e-5)
    assert bound.tolerance("f16") == (1e-2, 1e-3)
    assert bound.tolerance("i32") == (0.0, 0.0)  # integers compare exactly
    spec = _copy_softmax(tmp_path, "tolerance = { rtol = 0.5, atol = 0.25 }\n")
    assert spec.bound.tolerance("f32") == (0.5, 0.25)


def _copy_softmax(tmp_path: Path, extra: str = "", replace: tuple[str, str] = ("", "")):
    text = (ROOT / "examples" / "softmax.kir.toml").read_text()
    if replace[0]:
        text = text.replace(*replace)
    head, args = text.split("[args]")
    (tmp_path / "softmax.kir.toml").write_text(head + extra + "[args]" + args)
    shutil.copy(SOFTMAX, tmp_path / "softmax.cu")
    shutil.copy(ROOT / "examples" / "refs.py", tmp_path / "refs.py")
    return load_kernel(tmp_path / "softmax.cu", sizes={"rows": 4, "cols": 300})


def test_softmax_with_large_magnitudes_stays_finite_and_matches(tmp_path):
    """Inputs at +-80 (the spec's ``range``): exp(80) is near f32's top, so the row max must
    be subtracted; the outputs stay finite and match."""
    loaded = _copy_softmax(tmp_path, replace=("range = [-10.0, 10.0]", "range = [-80.0, 80.0]"))
    outcome = check_on_target(loaded, "interp", seed=3)
    assert np.abs(loaded.bound.make_inputs(3)["x"]).max() > 70
    assert outcome.result.ok, outcome.result.describe()
    assert np.isfinite(outcome.outputs["y"]).all()


def test_softmax_without_max_subtraction_is_caught_at_large_magnitudes(tmp_path):
    """Past ~88, exp overflows f32: the kernel still passes, a naive softmax is caught."""
    loaded = _copy_softmax(tmp_path, replace=("range = [-10.0, 10.0]", "range = [-100.0, 100.0]"))
    assert check_on_target(loaded, "interp", seed=3).result.ok
    inputs = loaded.bound.make_inputs(3)
    want, _ = reference_outputs(loaded, copy_inputs(inputs))
    x = inputs["x"].astype(np.float32)
    naive = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)  # f32: overflows to inf/inf
    assert not compare_output("y", naive, want["y"], 1e-4, 1e-5).ok


def test_softmax_with_a_minus_inf_mask(tmp_path):
    """An attention-style mask: -inf entries get probability 0, the rest renormalize."""
    loaded = _copy_softmax(tmp_path)
    inputs = loaded.bound.make_inputs(0)
    x = inputs["x"]
    x[:, ::3] = -np.inf
    x[1, 100:] = -np.inf
    want, _ = reference_outputs(loaded, copy_inputs(inputs))
    got = run_interp(loaded, copy_inputs(inputs))
    result = compare_output("y", got["y"], want["y"], *loaded.bound.tolerance("f32"))
    assert result.ok, result.describe()
    assert (got["y"][:, ::3] == 0).all() and np.isfinite(got["y"]).all()
    np.testing.assert_allclose(got["y"].sum(axis=1), 1.0, rtol=1e-5)


def test_fully_masked_row_gives_nan_on_both_sides(tmp_path):
    loaded = _copy_softmax(tmp_path)
    inputs = loaded.bound.make_inputs(0)
    inputs["x"][2, :] = -np.inf
    want, _ = reference_outputs(loaded, copy_inputs(inputs))
    got = run_interp(loaded, copy_inputs(inputs))
    assert np.isnan(want["y"][2]).all() and np.isnan(got["y"][2]).all()
    assert compare_output("y", got["y"], want["y"], 1e-4, 1e-5).ok


def test_zero_length_rows_are_refused_by_the_spec():
    """Sizes are positive by design: a zero-sized buffer cannot be allocated on every target
    (MLX refuses empty outputs) and grids of zero blocks do not launch."""
    with pytest.raises(KirError, match="positive"):
        load_kernel(SOFTMAX, sizes={"rows": 4, "cols": 0})
