"""grid-stride-reduce: the reduce example and two differently-written reductions (a
CUDA-by-example dot product with a while-loop tree, an inference-engine row sum of squares
with shuffle macros and a 2-D grid) keep their results at other sizes than they were
rewritten for, on the interpreter and on both emulated targets; refusals; the hint."""

import dataclasses
from pathlib import Path

import pytest
from loop_sizes import EXAMPLES, same_outputs

from kir.backends import TARGETS
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.ir import Atomic, For
from kir.ir.parser import parse_kernel
from kir.rules import NotApplicable, RuleContext, apply_trace, context_for, parse_step
from kir.rewrites.parallel.grid_stride_reduce import RULES

RULE = RULES[0]
DATA = Path(__file__).parent / "data"
REGISTRY = load_registry(plugins=False)

# (kernel file, the sizes it is rewritten at, other sizes it must stay right at)
KERNELS = [
    (EXAMPLES / "reduce.cu", {"n": 100000}, [{"n": 777}, {"n": 1}, {"n": 250001}]),
    (DATA / "dot_while_tree.cu", {"N": 30000}, [{"N": 1234}, {"N": 70001}]),
    (DATA / "sum_shfl_warps.cu", {"rows": 2, "cols": 20000},
     [{"rows": 3, "cols": 777}, {"rows": 1, "cols": 41000}]),
]


def _rewritten(path: Path, sizes: dict, steps: list[str]):
    loaded = load_kernel(path, sizes=sizes)
    ctx = context_for(loaded, TARGETS["cuda"])
    trace = [parse_step(s, REGISTRY) for s in steps]
    return loaded, apply_trace(loaded.kernel, trace, REGISTRY, ctx, strict=True).kernel


@pytest.mark.parametrize("path,sizes,others", KERNELS, ids=lambda v: getattr(v, "stem", ""))
@pytest.mark.parametrize("blocks", [8, 32])
def test_results_unchanged_at_other_sizes(path, sizes, others, blocks):
    """The old block count is computed at run time from the kernel's size parameter, so the
    kernel rewritten at one size is right at smaller, ragged and larger ones."""
    loaded, out = _rewritten(path, sizes, [f"grid-stride-reduce{{dim=x,blocks={blocks}}}"])
    assert not out.launch.specialized
    assert out.launch.grid[0].startswith(f"min({blocks}, ")
    loops = [n for n in out.body.stmts if isinstance(n, For)]
    assert loops and loops[0].var.startswith("block_x")  # the first phase became the loop
    assert not any(isinstance(n, Atomic) for n in loops[0].walk())  # no add inside it
    for other in [sizes, *others]:
        sized = load_kernel(path, sizes=other)
        inputs = sized.bound.make_inputs(1)
        assert same_outputs(sized.kernel, out, inputs, sized.bound.sizes), other


def test_unrolled_cascade_is_right_on_both_emulated_targets():
    """The hint's two steps (the cascade loop unrolled by 8) through emitted CUDA and Metal
    on the CPU emulator, against the interpreter, at the rewrite's sizes and ragged ones."""
    from kir.backends.emulate import emulator_available

    from kir.driver.runners import check_on_target

    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    for path, sizes, others in KERNELS:
        _, out = _rewritten(path, sizes, ["grid-stride-reduce{dim=x,blocks=8}"])
        label = next(n.label for n in out.body.stmts if isinstance(n, For))
        _, out = _rewritten(path, sizes, ["grid-stride-reduce{dim=x,blocks=8}",
                                          f"unroll-loop{{loop={label},factor=8}}"])
        for at in (sizes, others[0]):
            sized = load_kernel(path, sizes=at)
            for target in ("emulate-cuda", "emulate-metal"):
                outcome = check_on_target(dataclasses.replace(sized, kernel=out), target)
                assert outcome.result.ok, (path.name, at, target, outcome.result.describe())


def test_too_few_blocks_is_refused():
    loaded = load_kernel(EXAMPLES / "reduce.cu", sizes={"n": 5000})  # 10 blocks
    result = RULE.rewrite(loaded.kernel, "x", {"blocks": 32},
                          context_for(loaded, TARGETS["cuda"]))
    assert isinstance(result, NotApplicable) and "not more than 32" in result.reason


HEAD = '''kernel @k(x: f32* global const, out: f32* global)
    grid=("64", "1", "1") block=(32, 1, 1) shared_bytes=0 {
  let v: f32 = x[block.x * 32_u32 + thread.x]
'''


@pytest.mark.parametrize("tail,reason", [
    # the running value starts at one: C(v) is affine, once per block instead of per former
    ("  let acc: f32 = 1.0\n  acc = acc + reduce.sum(v)\n  atomic.add(out[0], acc)\n",
     "other than zero"),
    ("  let s: f32 = reduce.sum(v) + 1.0\n  atomic.add(out[0], s)\n", "not a sum or scaling"),
    ("  let s: f32 = reduce.sum(v)\n  atomic.add(out[0], s * s)\n", "not a sum or scaling"),
    ("  let s: f32 = reduce.sum(v)\n  let old: f32 = 0.0\n  old = atomic.add(out[0], s)\n",
     "old value is used"),
    ("  let s: f32 = reduce.sum(v)\n  out[thread.x] = s\n  atomic.add(out[0], s)\n",
     "stores to global out"),
    ("  let s: f32 = reduce.sum(v)\n  atomic.add(out[0], s)\n  let y: f32 = out[1]\n",
     "reads out, which the kernel writes"),
    ("  let s: f32 = reduce.sum(v)\n  atomic.add(out[u32(s)], 1.0)\n",
     "the index of an atomic on out depends on the reduced value"),
])
def test_nonlinear_combines_are_refused(tail, reason):
    kernel = parse_kernel(HEAD + tail + "}\n")
    result = RULE.rewrite(kernel, "x", {"blocks": 8}, RuleContext())
    assert isinstance(result, NotApplicable) and reason in result.reason, result


def test_a_running_value_declared_before_the_combine_must_start_at_zero():
    """A value declared in the first phase (hoisted before the loop) and given a reduced
    value by the combine adds its start once per block: refused unless it starts at zero."""
    src = HEAD + '''  let acc: f32 = START
  let s: f32 = reduce.sum(v)
  acc = acc + s
  atomic.add(out[0], acc)
}
'''
    one = RULE.rewrite(parse_kernel(src.replace("START", "1.0")), "x", {"blocks": 8},
                       RuleContext())
    assert isinstance(one, NotApplicable) and "other than zero" in one.reason
    zero = RULE.rewrite(parse_kernel(src.replace("START", "0.0")), "x", {"blocks": 8},
                        RuleContext())
    assert not isinstance(zero, NotApplicable), zero
    import numpy as np

    args = {"x": np.arange(64 * 32, dtype=np.float32) % 7, "out": np.zeros(1, np.float32)}
    assert same_outputs(parse_kernel(src.replace("START", "0.0")), zero, args)


@pytest.mark.parametrize("path,sizes", [(p, s) for p, s, _ in KERNELS],
                         ids=lambda v: getattr(v, "stem", ""))
def test_the_hint_builds_the_cascade_on_each_style(path, sizes):
    from kir.search.hints import hints

    loaded = load_kernel(path, sizes=sizes)
    found = {h.name: [str(s) for s in h.steps]
             for h in hints(loaded.kernel, REGISTRY, context_for(loaded, TARGETS["cuda"]))}
    steps = found.get("grid-stride-reduction-32")
    assert steps and steps[0] == "grid-stride-reduce{dim=x,blocks=32}", found


# ------------------------------------------------------------------ random combine phases

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# Steps of a block combine, each reading the previous value ``{a}`` into ``{b}``: linear ones
# (the rule may apply) and ones that are not (it must refuse, or results would change).
LINEAR = [
    "let {b}: f32 = {a} + shuffle.down({a}, 16)",
    "let {b}: f32 = {a} - shuffle.xor({a}, 1)",
    "let {b}: f32 = reduce.sum({a})",
    "let {b}: f32 = {a} * 0.5",
    "let {b}: f32 = select(thread.x < 8_u32, {a}, 0.0)",
    "s[thread.x] = {a}\n  barrier block\n  let {b}: f32 = s[thread.x] + s[(thread.x + 1_u32) % 32_u32]"
    "\n  barrier block",
]
NONLINEAR = [
    "let {b}: f32 = reduce.max({a})",
    "let {b}: f32 = {a} + 1.0",
    "let {b}: f32 = {a} * {a}",
    "let {b}: f32 = select({a} > 0.0, {a}, 0.0)",
    "let {b}: f32 = abs({a})",
]


def _random_reduction(blocks: int, steps: list[str], everyone: bool) -> str:
    body = [step.format(a=f"w{k}", b=f"w{k + 1}") for k, step in enumerate(steps)]
    add = f"atomic.add(out[0], w{len(steps)})"
    tail = f"  {add}\n" if everyone else f"  if thread.x == 0_u32 {{\n    {add}\n  }}\n"
    return (f'kernel @r(x: f32* global const, out: f32* global, n: i32)\n'
            f'    grid=("{blocks}", "1", "1") block=(32, 1, 1) shared_bytes=0 {{\n'
            "  shared s: f32[32]\n"
            "  let i: u32 = block.x * 32_u32 + thread.x\n"
            "  let w0: f32 = 0.0\n"
            "  if i < u32(n) {\n    w0 = x[i] * 2.0 - 3.0\n  }\n"
            + "".join(f"  {line}\n" for line in body) + tail + "}\n")


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(old=st.integers(9, 70), blocks=st.sampled_from([8, 16, 32]),
       steps=st.lists(st.sampled_from(LINEAR + NONLINEAR), min_size=1, max_size=3),
       everyone=st.booleans(), short=st.integers(0, 40))
def test_random_combines_are_rewritten_only_when_results_stay(old, blocks, steps, everyone,
                                                              short):
    """Random first phases and block combines: where the rule applies, the kernel computes
    what it did (exactly: small integers, sums of them, halves); a combine with a step that
    is not linear at or after the first step that exchanges values between threads is
    refused (before it, a step is each thread's own work, summed per former block: fine)."""
    import numpy as np

    kernel = parse_kernel(_random_reduction(old, steps, everyone))
    out = RULE.rewrite(kernel, "x", {"blocks": blocks}, RuleContext(sizes={}))
    exchanges = [any(mark in step for mark in ("shuffle", "reduce.", "s[")) for step in steps]
    first = exchanges.index(True) if True in exchanges else len(steps)
    if any(step in NONLINEAR for step in steps[first:]):
        assert isinstance(out, NotApplicable), steps
        return
    if isinstance(out, NotApplicable):
        return  # a linear combine the analysis does not recognise: refused, still sound
    n = old * 32 - short
    rng = np.random.default_rng(old * 1000 + short)
    args = {"x": rng.integers(-4, 5, size=old * 32).astype(np.float32),
            "out": np.array([1.0], np.float32), "n": n}
    assert same_outputs(kernel, out, args), steps
