"""Template template parameters (``template <template <typename> class Op, typename T>``),
``__inline__`` helpers and ``if constexpr``: a warp-per-row softmax in the style of
inference engines' softmax headers, run against numpy on every target, both branches of
its ``if constexpr``; what cannot bind is a located error."""

from __future__ import annotations

from pathlib import Path

import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere, spec_variant

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import KirError, UnsupportedError
from kir.ir import Launch
from kir.ir.printer import print_kernel

SOFTMAX = Path(__file__).parent / "data" / "warp_softmax_tt.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_warp_softmax_through_template_template_reductions(target):
    check_everywhere(SOFTMAX, target, [{}, {"R": 7, "C": 72}], seed=4)


def test_if_constexpr_lowers_only_the_branch_the_template_chooses(tmp_path):
    spec = spec_variant(SOFTMAX, tmp_path, {
        "log_softmax = false": "log_softmax = true",
        "warp_softmax_tt_ref:softmax": "warp_softmax_tt_ref:log_softmax"})
    loaded = load_kernel(SOFTMAX, spec_path=spec)
    text = print_kernel(loaded.kernel)
    assert "log(" in text and "/ row_sum" not in text
    outcome = check_on_target(loaded, "interp", seed=4)
    assert outcome.result.ok, outcome.result.describe()


def test_the_condition_of_if_constexpr_must_be_a_constant():
    with pytest.raises(KirError, match="'if constexpr' condition must be a compile-time") as info:
        load_cuda("""__global__ void f(float* y, int n) {
          if constexpr (n > 2) { y[0] = 1.0f; } }""", "c.cu")
    assert info.value.loc.line == 2


def test_a_template_template_argument_must_name_a_struct_template():
    src = """template <typename T> struct Neg { __device__ T operator()(T x) const { return -x; } };
    template <template <typename> class Op, typename T> __device__ T apply(T v) { return Op<T>()(v); }
    __global__ void f(float* y) { y[0] = apply<%s, float>(y[0]); }"""
    kernel = load_cuda(src % "Neg", "t.cu", launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    assert kernel.name == "f"
    with pytest.raises(KirError, match="must be the name of a struct template") as info:
        load_cuda(src % "float", "t.cu")
    assert info.value.loc.line == 3


def test_a_kernels_own_template_template_parameter_is_refused():
    with pytest.raises(UnsupportedError, match="template template parameter"):
        load_cuda("""template <typename T> struct Neg { __device__ T operator()(T x) const { return -x; } };
        template <template <typename> class Op> __global__ void f(float* y) { y[0] = Op<float>()(y[0]); }""",
                  "t.cu")
