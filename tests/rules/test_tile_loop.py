"""tile-loop: golden IR, interpreter semantics, refusals, and the sweep over the examples."""

import numpy as np
from kir.rewrites.tile_loop import RULES
from loop_sizes import same_outputs, sweep_summary

from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
HEAD = '''kernel @t(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
'''
SRC = HEAD + '''  let tx: i32 = i32(thread.x)
  let s: f32 = 0.0
  for L0 j: i32 = 1; j <= n; j = j + 2 {
    s = s + x[j * 4 + tx]
  }
  for L1 i: i32 = 0; i < 16; i = i + 1 {
    y[i * 4 + tx] = s
  }
}
'''


def apply(site, factor, src=SRC):
    return RULE.rewrite(parse_kernel(src), site, {"factor": factor}, RuleContext())


def test_golden_ragged_inclusive_and_exact():
    text = print_kernel(apply("L0", 4), locations=False)
    assert '''  for L0 j_tile: i32 = 1; j_tile <= n; j_tile = j_tile + 8 {
    for L2 j: i32 = j_tile; j <= min(j_tile + 8 - 1, n); j = j + 2 {
      s = s + x[j * 4 + tx]
    }
  }
''' in text
    text = print_kernel(apply("L1", 4), locations=False)
    assert '''  for L1 i_tile: i32 = 0; i_tile < 16; i_tile = i_tile + 4 {
    for L2 i: i32 = i_tile; i < i_tile + 4; i = i + 1 {
      y[i * 4 + tx] = s
    }
  }
''' in text


def test_semantics():
    k = parse_kernel(SRC)
    x = np.arange(128, dtype=np.float32)
    for factor in (4, 8):
        out = apply("L0", factor)
        for n in (0, 1, 6, 17, 30):
            assert same_outputs(k, out, {"x": x, "y": np.zeros(64, np.float32), "n": n})


def test_not_applicable():
    result = apply("L1", 16)
    assert isinstance(result, NotApplicable) and "one tile" in result.reason
    src = HEAD + '''  for L0 i: i32 = n; i > 0; i = i - 1 {
    y[i] = 0.0
  }
}
'''
    assert isinstance(apply("L0", 4, src), NotApplicable)


def test_sweep_examples():
    counts, bad = sweep_summary([RULE])
    print("tile-loop applications checked:", counts)
    assert not bad, bad
    assert counts.get("same", 0) > 20
