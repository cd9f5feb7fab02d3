"""unroll-loop: golden IR, interpreter semantics, refusals, and the sweep over the examples."""

import numpy as np
from kir.rewrites.unroll_loop import RULES
from loop_sizes import same_outputs, sweep_summary

from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
HEAD = '''kernel @t(x: f32* global const, y: f32* global, n: i32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
'''
SRC = HEAD + '''  let tx: i32 = i32(thread.x)
  for L0 i: i32 = 0; i < 3; i = i + 1 {
    y[i * 4 + tx] = x[i * 4 + tx] * 2.0
  }
  let s: f32 = 0.0
  for L1 j: i32 = 0; j < n; j = j + 1 {
    let v: f32 = x[j * 4 + tx]
    s = s + v
  }
  y[12 + tx] = s
}
'''


def apply(src, site, factor):
    return RULE.rewrite(parse_kernel(src), site, {"factor": factor}, RuleContext())


def test_full_unroll_golden():
    out = apply(SRC, "L0", "full")
    text = print_kernel(out, locations=False)
    assert text.startswith(HEAD + '''  let tx: i32 = i32(thread.x)
  y[tx] = x[tx] * 2.0
  y[4 + tx] = x[4 + tx] * 2.0
  y[8 + tx] = x[8 + tx] * 2.0
  let s: f32 = 0.0
''')


def test_factor_two_with_remainder_golden():
    out = apply(SRC, "L1", 2)
    expected = HEAD + '''  let tx: i32 = i32(thread.x)
  for L0 i: i32 = 0; i < 3; i = i + 1 {
    y[i * 4 + tx] = x[i * 4 + tx] * 2.0
  }
  let s: f32 = 0.0
  let j_rest: i32 = 0
  for L1 j: i32 = 0; j < n - 1; j = j + 2 {
    let v: f32 = x[j * 4 + tx]
    s = s + v
    let v_1: f32 = x[(j + 1) * 4 + tx]
    s = s + v_1
    j_rest = j + 2
  }
  for L2 j_r: i32 = j_rest; j_r < n; j_r = j_r + 1 {
    let v_2: f32 = x[j_r * 4 + tx]
    s = s + v_2
  }
  y[12 + tx] = s
}
'''
    assert print_kernel(out, locations=False) == expected


def test_semantics_for_every_trip_count():
    k = parse_kernel(SRC)
    x = np.arange(64, dtype=np.float32)
    for factor in (2, 4, 8):
        out = apply(SRC, "L1", factor)
        for n in (0, 1, 2, 3, 5, 8, 9):
            assert same_outputs(k, out, {"x": x, "y": np.zeros(16, np.float32), "n": n})


def test_not_applicable():
    assert isinstance(apply(SRC, "L1", "full"), NotApplicable)  # trip count unknown
    src = HEAD + '''  for L0 i: i32 = 0; i < n; i = i + 1 {
    if i > 2 {
      break
    }
  }
}
'''
    result = apply(src, "L0", 2)
    assert isinstance(result, NotApplicable) and "break" in result.reason
    src = HEAD + '''  let i: i32 = 0
  while i < n {
    i = i + 1
  }
}
'''
    assert RULE.sites(parse_kernel(src)) == []


def test_an_unroll_past_the_ir_size_cap_is_refused_before_it_is_built():
    """The per-step IR size cap (``ir_nodes``) is known before the copies are made: the loop
    body's size times the copies it would add."""
    from kir.limits import Limits, configured

    kernel = parse_kernel(SRC)
    size = sum(1 for _ in kernel.walk())
    with configured(Limits(ir_nodes=size + 5)):  # room for far less than one more body
        result = RULE.rewrite(kernel, "L1", {"factor": 8}, RuleContext())
    assert isinstance(result, NotApplicable) and f"more than {size + 5} IR nodes" in result.reason
    assert not isinstance(apply(SRC, "L1", 8), NotApplicable)  # under the default cap


def test_sweep_examples():
    counts, bad = sweep_summary([RULE])
    print("unroll-loop applications checked:", counts)
    assert not bad, bad
    assert counts.get("same", 0) > 20
