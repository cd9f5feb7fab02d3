"""privatize-atomic: golden IR, the coarsened reduction at several sizes and on the emulator,
refusals, and the example sweep."""

import dataclasses

import numpy as np
import pytest
from kir.backends import TARGETS
from kir.rewrites.privatize_atomic import RULES
from loop_sizes import EXAMPLES, same_outputs, sweep_summary

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.ir.parser import parse_kernel
from kir.ir.printer import print_kernel
from kir.rules import NotApplicable, RuleContext, apply_trace, context_for, parse_step
from kir.search.genome import safe_sites

RULE = RULES[0]
HEAD = '''kernel @t(x: f32* global const, out: f32* global, n: i32)
    grid=("1", "1", "1") block=(4, 1, 1) shared_bytes=0 {
'''
SRC = HEAD + '''  let tx: i32 = i32(thread.x)
  for L0 i: i32 = 0; i < n; i = i + 1 {
    if tx == 0 {
      atomic.add(out[1], x[i])
    }
  }
}
'''


def test_golden_and_semantics():
    out = RULE.rewrite(parse_kernel(SRC), "L0", {}, RuleContext())
    assert print_kernel(out, locations=False) == HEAD + '''  let tx: i32 = i32(thread.x)
  let out_acc: f32 = 0.0
  let out_hit: bool = false
  for L0 i: i32 = 0; i < n; i = i + 1 {
    if tx == 0 {
      out_acc = out_acc + x[i]
      out_hit = true
    }
  }
  if out_hit {
    atomic.add(out[1], out_acc)
  }
}
'''
    args = {"x": np.arange(7, dtype=np.float32), "out": np.array([5.0, 1.0], np.float32),
            "n": 7}
    assert same_outputs(parse_kernel(SRC), out, args)
    # n = 0: no thread adds anything, and the flag keeps the final add away
    assert same_outputs(parse_kernel(SRC), out, {**args, "n": 0})


def _coarsened(steps: int, sizes: dict):
    loaded = load_kernel(EXAMPLES / "reduce.cu", sizes=sizes)
    registry = load_registry()
    ctx = context_for(loaded, TARGETS["cuda"])
    kernel = loaded.kernel
    for _ in range(steps):
        kernel = apply_trace(kernel, [parse_step("coarsen-threads{dim=x,factor=4}", registry)],
                             registry, ctx, strict=True).kernel
        site = safe_sites(RULE, kernel)[0]
        kernel = RULE.rewrite(kernel, site, {}, ctx)
        assert not isinstance(kernel, NotApplicable), kernel
    return loaded, kernel


@pytest.mark.parametrize("steps", [1, 3])
def test_coarsened_reduction_adds_once_per_block(steps):
    """Three rounds of coarsen x4 + privatize: one atomic add per 64 former blocks, results
    unchanged at the sizes it was built for and at others (the coarsening guard is computed
    at run time)."""
    loaded, out = _coarsened(steps, {"n": 100000})
    atomics = [n for n in out.body.walk() if type(n).__name__ == "Atomic"]
    assert len(atomics) == 1
    assert out.body.stmts[-1].cond.name.startswith("out_hit")  # the add comes last, once
    for n in (100000, 777, 1, 200000):
        sized = load_kernel(EXAMPLES / "reduce.cu", sizes={"n": n})
        inputs = sized.bound.make_inputs(0)
        assert same_outputs(sized.kernel, out, inputs, sized.bound.sizes), n


def test_emitted_cuda_and_metal_agree_with_the_interpreter():
    from kir.backends.emulate import emulator_available

    from kir.driver.runners import check_on_target

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    loaded, out = _coarsened(2, {"n": 40000})
    for target in ("emulate-cuda", "emulate-metal"):
        outcome = check_on_target(dataclasses.replace(loaded, kernel=out), target)
        assert outcome.result.ok, (target, outcome.result.describe())


@pytest.mark.parametrize("body,reason", [
    ("let old: f32 = 0.0\n    old = atomic.add(out[1], x[i])", "old value"),
    ("atomic.add(out[i % 2], x[i])", "changes inside the loop"),
    ("atomic.add(out[1], x[i])\n    atomic.add(out[0], x[i])", "different indices"),
    ("atomic.add(out[1], x[i])\n    atomic.max(out[1], x[i])", "only adds"),
])
def test_refusals(body, reason):
    src = HEAD + f'''  for L0 i: i32 = 0; i < n; i = i + 1 {{
    {body}
  }}
}}
'''
    result = RULE.rewrite(parse_kernel(src), "L0", {}, RuleContext())
    assert isinstance(result, NotApplicable) and reason in result.reason, result


def test_a_buffer_read_elsewhere_is_refused():
    src = HEAD + '''  for L0 i: i32 = 0; i < n; i = i + 1 {
    atomic.add(out[1], x[i])
  }
  out[0] = out[1]
}
'''
    result = RULE.rewrite(parse_kernel(src), "L0", {}, RuleContext())
    assert isinstance(result, NotApplicable) and "read or written directly" in result.reason


def test_sweep_never_changes_results():
    """No example has an atomic inside a loop as written (reduce's add follows its tree loop:
    the coarsened tests above are where the rule applies); whatever it is offered on the
    examples must not change results."""
    counts, bad = sweep_summary([RULE])
    assert not bad, bad
    assert set(counts) <= {"same", "not-applicable"}, counts
