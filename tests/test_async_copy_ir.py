"""Asynchronous copies in the IR (``async`` stores, ``async_commit``, ``async_wait``): text
round trip, the verifier's rules, the interpreter's latest-landing model, and how each target
prints them (CUDA's cp.async helpers; Metal's plain copy)."""

from __future__ import annotations

import numpy as np
import pytest

from kir.backends import TARGETS
from kir.backends.cstyle import BufferInfo, Printer
from kir.errors import KirError
from kir.interp import run_kernel
from kir.ir import AsyncCommit, AsyncWait, Store
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.ir.types import F32
from kir.ir.verify import verify

# Each thread copies 4 floats into a shared tile, then reads another thread's: right only
# once the copy has landed and the block has met at the barrier.
KERNEL = """kernel @k(a: f32* global const, b: f32* global)
    grid=(1, 1, 1) block=(32, 1, 1) shared_bytes=0 {
  shared s: f32[128]
  async s[i32(thread.x) * 4] = a[i32(thread.x) * 4] as f32x4
  async_commit
  async_wait WAIT
  barrier block
  b[i32(thread.x)] = s[i32(thread.x) * 5 % 128]
}
"""


def _kernel(wait: int = 0, text: str = KERNEL):
    return parse_kernel(text.replace("WAIT", str(wait)), "<test>")


def test_round_trips_through_text():
    kernel = _kernel()
    stmts = kernel.body.stmts
    assert isinstance(stmts[1], Store) and stmts[1].asynchronous
    assert isinstance(stmts[2], AsyncCommit) and stmts[3] == AsyncWait(0)
    text = print_kernel(kernel, locations=False)
    assert "  async s[i32(thread.x) * 4] = a[" in text and "async_wait 0" in text
    assert parse_kernel(text, "<again>") == kernel
    # An asynchronous copy is not the same statement as a synchronous one.
    assert stmts[1] != Store(stmts[1].buffer, stmts[1].index, stmts[1].value)


def test_the_new_words_are_escaped_as_names():
    text = KERNEL.replace("WAIT", "0").replace("b[i32(thread.x)] =", "let async: i32 = 1\n"
                                                  "  b[i32(thread.x) + async - 1] =")
    kernel = parse_kernel(text.replace("let async", "let %async").replace("+ async", "+ %async"),
                          "<test>")
    printed = print_kernel(kernel, locations=False)
    assert "let %async: i32 = 1" in printed and parse_kernel(printed, "<again>") == kernel


def test_the_interpreter_lands_copies_at_the_wait_that_needs_them():
    a = np.arange(128, dtype=np.float32)
    args = {"a": a, "b": np.zeros(32, np.float32)}
    landed = run_kernel(_kernel(0), args, {})["b"]
    np.testing.assert_array_equal(landed, a[np.arange(32) * 5 % 128])
    # Waiting while one group may still be in flight: the tile has not arrived (shared
    # memory starts as NaN in the interpreter).
    assert np.isnan(run_kernel(_kernel(1), args, {})["b"]).all()


@pytest.mark.parametrize("old,new,message", [
    ("async s[", "async b[", "not a shared array"),
    ("= a[i32(thread.x) * 4] as f32x4", "= 1.0", "must be a load from a global buffer"),
    ("async_wait 0", "if i32(thread.x) < 3 {\n    async_wait 0\n  }",
     "async_commit / async_wait under thread-divergent control flow"),
    ("async_commit", "if i32(thread.x) < 3 {\n    async_commit\n  }",
     "under thread-divergent control flow"),
])
def test_the_verifier_rejects(old, new, message):
    text = KERNEL.replace("WAIT", "0").replace(old, new)
    with pytest.raises(KirError, match=message):
        verify(parse_kernel(text, "<test>"))


def test_a_copy_of_three_floats_is_refused():
    text = KERNEL.replace("WAIT", "0").replace(
        "async s[i32(thread.x) * 4] = a[i32(thread.x) * 4] as f32x4",
        "async s[i32(thread.x) * 4] = a[i32(thread.x) * 4] as f32x3")
    with pytest.raises(KirError, match="4, 8 or 16 bytes"):
        verify(parse_kernel(text, "<test>"))


def _printed(target: str) -> tuple[list[str], set[str]]:
    space = "const device " if target == "metal" else "const "
    buffers = {"a": BufferInfo(F32, space, writable=False), "b": BufferInfo(F32),
               "s": BufferInfo(F32, vector_access=True)}
    printer = Printer(TARGETS[target].dialect, buffers)
    return printer.block(_kernel(0).body, 0), printer.helpers


def test_cuda_prints_cp_async_through_its_helper():
    lines, helpers = _printed("cuda")
    assert "kir_copy_async<16>(&s[" in "\n".join(lines)
    assert "kir_copy_commit();" in lines and "kir_copy_wait<0>();" in lines
    assert "async_copy" in helpers
    helper = TARGETS["cuda"].helpers["async_copy"]
    assert "cp.async.cg.shared.global" in helper and "cp.async.wait_group" in helper


def test_metal_copies_synchronously():
    lines, helpers = _printed("metal")
    text = "\n".join(lines)
    assert "kir_copy" not in text and "async" not in text
    assert "float4" in text and not helpers & {"async_copy"}
