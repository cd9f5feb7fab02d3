"""interchange-loops: golden IR, the FlashAttention-1 -> 2 swap, refusals, example sweep."""

import dataclasses
from pathlib import Path

import numpy as np
from kir.rewrites.interchange_loops import RULES
from loop_sizes import same_outputs, sweep_summary

from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
HEAD = '''kernel @t(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
  let tx: i32 = i32(thread.x)
'''
SRC = HEAD + '''  for L0 a: i32 = 1; a < 4; a = a + 1 {
    let base: i32 = a * 16
    for L1 b: i32 = 0; b < 4; b = b + 1 {
      y[base + b * 4 + tx] = y[base - 16 + b * 4 + tx] + x[b]
    }
  }
}
'''


def test_golden_prologue_moves_inside():
    out = RULE.rewrite(parse_kernel(SRC), "L0", {}, RuleContext())
    assert print_kernel(out, locations=False) == HEAD + '''  for L1 b: i32 = 0; b < 4; b = b + 1 {
    for L0 a: i32 = 1; a < 4; a = a + 1 {
      let base: i32 = a * 16
      y[base + b * 4 + tx] = y[base - 16 + b * 4 + tx] + x[b]
    }
  }
}
'''
    x = np.arange(4, dtype=np.float32)
    y = np.random.default_rng(0).random(64).astype(np.float32)
    assert same_outputs(parse_kernel(SRC), out, {"x": x, "y": y, "n": 0})


def test_illegal_direction_refused():
    src = SRC.replace("y[base - 16 + b * 4 + tx]", "y[base - 16 + (b + 1) * 4 + tx]")
    result = RULE.rewrite(parse_kernel(src), "L0", {}, RuleContext())
    assert isinstance(result, NotApplicable) and "dependence" in result.reason


def test_reduction_refused():
    src = HEAD + '''  let s: f32 = 0.0
  for L0 a: i32 = 0; a < 4; a = a + 1 {
    for L1 b: i32 = 0; b < 4; b = b + 1 {
      s = s * 0.5 + x[a * 4 + b]
    }
  }
  y[tx] = s
}
'''
    assert isinstance(RULE.rewrite(parse_kernel(src), "L0", {}, RuleContext()), NotApplicable)


def test_flash_attention_1_to_2():
    from kir.driver.load import load_kernel
    from kir.driver.rulecheck import context_for
    from kir.driver.runners import copy_inputs, run_interp

    path = Path(__file__).resolve().parents[2] / "examples" / "flash_attn.cu"
    loaded = load_kernel(path, sizes={"B": 1, "H": 1, "N": 40, "D": 16, "T": 32})
    out = RULE.rewrite(loaded.kernel, "L0", {}, context_for(loaded))
    assert not isinstance(out, NotApplicable), out
    text = print_kernel(out, locations=False)
    # The query-tile loop is now outside, the K/V loads and both barriers inside it.
    assert text.index("for L2 i") < text.index("for L0 j") < text.index("for L1 x")
    inputs = loaded.bound.make_inputs(0)
    want = run_interp(loaded, copy_inputs(inputs))
    got = run_interp(dataclasses.replace(loaded, kernel=out), copy_inputs(inputs))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_sweep_examples():
    counts, bad = sweep_summary([RULE])
    print("interchange-loops applications checked:", counts)
    assert not bad, bad
    assert counts.get("same", 0) >= 2  # flash attention at both sizes
