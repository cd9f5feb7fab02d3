"""Function template parameters (``template <typename T, T (*ACT_FN)(const T&)>``): given by
the spec to a kernel (``ACT_FN = { function = "silu_kernel" }``) or as a template argument
to a ``__device__`` function, and called where the template calls them; unnamed reference
parameters (``const float&``) parse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere, spec_variant

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import Launch

GATED = Path(__file__).parent / "data" / "act_and_mul.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_a_gated_activation_given_by_the_spec(target):
    check_everywhere(GATED, target, [{}, {"T": 3, "D": 37}], seed=9)


def test_the_spec_chooses_another_activation(tmp_path):
    spec = spec_variant(GATED, tmp_path, {
        '"silu_kernel"': '"gelu_tanh_kernel"',
        "act_and_mul_ref:silu_and_mul": "act_and_mul_ref:gelu_tanh_and_mul"})
    loaded = load_kernel(GATED, spec_path=spec)
    for target in ("interp", "emulate-original"):
        outcome = check_on_target(loaded, target, seed=9)
        assert outcome.result.ok, (target, outcome.result.describe())


def test_a_device_function_takes_a_function_template_argument():
    kernel = load_cuda("""
    __device__ float twice(float v) { return 2.0f * v; }
    template <typename T> __device__ T neg(T v) { return -v; }
    template <typename T, T (*F)(T)> __device__ T apply2(T v) { return F(F(v)); }
    __global__ void f(float* y) { y[0] = apply2<float, twice>(y[0]);
                                  y[1] = apply2<float, neg<float>>(y[1]); }""", "f.cu",
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    got = run_kernel(kernel, {"y": np.array([3.0, 5.0], np.float32)}, {})["y"]
    assert got.tolist() == [12.0, 5.0]


@pytest.mark.parametrize("templates, message", [
    ('{ scalar_t = "f32" }', "missing value for function template parameter 'ACT_FN'"),
    ('{ scalar_t = "f32", ACT_FN = { function = "relu" } }',
     "'relu' is not a __device__ function of this file"),
    ('{ scalar_t = "f32", ACT_FN = { name = "silu_kernel" } }',
     "a template argument naming something of the file is"),
])
def test_a_function_parameter_the_spec_does_not_fill_is_a_located_error(tmp_path, templates,
                                                                       message):
    spec = GATED.with_suffix(".kir.toml").read_text().replace(
        'templates = { scalar_t = "f32", ACT_FN = { function = "silu_kernel" } }',
        f"templates = {templates}")
    (tmp_path / "s.kir.toml").write_text(spec)
    with pytest.raises(KirError, match=message) as info:
        load_kernel(GATED, spec_path=tmp_path / "s.kir.toml")
    assert info.value.loc is not None
