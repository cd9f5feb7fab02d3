"""fuse-loops: golden IR, interpreter semantics, refusals, and the example sweep."""

import numpy as np
from kir.rewrites.fuse_loops import RULES
from loop_sizes import same_outputs, sweep_summary

from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
HEAD = '''kernel @t(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
  let tx: i32 = i32(thread.x)
'''


def make(second_index: str):
    return parse_kernel(HEAD + f'''  for L0 i: i32 = 0; i < n; i = i + 1 {{
    y[i * 4 + tx] = x[i * 4 + tx] * 2.0
  }}
  for L1 j: i32 = 0; j < n; j = j + 1 {{
    y[j * 4 + tx + 64] = y[{second_index}] + 1.0
  }}
}}
''')


def test_golden_and_semantics():
    k = make("j * 4 + tx")
    out = RULE.rewrite(k, "L0", {}, RuleContext(scalars={"n": 8}))
    assert print_kernel(out, locations=False) == HEAD + '''  for L0 i: i32 = 0; i < n; i = i + 1 {
    y[i * 4 + tx] = x[i * 4 + tx] * 2.0
    y[i * 4 + tx + 64] = y[i * 4 + tx] + 1.0
  }
}
'''
    x = np.arange(64, dtype=np.float32)
    assert same_outputs(k, out, {"x": x, "y": np.zeros(128, np.float32), "n": 8})


def test_backward_dependence_refused():
    # Iteration j of the second loop reads what iteration j + 1 of the first writes.
    k = make("(j + 1) * 4 + tx")
    result = RULE.rewrite(k, "L0", {}, RuleContext(scalars={"n": 8}))
    assert isinstance(result, NotApplicable) and "before" in result.reason


def test_threads_sharing_data_refused():
    k = make("j * 4 + (tx + 1) % 4")
    result = RULE.rewrite(k, "L0", {}, RuleContext(scalars={"n": 8}))
    assert isinstance(result, NotApplicable)


def test_different_bounds_refused():
    k = parse_kernel(HEAD + '''  for L0 i: i32 = 0; i < n; i = i + 1 {
    y[i] = 1.0
  }
  for L1 j: i32 = 1; j < n; j = j + 1 {
    y[j] = 2.0
  }
}
''')
    result = RULE.rewrite(k, "L0", {}, RuleContext())
    assert isinstance(result, NotApplicable) and "different bounds" in result.reason


def test_sweep_examples():
    counts, bad = sweep_summary([RULE])
    print("fuse-loops applications checked:", counts)
    assert not bad, bad
