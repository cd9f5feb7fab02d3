"""Lambdas in device code: a row normalization written with them (every target against
numpy, the original compiled by a real C++ compiler as one of them), and C++'s capture
rules one by one on the interpreter: by reference sees later changes, by copy keeps the
value at creation, ``mutable`` copies keep state across calls, init captures, generic
lambdas, lambdas passed to templates, an explicit result type."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import Launch

ROWS = Path(__file__).parent / "data" / "lambda_rows.cu"


@pytest.mark.parametrize("target", TARGETS)
def test_row_normalization_written_with_lambdas(target):
    check_everywhere(ROWS, target, [{}, {"R": 3, "C": 37}], seed=8)


def run(body: str, n: int):
    kernel = load_cuda("__global__ void f(float* y) {" + body + "}", "l.cu",
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    return run_kernel(kernel, {"y": np.zeros(n, np.float32)}, {})["y"].tolist()


def test_captures_by_reference_and_by_copy():
    assert run("""float k = 1.0f;
      auto by_ref = [&](float v) { return v * k; };
      auto by_copy = [=](float v) { return v * k; };
      auto one = [k](float v) { return v * k; };
      auto init = [s = k + 1.0f](float v) { return v * s; };
      float* p = y + 4;
      auto at = [=]() { return p[0]; };
      k = 10.0f;
      p += 1;
      y[4] = 7.0f; y[5] = 8.0f;
      y[0] = by_ref(2.0f); y[1] = by_copy(2.0f); y[2] = one(2.0f); y[3] = init(2.0f);
      y[6] = at(); /* the pointer as it was when the lambda was made */""",
               7) == [20.0, 2.0, 2.0, 4.0, 7.0, 8.0, 7.0]


def test_a_mutable_copy_keeps_its_state_and_a_reference_writes_through():
    assert run("""int calls = 0; float total = 0.0f;
      auto count = [calls]() mutable { calls += 1; return calls; };
      auto add = [&total](float v) { total += v; };
      count(); count(); y[0] = count(); y[1] = calls;
      add(1.5f); add(2.0f); y[2] = total;""", 3) == [3.0, 0.0, 3.5]


def test_generic_lambdas_explicit_results_and_lambdas_given_to_templates():
    kernel = load_cuda("""
    template <typename F> __device__ float twice(F f, float v) { return f(f(v)); }
    __device__ float sign_of(float v) {
      auto s = [](float a) -> float { if (a > 0.0f) return 1.0f; return -1.0f; };
      return s(v); }
    __global__ void f(float* y) {
      auto mul = [](auto a, auto b) { return a * b; };
      y[0] = mul(3.0f, 4.0f); y[1] = mul(3, 4) + 0.5f;
      y[2] = twice([](float v) { return v + 1.0f; }, 1.0f);
      y[3] = sign_of(-2.0f) + [] { return 10.0f; }(); }""", "l.cu",
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    got = run_kernel(kernel, {"y": np.zeros(4, np.float32)}, {})["y"].tolist()
    assert got == [12.0, 12.5, 3.0, 9.0]


@pytest.mark.parametrize("body, message", [
    ("auto s = [](float a) { if (a > 0.0f) return 1.0f; return -1.0f; }; y[0] = s(y[0]);",
     "needs its result type written"),
    ("auto s = [](float a) { return a; }; y[0] = s(y[0], y[1]);",
     "takes 1 argument"),
    ("auto s = [q](float a) { return a; }; y[0] = s(y[0]);",
     "captures 'q', which is not a variable here"),
])
def test_lambda_mistakes_are_located_errors(body, message):
    with pytest.raises(KirError, match=message) as info:
        load_cuda("__global__ void f(float* y) {\n" + body + "}", "l.cu")
    assert info.value.loc is not None and info.value.loc.line == 2
