"""Explicit specializations of struct templates (``template <> struct Traits<float>``) and
member types (``typename Traits<T>::Packed``): the specialization written for the template
arguments is the struct's definition, a primary declared only is allowed, the primary is
the definition for every other argument list; what kir cannot choose is a located error."""

from __future__ import annotations

from pathlib import Path

import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere, spec_variant

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import KirError, UnsupportedError

PACKED = Path(__file__).parent / "data" / "packed_types.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_packed_types_chosen_by_specialization(target):
    check_everywhere(PACKED, target, [{}, {"N": 96}], seed=5)


def test_the_half_instance_takes_the_other_specialization_and_the_primary(tmp_path):
    spec = spec_variant(PACKED, tmp_path, {
        '"f32"': '"f16"', "ceil(N / 512)": "ceil(N / 256)"})  # two lanes a thread, not four
    loaded = load_kernel(PACKED, spec_path=spec)
    types = {str(getattr(n, "type", "")) for n in loaded.kernel.walk()}
    assert "f16x2" in types and "f32x4" not in types  # __half2 packs, not float4
    outcome = check_on_target(loaded, "interp", seed=5)  # Scale<__half, 2>: the primary's 1.0
    assert outcome.result.ok, outcome.result.describe()


@pytest.mark.parametrize("source, message", [
    ("template <typename T> struct P;\ntemplate <> struct P<float> { using V = float2; };\n"
     "__global__ void f(int* y) { typename P<int>::V v; y[0] = 1; }",
     "no specialization of struct template 'P' for P<i32>"),
    ("template <typename T, int N> struct P { using V = float; };\n"
     "template <typename T> struct P<T, 2> { using V = float2; };\n"
     "__global__ void f(float* y) { typename P<float, 2>::V v; y[0] = 1.0f; }",
     "partial specialization of struct template 'P' not supported"),
    ("template <typename T> struct P { using V = float; };\n"
     "__global__ void f(float* y) { typename P<float>::W v; y[0] = 1.0f; }",
     "has no member type 'W'"),
])
def test_what_kir_cannot_choose_is_a_located_error(source, message):
    with pytest.raises((KirError, UnsupportedError), match=message) as info:
        load_cuda(source, "s.cu")
    assert info.value.loc is not None
