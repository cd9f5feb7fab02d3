"""forward_array_copies (kir.analysis.array_copies): a local array filled element by
element from another is read at its source, when that is the same value; each case runs
before and after on the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda

from kir.analysis.array_copies import forward_array_copies
from kir.interp.run import run_kernel
from kir.ir import Alloc, Launch

ONE = Launch(("1", "1", "1"), (1, 1, 1), 0)


def _arrays(kernel) -> set[str]:
    return {n.name for n in kernel.walk() if isinstance(n, Alloc)}


def _forwarded(body: str, n_out: int = 4):
    kernel = load_cuda("__global__ void k(const float* x, float* y) {\n" + body + "\n}",
                       "a.cu", launch=ONE)
    done = forward_array_copies(kernel)
    args = {"x": np.arange(1, 9, dtype=np.float32), "y": np.zeros(n_out, np.float32)}
    want = run_kernel(kernel, {k: v.copy() for k, v in args.items()}, {})["y"]
    got = run_kernel(done, {k: v.copy() for k, v in args.items()}, {})["y"]
    np.testing.assert_array_equal(got, want)
    return _arrays(done)


def test_a_chain_of_whole_copies_reads_the_first_array():
    left = _forwarded("""
      float a[4]; for (int i = 0; i < 4; ++i) a[i] = x[i];
      float b[4]; b[0] = a[0]; b[1] = a[1]; b[2] = a[2]; b[3] = a[3];
      float c[4]; c[3] = b[3]; c[2] = b[2]; c[1] = b[1]; c[0] = b[0];
      for (int i = 0; i < 4; ++i) y[i] = c[i] * 2.0f;""")
    assert left == {"a"}


def test_copies_in_a_loop_body_refilled_each_iteration_are_forwarded():
    left = _forwarded("""
      for (int r = 0; r < 3; ++r) {
        float a[2]; a[0] = x[2 * r]; a[1] = x[2 * r + 1];
        float b[2]; b[0] = a[0]; b[1] = a[1];
        y[r] = b[0] - b[1] * (float)r;
      }""")
    assert left == {"a"}


@pytest.mark.parametrize("body", [
    # the source changes after the copy
    "float a[2]; a[0] = x[0]; a[1] = x[1]; float b[2]; b[0] = a[0]; b[1] = a[1];"
    " a[0] = 5.0f; y[0] = b[0] + a[0];",
    # only part of the array is copied
    "float a[2]; a[0] = x[0]; a[1] = x[1]; float b[2]; b[0] = a[0]; b[1] = 3.0f;"
    " y[0] = b[0] + b[1];",
    # the copy is written again
    "float a[2]; a[0] = x[0]; a[1] = x[1]; float b[2]; b[0] = a[0]; b[1] = a[1];"
    " b[1] += 1.0f; y[0] = b[1] + a[1];",
    # elements copied to other places
    "float a[2]; a[0] = x[0]; a[1] = x[1]; float b[2]; b[0] = a[1]; b[1] = a[0];"
    " y[0] = b[0] - b[1];",
    # the source is written in a loop inside the block, after the copy
    "float a[2]; a[0] = x[0]; a[1] = x[1]; float b[2]; b[0] = a[0]; b[1] = a[1];"
    " for (int r = 0; r < 2; ++r) { y[r] = b[0] + b[1]; a[0] = x[r + 2]; }",
])
def test_a_copy_that_may_differ_from_its_source_is_kept(body):
    assert "b" in _forwarded(body)


def test_a_source_written_around_the_copys_block_still_holds_the_copy_in_it():
    left = _forwarded("""
      float a[2]; a[0] = x[0]; a[1] = x[1];
      for (int r = 0; r < 3; ++r) {
        if (r != 1) { float b[2]; b[0] = a[0]; b[1] = a[1]; y[r] = b[0] + b[1]; }
        a[0] = x[r + 2];
      }""")
    assert left == {"a"}


def test_shared_memory_is_never_forwarded():
    assert "b" in _forwarded("""
      __shared__ float s[2]; s[0] = x[0]; s[1] = x[1];
      float b[2]; b[0] = s[0]; b[1] = s[1];
      y[0] = b[0] + b[1];""")
