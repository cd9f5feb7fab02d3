"""double-buffer: golden IR on sgemm, semantics on the interpreter, refusals, example sweep."""

from __future__ import annotations

from pathlib import Path

from kir.rewrites.double_buffer import RULES

from kir.driver.load import load_kernel
from kir.driver.rulecheck import sweep
from kir.ir.printer import print_kernel
from kir.ir.verify import verify
from kir.rules import NotApplicable, RuleContext

RULE = RULES[0]
EXAMPLES = Path(__file__).parents[2] / "examples"
SGEMM = EXAMPLES / "sgemm.cu"

GOLDEN = """\
  if 0 < num_tiles {
    let a_col_1: i32 = tx
    let b_row_1: i32 = ty
    As[ty * 16 + tx] = select(row < M && a_col_1 < K, A[row * K + a_col_1], 0.0)
    Bs[ty * 16 + tx] = select(b_row_1 < K && col < N, B[b_row_1 * N + col], 0.0)
  }
  barrier block
  for L0 t: i32 = 0; t < num_tiles; t = t + 1 {
    if t + 1 < num_tiles {
      let a_col: i32 = (t + 1) * 16 + tx
      let b_row: i32 = (t + 1) * 16 + ty
      As[ty * 16 + tx + ((t + 1) & 1) * 256] = select(row < M && a_col < K, A[row * K + a_col], 0.0)
      Bs[ty * 16 + tx + ((t + 1) & 1) * 256] = select(b_row < K && col < N, B[b_row * N + col], 0.0)
    }
    for L1 [pragma_unroll] k: i32 = 0; k < 16; k = k + 1 {
      acc = acc + As[ty * 16 + k + (t & 1) * 256] * Bs[k * 16 + tx + (t & 1) * 256]
    }
    barrier block
  }
"""


def test_golden_sgemm():
    kernel = load_kernel(SGEMM).kernel
    assert RULE.sites(kernel) == ["L0"]
    result = RULE.rewrite(kernel, "L0", {}, RuleContext())
    assert not isinstance(result, NotApplicable), result
    verify(result)
    text = print_kernel(result, locations=False)
    assert "  shared As: f32[512]\n  shared Bs: f32[512]\n" in text
    assert GOLDEN in text
    assert text.count("barrier block") == 2


def test_refuses_inner_loop_and_missing_shape():
    kernel = load_kernel(SGEMM).kernel
    result = RULE.rewrite(kernel, "L1", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "load; barrier; compute; barrier" in result.reason
    assert isinstance(RULE.rewrite(kernel, "L7", {}, RuleContext()), NotApplicable)


def test_refuses_dynamic_shared_flash_attention():
    kernel = load_kernel(EXAMPLES / "flash_attn.cu").kernel
    assert RULE.sites(kernel) == []
    result = RULE.rewrite(kernel, "L0", {}, RuleContext())
    assert isinstance(result, NotApplicable)
    assert "static shared" in result.reason


def test_examples_sweep_semantics():
    files = [EXAMPLES / f for f in ("sgemm.cu", "flash_attn.cu", "softmax.cu", "reduce.cu",
                                    "selective_scan.cu")]
    sizes = {"sgemm.cu": [dict(M=32, N=32, K=32), dict(M=20, N=20, K=20),
                          dict(M=20, N=20, K=5)],
             "flash_attn.cu": [dict(B=1, H=1, N=64, D=16)]}
    results = sweep([RULE], files, sizes)
    assert sum(a.status == "same" for a in results) == 3
    bad = [(str(a.step), a.status, a.detail) for a in results if a.status != "same"]
    assert not bad, bad
    print(f"{len(results)} applications checked")
