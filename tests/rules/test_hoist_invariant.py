"""hoist-invariant: golden IR, interpreter semantics, refusals, and the example sweep."""

import numpy as np
from kir.rewrites.hoist_invariant import RULES
from loop_sizes import same_outputs, sweep_summary

from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
HEAD = '''kernel @t(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
'''
SRC = HEAD + '''  let tx: i32 = i32(thread.x)
  for L0 i: i32 = 0; i < n; i = i + 1 {
    let k: i32 = n * 2
    let w: f32 = x[k + tx]
    let v: f32 = x[i * 4 + tx] * w
    y[i * 4 + tx] = v
  }
}
'''


def test_golden_guarded_load():
    out = RULE.rewrite(parse_kernel(SRC), "L0", {}, RuleContext())
    assert print_kernel(out, locations=False) == HEAD + '''  let tx: i32 = i32(thread.x)
  let k: i32 = n * 2
  let w: f32
  if 0 < n {
    w = x[k + tx]
  }
  for L0 i: i32 = 0; i < n; i = i + 1 {
    let v: f32 = x[i * 4 + tx] * w
    y[i * 4 + tx] = v
  }
}
'''


def test_semantics():
    k = parse_kernel(SRC)
    out = RULE.rewrite(k, "L0", {}, RuleContext())
    x = np.arange(64, dtype=np.float32)
    for n in (0, 1, 5):
        assert same_outputs(k, out, {"x": x, "y": np.zeros(64, np.float32), "n": n})


def test_not_applicable_when_buffer_written_in_loop():
    src = HEAD + '''  for L0 i: i32 = 0; i < n; i = i + 1 {
    let w: f32 = y[0]
    y[i + 1] = w
  }
}
'''
    result = RULE.rewrite(parse_kernel(src), "L0", {}, RuleContext())
    assert isinstance(result, NotApplicable) and "nothing invariant" in result.reason


def test_sweep_examples():
    counts, bad = sweep_summary([RULE])
    print("hoist-invariant applications checked:", counts)
    assert not bad, bad
