"""kir.emulate.metal_kernel: MLX-documented and mlx-lm-style kernels against MLX's CPU ops."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_kernels import (
    make_axpby,
    make_exp_strided,
    make_histogram,
    make_row_sum,
    make_scan,
)

from kir.emulate import EmulatorError, emulator_available, metal_kernel

AVAILABLE, REASON = emulator_available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"CPU emulator unavailable: {REASON}")

CPU = mx.cpu


def normal(shape, dtype=mx.float32, seed=0):
    return mx.random.normal(shape, key=mx.random.key(seed)).astype(dtype)


def assert_close(got, want, rtol=1e-5, atol=1e-5):
    assert isinstance(got, mx.array)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.array(got.astype(mx.float32)),
                               np.array(want.astype(mx.float32)), rtol=rtol, atol=atol)


def test_exp_strided_from_mlx_docs_reads_through_strides() -> None:
    exp_elementwise = make_exp_strided(metal_kernel)
    a = normal((4, 16))
    assert_close(exp_elementwise(a[::2]), mx.exp(a[::2], stream=CPU), rtol=1e-6)
    # a numpy view keeps its strides (ensure_row_contiguous=False): elem_to_loc does the work
    kernel = metal_kernel("myexp_view", ["inp"], ["out"],
                          "uint elem = thread_position_in_grid.x;\n"
                          "out[elem] = metal::exp(inp[elem_to_loc(elem, inp_shape, inp_strides,"
                          " inp_ndim)]);", ensure_row_contiguous=False, numpy=True)
    base = np.array(normal((6, 10)))
    view = base[::2, 1::3]
    (out,) = kernel(inputs=[view], grid=(view.size, 1, 1), threadgroup=(32, 1, 1),
                    output_shapes=[view.shape], output_dtypes=[np.float32])
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, np.exp(view), rtol=1e-6)


@pytest.mark.parametrize("rows, cols", [(8, 4096), (3, 1000), (5, 7)])
def test_row_sum_with_simd_groups_matches_mx_sum(rows: int, cols: int) -> None:
    x = normal((rows, cols))
    assert_close(make_row_sum(metal_kernel)(x), mx.sum(x, axis=1, stream=CPU), rtol=1e-4,
                 atol=1e-4)


def test_bfloat16_without_ml_dtypes_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "ml_dtypes", None)  # import fails
    kernel = metal_kernel("bf_copy", ["x"], ["y"], "y[0] = x[0];")
    with pytest.raises(EmulatorError, match="bfloat16 arrays need the optional package "
                                            "ml_dtypes") as info:
        kernel(inputs=[mx.ones((2,), dtype=mx.bfloat16)], grid=(1, 1, 1),
               threadgroup=(1, 1, 1), output_shapes=[(2,)], output_dtypes=[mx.bfloat16])
    assert "kir[bf16]" in str(info.value)


def test_row_sum_in_half_and_bfloat16() -> None:
    pytest.importorskip("ml_dtypes", reason="bfloat16 needs the bf16 extra (ml_dtypes)")
    row_sum = make_row_sum(metal_kernel, threads=64)
    for dtype, tol in ((mx.float16, 2e-2), (mx.bfloat16, 6e-2)):
        x = normal((4, 300), dtype, seed=1)
        want = mx.sum(x.astype(mx.float32), axis=1, stream=CPU).astype(dtype)
        assert_close(row_sum(x), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("rows, cols", [(4, 1000), (2, 4096), (1, 33)])
def test_scan_matches_mx_cumsum(rows: int, cols: int) -> None:
    x = normal((rows, cols), seed=2)
    assert_close(make_scan(metal_kernel)(x), mx.cumsum(x, axis=1, stream=CPU), rtol=1e-4,
                 atol=1e-3)


def test_templates_dtype_int_and_bool() -> None:
    pytest.importorskip("ml_dtypes", reason="bfloat16 needs the bf16 extra (ml_dtypes)")
    axpby = make_axpby(metal_kernel)
    x, y = normal((1000,), seed=3), normal((1000,), seed=4)
    assert_close(axpby(x, y, 2.0, -0.5), 2.0 * x - 0.5 * y, rtol=1e-6)
    assert_close(axpby(x, y, 2.0, -0.5, relu=True), mx.maximum(2.0 * x - 0.5 * y, 0.0),
                 rtol=1e-6)
    xb, yb = x.astype(mx.bfloat16), y.astype(mx.bfloat16)
    want = (2.0 * xb.astype(mx.float32) - 0.5 * yb.astype(mx.float32)).astype(mx.bfloat16)
    assert_close(axpby(xb, yb, 2.0, -0.5), want, rtol=1e-2, atol=1e-2)


def test_atomic_histogram_matches_numpy() -> None:
    values = mx.random.uniform(shape=(5000,), key=mx.random.key(5))
    counts, sums = make_histogram(metal_kernel)(values)
    v = np.array(values)
    bins = np.clip((v * 16).astype(np.int32), 0, 15)
    np.testing.assert_array_equal(np.array(counts), np.bincount(bins, minlength=16))
    np.testing.assert_allclose(np.array(sums), np.bincount(bins, v, minlength=16), rtol=1e-4)


def test_verbose_prints_mlx_generated_source(capsys) -> None:
    kernel = metal_kernel("myexp", ["inp"], ["out"],
                          "uint elem = thread_position_in_grid.x;\n"
                          "T tmp = inp[elem];\nout[elem] = metal::exp(tmp);")
    a = normal((4, 16), mx.float16)
    kernel(inputs=[a], template=[("T", mx.float32)], grid=(a.size, 1, 1),
           threadgroup=(256, 1, 1), output_shapes=[a.shape], output_dtypes=[a.dtype],
           verbose=True)
    printed = capsys.readouterr().out
    # The signature MLX's documentation shows for this very kernel, named as MLX's code names
    # it: "custom_kernel_" + name + "_" + "<float>" with <, > and ", " made "_" (the page
    # shows one underscore before "float"; custom_kernel.cpp produces two).
    name = "custom_kernel_myexp__float_float16_t_float16_t"
    assert f"template <typename T>\n[[kernel]] void {name}(" in printed
    assert ("  const device float16_t* inp [[buffer(0)]],\n"
            "  device float16_t* out [[buffer(1)]],\n"
            "  uint3 thread_position_in_grid [[thread_position_in_grid]]) {") in printed
    assert f'template [[host_name("{name}")]] [[kernel]] decltype({name}<float>) {name}<float>;' \
        in printed


def test_mlx_argument_checks_and_compile_options() -> None:
    with pytest.raises(EmulatorError, match="Must specify at least one output"):
        metal_kernel("k", ["x"], [], "")
    with pytest.raises(EmulatorError, match="Unknown compile option `opt`"):
        metal_kernel("k", ["x"], ["y"], "", compile_options={"opt": 1})
    with pytest.raises(EmulatorError, match="Expected math_mode"):
        metal_kernel("k", ["x"], ["y"], "", compile_options={"math_mode": "quick"})
    kernel = metal_kernel("k_fast", ["x"], ["y"], "y[thread_position_in_grid.x] = "
                          "metal::exp(x[thread_position_in_grid.x]);",
                          compile_options={"math_mode": "fast"})
    x = normal((64,))
    with pytest.raises(EmulatorError, match="Expected `output_dtypes` to have size 1"):
        kernel(inputs=[x], grid=(64, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(64,)],
               output_dtypes=[])
    with pytest.raises(EmulatorError, match="`grid` must be a tuple of three ints"):
        kernel(inputs=[x], grid=(64,), threadgroup=(32, 1, 1), output_shapes=[(64,)],
               output_dtypes=[mx.float32])
    (y,) = kernel(inputs=[x], grid=(64, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(64,)],
                  output_dtypes=[mx.float32])
    assert_close(y, mx.exp(x, stream=CPU), rtol=1e-5)


def test_outputs_without_init_value_are_poisoned_with_nan() -> None:
    kernel = metal_kernel("half_writer", ["x"], ["y"],
                          "uint i = thread_position_in_grid.x;\nif (i % 2 == 0) y[i] = x[i];")
    x = normal((8,))
    (y,) = kernel(inputs=[x], grid=(8, 1, 1), threadgroup=(8, 1, 1), output_shapes=[(8,)],
                  output_dtypes=[mx.float32])
    values = np.array(y)
    np.testing.assert_array_equal(values[::2], np.array(x)[::2])
    assert np.isnan(values[1::2]).all()
