"""Issue 10's hangs (H1-H6): every piece a user hands kir runs under a bound, and running
past it is a located error (or, in a search, that candidate's verdict), never a hang.
Each test hung (or ran for minutes) on main before its fix; the commands run in a child
process with a wall-clock limit, so a regression fails the test instead of hanging it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kir.errors import KirError
from kir.frontends.cuda import load_cuda
from kir.spec.sizeexpr import eval_size_expr

from .cli import EXAMPLES, SCALE_SPEC, example_copy, kir, no_traceback, scale_kernel

# ----------------------------------------------------------------- H1: size expressions


@pytest.mark.parametrize("where,old", [
    ("value", 'value = "N"'),
    ("grid", '"ceil(N / 128)"'),
    ("shape", 'shape = ["N"] }'),
])
def test_h1_a_huge_power_in_a_spec_is_a_located_error(tmp_path, where, old):
    new = {"value": 'value = "10 ** 10 ** 10"', "grid": '"10 ** 10 ** 10"',
           "shape": 'shape = ["10 ** 10 ** 10"] }'}[where]
    source = scale_kernel(tmp_path, spec=SCALE_SPEC.replace(old, new, 1))
    ran = kir("run", source, timeout=60)
    assert ran.code == 2, ran.text
    assert "scale.kir.toml:" in ran.err and "too large" in ran.err, ran.err
    no_traceback(ran)


def test_h1_a_huge_power_in_an_ir_launch_is_located_at_the_launch(tmp_path):
    source = scale_kernel(tmp_path)
    dump = kir("parse", source).out.replace('grid=("ceil(N / 128)"', 'grid=("10 ** 10 ** 10"')
    (tmp_path / "big.kir").write_text(dump)
    ran = kir("run", tmp_path / "big.kir", "--spec", tmp_path / "scale.kir.toml", timeout=60)
    assert ran.code == 2 and "big.kir:3:" in ran.err and "too large" in ran.err, ran.text
    no_traceback(ran)


@pytest.mark.parametrize("text", ["10 ** 10 ** 10", "2 ** 300", "(2 ** 200) * 2 ** 100",
                                  "9" * 100, "max(2 ** 250, 1) ** 2"])
def test_h1_no_intermediate_value_grows_past_the_bound(text):
    start = time.monotonic()
    with pytest.raises(KirError, match="too large"):
        eval_size_expr(text, {})
    assert time.monotonic() - start < 1


# ------------------------------------------------------------ H2: a reference that spins

SPIN = """def scale(args, sizes):
    total = 0
    while True:
        total += 1
"""


def test_h2_kir_run_stops_a_reference_that_never_returns(tmp_path):
    source = scale_kernel(tmp_path, reference=SPIN)
    ran = kir("run", source, "--limit", "reference_s=1", timeout=60)
    assert ran.code == 2, ran.text
    # 1 s of CPU time, or on a machine too busy to give it that, the 6 s wall backstop
    assert "did not return within 1 s of CPU time" in ran.err \
        or "did not return within 6 s" in ran.err, ran.err
    assert "refs.py:3:" in ran.err or "refs.py:4:" in ran.err, ran.err  # the user's own line
    assert "reference_s" in ran.err  # how to raise it
    no_traceback(ran)


def test_h2_the_search_stops_a_reference_that_never_returns(tmp_path):
    source = scale_kernel(tmp_path, reference=SPIN)
    ran = kir("compile", source, "--search", "--target", "model", "--budget", "3",
              "--limit", "reference_s=1", "--db", tmp_path / "t.db", "--out-dir",
              tmp_path / "out", "-q", timeout=90)
    assert ran.code == 2 and "did not return within" in ran.err, ran.text
    no_traceback(ran)


def test_h2_a_reference_that_swallows_the_interruption_is_still_stopped(tmp_path):
    """A retry loop with a bare except catches the first interruption; the next one is
    raised inside its own handler. It sleeps (no CPU time): the wall-clock backstop, six
    times the CPU limit, stops it."""
    swallow = ("import time\n\ndef scale(args, sizes):\n    while True:\n        try:\n"
               "            time.sleep(100)\n        except BaseException:\n            pass\n")
    source = scale_kernel(tmp_path, reference=swallow)
    ran = kir("run", source, "--limit", "reference_s=1", timeout=60)
    assert ran.code == 2 and "did not return within 6 s" in ran.err, ran.text
    no_traceback(ran)


# --------------------------------------------------- H3: deep loop nests in the analysis

def _deep_nest(depth: int) -> str:
    """A kernel of ``depth`` nested loops whose trip counts the analysis cannot know (one
    trip each at run time), so each adds three directions to every dependence vector."""
    lines = ["__global__ void nest(const float* x, float* y, int n) {",
             "  int i = blockIdx.x * blockDim.x + threadIdx.x;",
             "  int t = 1 + (int)(x[0] * 0.0f);", "  float acc = 0.0f;"]
    lines += [f"  for (int j{k} = 0; j{k} < t; j{k}++) {{" for k in range(depth)]
    lines += ["    acc += x[i];"] + ["  }"] * depth + ["  if (i < n) y[i] = acc;", "}"]
    return "\n".join(lines) + "\n"


def test_h3_a_deep_nests_dependence_test_is_refused_quickly():
    from kir.analysis.deps import dependence_graph
    from kir.errors import AnalysisLimitError

    kernel = load_cuda(_deep_nest(20), "nest.cu")
    start = time.monotonic()
    with pytest.raises(AnalysisLimitError, match="direction tests"):
        dependence_graph(kernel, "L0")
    assert time.monotonic() - start < 10


def test_h3_interchange_refuses_a_20_deep_nest_with_its_reason(tmp_path):
    source = scale_kernel(tmp_path, source=_deep_nest(20))
    (tmp_path / "nest.cu").write_text(source.read_text())
    (tmp_path / "nest.kir.toml").write_text(SCALE_SPEC.replace("REFERENCE", ""))
    ran = kir("apply", tmp_path / "nest.cu", "--step", "interchange-loops{loop=L0}",
              timeout=60)
    assert ran.code == 2 and "direction tests" in ran.err and "not analysed" in ran.err, ran.text
    no_traceback(ran)


def test_h3_a_search_over_a_20_deep_nest_ends(tmp_path):
    (tmp_path / "nest.cu").write_text(_deep_nest(20))
    (tmp_path / "nest.kir.toml").write_text(SCALE_SPEC.replace("REFERENCE", ""))
    ran = kir("compile", tmp_path / "nest.cu", "--search", "--target", "model", "--budget",
              "4", "--strategy", "greedy", "--db", tmp_path / "t.db", "--out-dir",
              tmp_path / "out", "-q", timeout=240)
    assert ran.code == 0 and "best:" in ran.out, ran.text
    no_traceback(ran)


# ------------------------------------------------------------- H4: a rule that loops

LOOPING_RULE = '''"""A user rule whose apply never returns."""
from kir.ir import For
from kir.rules import BaseRule


class Spin(BaseRule):
    """Loop forever."""

    name = "spin-forever"

    def candidates(self, kernel):
        return [n.label for n in kernel.body.walk() if isinstance(n, For)]

    def apply(self, kernel, match, params, ctx):
        while True:
            pass


RULES = [Spin()]
'''


# The same rule looping where every search meets it: listing its sites (which candidates a
# search tries depends on its random choices; listing sites happens before any of them).
LOOPING_SITES_RULE = LOOPING_RULE.replace(
    "        return [n.label for n in kernel.body.walk() if isinstance(n, For)]",
    "        while True:\n            pass")


def _looping_rule(folder: Path, text: str = LOOPING_RULE) -> Path:
    path = folder / "spin_rule.py"
    path.write_text(text)
    return path


def test_h4_kir_apply_stops_a_rule_that_loops(tmp_path):
    rules = _looping_rule(tmp_path)
    ran = kir("apply", EXAMPLES / "softmax.cu", "--rules", rules, "--step",
              "spin-forever{loop=L1}", "--limit", "rule_s=1", timeout=60)
    assert ran.code == 2, ran.text
    assert ("spin_rule.py:15:" in ran.err or "spin_rule.py:16:" in ran.err) \
        and ("did not finish within 1 s" in ran.err or "did not finish within 6 s" in ran.err), \
        ran.err  # at the rule's own loop; CPU time, or on a busy machine the wall backstop
    assert "spin-forever" in ran.err
    no_traceback(ran)


def test_h4_kir_rules_test_counts_a_looping_rule_and_goes_on(tmp_path):
    rules = _looping_rule(tmp_path)
    examples = tmp_path / "examples"
    example_copy(examples, "reduce")
    ran = kir("rules", "test", rules, "--examples", examples, "--limit", "rule_s=1",
              timeout=60)
    assert ran.code == 1, ran.text
    assert "1 errors" in ran.out and "not tried further" in ran.out, ran.out
    no_traceback(ran)


def test_h4_the_search_stops_a_looping_rule_and_goes_on(tmp_path):
    rules = _looping_rule(tmp_path, LOOPING_SITES_RULE)
    assert rules.read_text() != LOOPING_RULE
    ran = kir("compile", EXAMPLES / "softmax.cu", "--search", "--target", "model", "--size",
              "rows=4", "--size", "cols=64", "--budget", "10", "--strategy", "greedy",
              "--rules", rules, "--limit", "rule_s=1", "--db", tmp_path / "t.db",
              "--out-dir", tmp_path / "out", "-q", timeout=180)
    assert ran.code == 0 and "best:" in ran.out, ran.text
    assert "rule spin-forever failed" in ran.err and "timed out" in ran.err, ran.err
    assert (tmp_path / "out" / "best.kir").exists()
    no_traceback(ran)


# ------------------------------------------------------------- H5: IR size per step

def test_h5_a_trace_that_doubles_the_ir_is_refused_at_the_cap(tmp_path):
    loop = ("__global__ void loop(const float* x, float* y, int n) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    float acc = 0.0f;\n"
            "    for (int k = 0; k < 1000000; k++) {\n        acc += x[(i + k) % n];\n    }\n"
            "    if (i < n) y[i] = acc;\n}\n")
    (tmp_path / "loop.cu").write_text(loop)
    (tmp_path / "loop.kir.toml").write_text(SCALE_SPEC.replace("REFERENCE", ""))
    steps = [arg for _ in range(40) for arg in ("--step", "unroll-loop{loop=L0,factor=2}")]
    ran = kir("apply", tmp_path / "loop.cu", *steps, "--limit", "ir_nodes=5000", timeout=120)
    assert ran.code == 2 and "more than 5000 IR nodes" in ran.err, ran.text
    no_traceback(ran)


# ------------------------------------------------------ H6: an endless loop in a .kir

def test_h6_an_endless_kir_loop_stops_at_the_time_limit(tmp_path):
    source = scale_kernel(tmp_path)
    dump = kir("parse", source).out
    endless = dump.replace("  if i < n {", "  for L9 k: i32 = 0; k < 1; k = k + 0 {\n  }\n"
                                            "  if i < n {", 1)
    assert endless != dump
    (tmp_path / "spin.kir").write_text(endless)
    ran = kir("run", tmp_path / "spin.kir", "--limit", "interp_s=2", timeout=60)
    assert ran.code == 2, ran.text
    assert "did not finish within 2 s of CPU time on the interpreter" in ran.err, ran.err
    assert "spin.kir:" in ran.err and "interp_s" in ran.err, ran.err
    assert ran.seconds < 30
    no_traceback(ran)
