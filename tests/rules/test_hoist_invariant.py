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


SCALE = '''kernel @t(x: f32* global const, s: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
  shared scale: f32[1]
  if thread.x == 0_u32 {
    scale[0] = s[0] * 2.0
  }
  barrier block
  let tx: i32 = i32(thread.x)
  for L0 i: i32 = tx; i < n; i = i + 4 {
    y[i] = x[i] * scale[0] + select(i < 8, s[i], 0.0)
  }
}
'''


def test_an_invariant_load_inside_a_statement_is_hoisted():
    """A block-wide scale read from shared memory in every iteration (``y[i] = x[i] *
    scale[0]``: vLLM's rms_norm) is read once before the loop; a load in a select's arm is
    left in place (it may not be evaluated), and a constant index inside a declared array
    cannot fault, so the hoisted read needs no guard."""
    out = RULE.rewrite(parse_kernel(SCALE), "L0", {}, RuleContext())
    assert not isinstance(out, NotApplicable), out
    text = print_kernel(out, locations=False)
    assert "  let scale_inv: f32 = scale[0]\n  for L0" in text
    assert "y[i] = x[i] * scale_inv + select(i < 8, s[i], 0.0)" in text
    x = np.arange(32, dtype=np.float32)
    for n in (0, 3, 21):
        assert same_outputs(parse_kernel(SCALE), out,
                            {"x": x, "s": np.arange(32, dtype=np.float32) + 1,
                             "y": np.zeros(32, np.float32), "n": n})


def test_a_load_the_loop_writes_stays():
    written = SCALE.replace("y[i] = x[i]", "scale[0] = x[i]\n    y[i] = x[i]")
    res = RULE.rewrite(parse_kernel(written), "L0", {}, RuleContext())
    assert isinstance(res, NotApplicable) and "declares nothing" in res.reason
