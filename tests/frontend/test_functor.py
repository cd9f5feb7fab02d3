"""Function objects: data-free structs with ``operator()`` (``MaxOp<T>``), called as
``Op()(a, b)`` or through a name, passed by value to inlined template functions whose
``typename Op`` they deduce; the call operator is inlined like a ``__device__`` function."""

from __future__ import annotations

from pathlib import Path

import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.errors import KirError

ROWS = Path(__file__).parent / "data" / "functor_rows.cu"
MAP = ROWS.with_name("functor_rows_map.kir.toml")


@pytest.mark.parametrize("target", TARGETS)
def test_row_statistics_through_function_objects(target):
    check_everywhere(ROWS, target, [{}, {"C": 37}], seed=5)


@pytest.mark.parametrize("target", TARGETS)
def test_a_function_object_parameter_of_a_type_the_spec_names(target):
    """``Op op`` by value, ``templates = { Op = { type = "Square" } }``: kir inlines the
    call; the original gets a default-made ``Square`` on the emulator."""
    check_everywhere(ROWS, target, [{}, {"N": 77}], seed=5, spec=MAP)


def test_a_type_name_must_be_asked_for_as_one(tmp_path):
    spec = MAP.read_text().replace('{ type = "Square" }', '"Square"')
    (tmp_path / "s.kir.toml").write_text(spec)
    with pytest.raises(KirError, match="neither a size nor a dtype") as info:
        load_kernel(ROWS, spec_path=tmp_path / "s.kir.toml")
    assert 'Op = { type = "Square" }' in info.value.hint


def test_the_call_operator_is_inlined_under_a_c_name():
    names = {getattr(n, "name", "") for n in load_kernel(ROWS).kernel.walk()}
    assert "MaxOp_call_ret" in names and not any("::" in n or "(" in n for n in names)


def test_what_a_function_object_cannot_be_is_refused():
    # (a struct with data and operator() is an object with a member function:
    # tests/frontend/test_methods.py)
    with pytest.raises(KirError, match="takes 1 template argument"):
        load_cuda("""
        template <typename T> struct Neg { __device__ T operator()(T x) const { return -x; } };
        __global__ void f(float* y) { y[0] = Neg()(y[0]); }""", "s.cu")
