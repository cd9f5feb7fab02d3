"""A searched module on an NVIDIA GPU (MLX's CUDA back end), called at shapes other than the
one it was searched at and compared with the reference. Skipped without such a GPU; the lead
runs it on the H200."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from kir.backends.mlx_runner import available_targets

import kir

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif("cuda" not in available_targets(),
                                 reason="needs MLX's CUDA back end on an NVIDIA GPU")]


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_searched_softmax_module_at_other_shapes(tmp_path):
    result = kir.load(ROOT / "examples" / "softmax.cu").search(target="cuda", budget=12,
                                                               db=tmp_path / "t.db")
    assert not result.modelled and result.best_ms > 0
    module = result.module_build().load()
    assert module.available()
    for shape in ((64, 1000), (48, 700), (7, 4096)):  # searched at (64, 1000)
        x = np.random.default_rng(1).uniform(-10, 10, shape).astype(np.float32)
        chosen = module.choose({"rows": shape[0], "cols": shape[1]}, {"x": "float32"},
                               [mx.array(x)])
        assert chosen is not None, "a GPU kernel must take this shape"
        y = np.array(module.softmax_rows(mx.array(x)))
        np.testing.assert_allclose(y, softmax(x.astype(np.float64)), rtol=1e-4, atol=1e-6)


def test_searched_generic_module_in_two_dtypes(tmp_path):
    result = kir.load(ROOT / "examples" / "mlx" / "rmsnorm.cu").search(
        target="cuda", budget=8, db=tmp_path / "t.db")
    module = result.module_build(dtypes=("f32", "f16")).load()
    for dtype, tolerance in ((mx.float32, 1e-5), (mx.float16, 1e-2)):
        for shape in ((8, 200), (32, 1536)):
            rng = np.random.default_rng(2)
            x = mx.array(rng.uniform(-3, 3, shape).astype(np.float32)).astype(dtype)
            w = mx.array(rng.uniform(-1, 1, shape[1]).astype(np.float32)).astype(dtype)
            y = module.rmsnorm(x, w)
            assert y.dtype == dtype
            x64 = np.array(x.astype(mx.float32), dtype=np.float64)
            w64 = np.array(w.astype(mx.float32), dtype=np.float64)
            want = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-5) * w64
            np.testing.assert_allclose(np.array(y.astype(mx.float32)), want, rtol=tolerance,
                                       atol=tolerance)
