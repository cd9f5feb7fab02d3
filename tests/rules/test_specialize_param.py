"""specialize-param: golden IR, interpreter semantics, refusals, and the example sweep."""

import numpy as np
from kir.rewrites.specialize_param import RULES
from loop_sizes import same_outputs, sweep_summary

from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
HEAD = '''kernel @t(x: f32* global const, y: f32* global, n: i32, a: f32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
'''
SRC = HEAD + '''  let tx: i32 = i32(thread.x)
  for L0 i: i32 = 0; i < n * 2; i = i + 1 {
    y[i * 4 + tx] = x[i * 4 + tx] * a
  }
  if n > 8 {
    y[tx] = 0.0
  }
}
'''


def test_golden():
    """The value is folded in and the launch says the kernel is specialized."""
    out = RULE.rewrite(parse_kernel(SRC), "n", {}, RuleContext(scalars={"n": 3, "a": 0.5}))
    head = HEAD.replace("shared_bytes=0 {", "shared_bytes=0 specialized {")
    assert print_kernel(out, locations=False) == head + '''  let tx: i32 = i32(thread.x)
  for L0 i: i32 = 0; i < 6; i = i + 1 {
    y[i * 4 + tx] = x[i * 4 + tx] * a
  }
}
'''


def test_semantics_float_param_rounds_to_f32():
    k = parse_kernel(SRC)
    ctx = RuleContext(scalars={"n": 3, "a": 0.1})
    out = RULE.rewrite(RULE.rewrite(k, "n", {}, ctx), "a", {}, ctx)
    assert "0.1" in print_kernel(out) and "n * 2" not in print_kernel(out)
    x = np.arange(64, dtype=np.float32)
    assert same_outputs(k, out, {"x": x, "y": np.zeros(64, np.float32), "n": 3,
                                 "a": np.float32(0.1)})


def test_not_applicable():
    k = parse_kernel(SRC)
    result = RULE.rewrite(k, "n", {}, RuleContext())
    assert isinstance(result, NotApplicable) and "no value" in result.reason
    assert RULE.sites(k) == ["n", "a"]


def test_sweep_examples():
    counts, bad = sweep_summary([RULE])
    print("specialize-param applications checked:", counts)
    assert not bad, bad
    assert counts.get("same", 0) > 10
