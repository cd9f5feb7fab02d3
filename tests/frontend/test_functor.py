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


@pytest.mark.parametrize("target", TARGETS)
def test_row_statistics_through_function_objects(target):
    check_everywhere(ROWS, target, [{}, {"C": 37}], seed=5)


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
