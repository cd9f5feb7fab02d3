"""kir.rules.templates: a kernel rebuilt around a template's body keeps the original's
signature and takes the new launch; the same text parses once; where shared memory goes."""

from __future__ import annotations

import pytest

from kir.backends import TARGETS
from kir.errors import KirError
from kir.ir import Launch
from kir.ir.parser import parse_kernel
from kir.rules.templates import kernel_from_template, needs_dynamic_shared

ORIGINAL = parse_kernel("""kernel @scale(x: f32* global const, y: f32* global, n: i32)
    grid=("n", "1", "1") block=(1, 1, 1) shared_bytes=0 {
  let i: i32 = i32(block.x)
  y[i] = x[i] * 2.0
}
""", "<original>")
BODY = ["let t_i: i32 = i32(block.x) * 64 + i32(thread.x)",
        "if t_i < n {", "  y[t_i] = x[t_i] * 2.0", "}"]


def test_the_signature_is_kept_and_the_launch_replaced():
    launch = Launch(("ceil(n / 64)", "1", "1"), (64, 1, 1), 0)
    built = kernel_from_template(ORIGINAL, launch, BODY, "<tpl>")
    assert built.name == "scale" and built.params == ORIGINAL.params
    assert built.launch == launch and len(built.body.stmts) == 2
    assert kernel_from_template(ORIGINAL, launch, BODY, "<tpl>") is built  # parsed once


def test_a_template_that_does_not_parse_is_a_kir_error():
    with pytest.raises(KirError):
        kernel_from_template(ORIGINAL, ORIGINAL.launch, ["let broken: = 1"], "<tpl>")


def test_dynamic_shared_memory_only_over_the_static_limit_where_there_is_more():
    cuda, metal = TARGETS["cuda"], TARGETS["metal"]
    assert not needs_dynamic_shared(cuda, 48 * 1024)
    assert needs_dynamic_shared(cuda, 48 * 1024 + 4)
    assert not needs_dynamic_shared(metal, 64 * 1024)  # no more to be had: the verifier refuses
    assert not needs_dynamic_shared(None, 1 << 20)
