"""`kir compile --search`, `kir db`, `kir emit`, hints and the report, end to end on the CPU.

The search times with the Apple-GPU cost model (``--target model``). Where the model evaluator
is not in this build, a small stand-in (interpreter validation + a size-of-IR cost) takes its
place through ``compile_search.make_evaluator``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from kir.backends import TARGETS

from kir.commands import compile_search
from kir.commands.main import main
from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.ir import Call, Kernel
from kir.ir.printer import print_kernel
from kir.rules import RuleContext, context_for
from kir.search import Evaluation, TuningDB
from kir.search.hints import attention_nest, hints, matmul_nest, recurrence_loops

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BROKEN = Path(__file__).parent / "data" / "broken_rule.py"
SIZES = ["--size", "rows=4", "--size", "cols=96"]


class StandInEvaluator:
    """Validate on the interpreter against the spec's reference; time = IR size, with slow
    (non-fast) math calls costing extra, so rules move the time deterministically."""

    modelled = True
    target = "model:test"
    device = "cpu"

    def __init__(self, loaded) -> None:
        self.loaded = loaded

    def evaluate(self, kernel: Kernel) -> Evaluation:
        from kir.driver.runners import check_on_target

        outcome = check_on_target(dataclasses.replace(self.loaded, kernel=kernel), "interp")
        if not outcome.result.ok:
            return Evaluation.rejected("invalid", "outputs differ from the reference")
        text = print_kernel(kernel, locations=False)
        slow = sum(1 for n in kernel.walk() if isinstance(n, Call) and not n.fast)
        return Evaluation.timed(0.001 * len(text) + 0.05 * slow)


@pytest.fixture(autouse=True)
def evaluator(monkeypatch):
    try:
        import kir.measure.model  # noqa: F401
    except ImportError:
        monkeypatch.setattr(compile_search, "make_evaluator",
                            lambda loaded, target: StandInEvaluator(loaded))


def search(tmp_path: Path, *extra: str, example: str = "softmax.cu") -> tuple[int, str]:
    argv = ["compile", str(EXAMPLES / example), "--search", "--target", "model", *SIZES,
            "--budget", "12", "--seed", "1", "--db", str(tmp_path / "tmp.db"),
            "--out-dir", str(tmp_path / "out"), "--report", str(tmp_path / "rep"), *extra]
    return main(argv), ""


def test_search_writes_module_trace_ir_and_report(tmp_path, capsys):
    code, _ = search(tmp_path)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "best:" in out.out and "(modelled at rows=4, cols=96)" in out.out
    assert "modelled" in out.err  # the progress lines say so too
    files = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"softmax_kir.py", "best.trace.json", "best.kir"} <= files
    module = (tmp_path / "out" / "softmax_kir.py").read_text()
    assert "TARGET = 'metal'" in module and "def softmax_rows(" in module
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "## Transfer table" in report and "## Rules tried and rejected" in report
    assert "(modelled at rows=4, cols=96)" in report
    assert "![best-so-far time against evaluations](progress.svg)" in report
    svg = (tmp_path / "rep" / "progress.svg").read_text()
    assert svg.startswith("<svg") and "best so far" in svg and "<path d=\"M" in svg
    assert (tmp_path / "rep" / "progress.csv").exists()
    trace = json.loads((tmp_path / "out" / "best.trace.json").read_text())
    for step in trace["steps"]:  # every winning step is in the report with a diff
        assert "### Step" in report and step in report


def test_search_says_where_its_time_went(tmp_path, capsys):
    code, _ = search(tmp_path, "--budget", "4")
    out = capsys.readouterr()
    assert code == 0, out.err
    lines = [line for line in out.err.splitlines() if line.startswith("time: ")]
    assert len(lines) == 1, out.err
    assert re.fullmatch(r"time: [0-9.]+ s wall, search process [0-9.]+ s CPU; "
                        r"apply [0-9.]+ s, database [0-9.]+ s, "
                        r"validate \+ model \(interpreter\) [0-9.]+ s; 4 evaluations, "
                        r"[0-9.]+/s", lines[0]), lines[0]
    report = (tmp_path / "rep" / "report.md").read_text()
    table = report.split("## Where the time went", 1)[1].split("\n## ", 1)[0]
    for row in ("| wall clock |", "| search process (CPU) |", "| apply |", "| database |",
                "| validate + model (interpreter) |", "| evaluations | 4 |"):
        assert row in table, table
    trace = json.loads((tmp_path / "out" / "best.trace.json").read_text())
    assert trace["phases"]["counts"] == {"evaluations": 4}
    assert set(trace["phases"]["seconds"]) == {"apply", "database",
                                               "validate + model (interpreter)"}
    assert trace["phases"]["seconds"]["validate + model (interpreter)"] > 0
    assert trace["phases"]["process_cpu_s"] > 0
    assert 0 < trace["wall_s"]


def test_second_run_is_answered_by_the_db(tmp_path, capsys):
    assert search(tmp_path)[0] == 0
    first = capsys.readouterr().out
    with TuningDB(tmp_path / "tmp.db") as db:
        rows_before = sum(info.count for info in db.runs())
    assert search(tmp_path)[0] == 0
    second = capsys.readouterr().out
    with TuningDB(tmp_path / "tmp.db") as db:
        rows_after = sum(info.count for info in db.runs())
    assert rows_after == rows_before  # no new evaluation, ablation included
    total = re.search(r"(\d+) evaluations \((\d+) from the tuning database\)", second)
    assert total and total.group(1) == total.group(2)
    best = re.compile(r"best: ([0-9.e+-]+) ms")
    assert best.search(first).group(1) == best.search(second).group(1)


def test_trace_replays_to_best_kir(tmp_path, capsys):
    assert search(tmp_path)[0] == 0
    capsys.readouterr()
    out = tmp_path / "out"
    steps = json.loads((out / "best.trace.json").read_text())["steps"]
    replay = tmp_path / "replay.kir"
    if steps:
        code = main(["apply", str(EXAMPLES / "softmax.cu"), *SIZES, "--trace",
                     str(out / "best.trace.json"), "-o", str(replay)])
        assert code == 0
        assert replay.read_text() == (out / "best.kir").read_text()
    else:  # nothing won: best.kir is the input kernel
        loaded = load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 4, "cols": 96})
        assert print_kernel(loaded.kernel) == (out / "best.kir").read_text()


def test_db_list_show_export(tmp_path, capsys):
    assert search(tmp_path)[0] == 0
    capsys.readouterr()
    db = str(tmp_path / "tmp.db")
    assert main(["db", "list", "--db", db]) == 0
    listing = capsys.readouterr().out
    assert "softmax_rows" in listing and "1 keys" in listing
    assert main(["db", "show", "1", "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "(unrewritten)" in shown and "valid" in shown
    assert main(["db", "export", "--db", db, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["kernel"] for r in rows} == {"softmax_rows"}
    assert main(["db", "export", "--db", db, "--format", "csv"]) == 0
    csv_text = capsys.readouterr().out
    records = list(csv.reader(io.StringIO(csv_text)))  # error texts may hold newlines
    assert records[0][:2] == ["kernel", "kernel_fp"]
    assert len(records) == len(rows) + 1
    assert main(["db", "show", "nosuchkernel", "--db", db]) == 2


def test_planted_broken_rule_never_wins(tmp_path, capsys):
    code, _ = search(tmp_path, "--rules", str(BROKEN), "--strategy", "greedy",
                     "--budget", "30")
    out = capsys.readouterr()
    assert code == 0, out.err
    trace = json.loads((tmp_path / "out" / "best.trace.json").read_text())
    assert not any(s.startswith("drop-stores") for s in trace["steps"])
    with TuningDB(tmp_path / "tmp.db") as db:
        key = db.runs()[0].key
        tried = [r for r in db.rows(key) if any(g.startswith("drop-stores") for g in r.genome)]
    assert tried and all(r.evaluation.status != "ok" for r in tried)  # tried, and rejected
    report = (tmp_path / "rep" / "report.md").read_text()
    assert re.search(r"\| drop-stores \| \d+ \|", report)


@pytest.mark.parametrize("target,marker", [("metal", "thread_position_in_threadgroup"),
                                           ("cuda", "threadIdx")])
def test_emit_prints_source_and_launch(target, marker, capsys):
    assert main(["emit", str(EXAMPLES / "softmax.cu"), "--target", target]) == 0
    text = capsys.readouterr().out
    assert f"mx.fast.{target}_kernel" in text and "threadgroup = (256, 1, 1)" in text
    assert "outputs: y: f32[64, 1000]" in text and marker in text


def test_plain_compile_writes_module_and_metal(tmp_path, capsys):
    module, metal = tmp_path / "sm.py", tmp_path / "sm.metal"
    args = ["compile", "-q", str(EXAMPLES / "softmax.cu"), *SIZES]
    assert main([*args, "-o", str(module)]) == 0
    assert main([*args, "-o", str(metal)]) == 0
    assert "def softmax_rows(" in module.read_text()
    assert "[[kernel]]" in metal.read_text() or "kernel void" in metal.read_text()
    assert main([*args, "-o", str(tmp_path / "x.txt")]) == 2


def test_duration_parsing():
    assert compile_search.parse_duration("5m") == 300
    assert compile_search.parse_duration("1m30s") == 90
    assert compile_search.parse_duration("45") == 45
    for bad in ("", "soon", "0s"):
        with pytest.raises(Exception):
            compile_search.parse_duration(bad)


# ------------------------------------------------------------------------------- hints


def _ctx(loaded) -> RuleContext:
    return context_for(loaded, TARGETS["metal"])


def test_hint_detectors_see_the_shapes():
    fa = load_kernel(EXAMPLES / "flash_attn.cu").kernel
    assert attention_nest(fa) == ("L0", "L2")
    assert matmul_nest(load_kernel(EXAMPLES / "sgemm.cu").kernel) == ("L0", "L1")
    assert recurrence_loops(load_kernel(EXAMPLES / "selective_scan.cu").kernel) == ["L0"]
    assert matmul_nest(load_kernel(EXAMPLES / "softmax.cu").kernel) is None


@pytest.mark.parametrize("path", [EXAMPLES / "flash_attn.cu",
                                  EXAMPLES.parent / "tests/rules/data/flash_attn_rows.cu"])
def test_attention_hints_specialize_the_inner_loop_bounds(path):
    """Both loop orders of FlashAttention get the warps recipe with the scalars bounding the
    nest's inner loops (the head size d, the key tile Bc) made constants first, once with
    the score row in registers and once without."""
    loaded = load_kernel(path, sizes={"B": 1, "H": 2, "N": 64, "D": 64, "T": 32})
    found = {h.name: h for h in hints(loaded.kernel, load_registry(), context_for(
        loaded, TARGETS["cuda"]))}
    full, shared = (found["flash-attention-2-warps-constant"],
                    found["flash-attention-2-warps-constant-shared-scores"])
    for hint in (full, shared):
        constants = {s.site for s in hint.steps if s.rule == "specialize-param"}
        assert {"d", "Bc"} <= constants and not constants & {"N", "softmax_scale"}
    promoted = [{s.site for s in h.steps if s.rule == "promote-to-registers"}
                for h in (full, shared)]
    assert promoted[0] - promoted[1] == {"sram_S"}


def test_hints_are_real_steps_and_skip_missing_rules():
    loaded = load_kernel(EXAMPLES / "softmax.cu", sizes={"rows": 4, "cols": 96})
    registry = load_registry()
    found = hints(loaded.kernel, registry, _ctx(loaded))
    assert found, "softmax should get at least the warp-reduce / fast-math hints"
    from kir.rules import apply_trace

    for hint in found:  # every step applies, in order, strictly
        apply_trace(loaded.kernel, hint.steps, registry, _ctx(loaded), strict=True)
    if "warp-reduce" in registry:
        assert any(s.rule == "warp-reduce" for h in found for s in h.steps)
    few = {name: registry[name] for name in registry if name not in ("warp-reduce",
                                                                     "fast-math")}
    for hint in hints(loaded.kernel, few, _ctx(loaded)):
        assert all(s.rule in few for s in hint.steps)
    assert hints(loaded.kernel, {}, _ctx(loaded)) == []


# ------------------------------------------------------------------ progress and verdicts


def test_progress_bar_tty_and_plain():
    import io

    from kir.commands.progress import ProgressBar
    from kir.search import Progress

    tty, plain, narrow = io.StringIO(), io.StringIO(), io.StringIO()
    clock = [0.0]
    bars = [ProgressBar(modelled=True, stream=tty, tty=True, columns=200,
                        now=lambda: clock[0]),
            ProgressBar(modelled=False, stream=plain, tty=False),
            ProgressBar(modelled=True, stream=narrow, tty=True, columns=80)]
    for n in range(1, 21):
        clock[0] = 3.0 * n  # 3 s per evaluation
        for bar in bars:
            bar(Progress(n, n - 1, 1, 0.5, 1.0, 20, 0))
    for bar in bars:
        bar.close()
    assert tty.getvalue().count("\r") == 20 and "(modelled)" in tty.getvalue()
    assert " x2" in tty.getvalue()
    # elapsed and an estimate of what is left: after 10 of 20 evaluations, 30 s each way
    assert "0:30 ~0:30 left  10/20 evals" in tty.getvalue()
    lines = plain.getvalue().splitlines()
    assert len(lines) == 11 and "\r" not in plain.getvalue()  # the first, then every tenth
    assert "20/20 evals" in lines[-1] and "modelled" not in lines[-1]
    # cut to the terminal's width, so a redraw never wraps and smears
    drawn = narrow.getvalue().replace("\x1b[K", "").rstrip("\n").split("\r")
    assert all(len(line) <= 79 for line in drawn)


def test_progress_bar_fills_with_the_time_limit():
    import io

    from kir.commands.progress import UNBOUNDED, ProgressBar
    from kir.search import Progress

    stream = io.StringIO()
    clock = [0.0]
    bar = ProgressBar(modelled=False, stream=stream, tty=True, columns=200,
                      time_limit_s=60, now=lambda: clock[0])
    clock[0] = 30.0
    bar(Progress(5, 5, 0, 0.5, 1.0, UNBOUNDED, 0))
    assert "[########--------]" in stream.getvalue() and "~0:30 left" in stream.getvalue()


def test_ablation_verdicts():
    from kir.report.ablation import verdict

    assert verdict(1.5, "ok") == "paid off"
    assert verdict(1.01, "ok") == "neutral (<2%)"
    assert verdict(0.9, "ok") == "hurt"
    assert verdict(None, "invalid") == "needed (without it: invalid)"


SMALL = {"flash_attn": {"H": 1, "N": 64}, "softmax": {}, "layernorm": {}, "sgemm": {},
         "reduce": {}, "selective_scan": {}}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_hint_of_every_example_is_a_valid_kernel(name):
    """The hints are the search's first candidates: each must apply strictly and compute what
    the unrewritten kernel computes (default and ragged sizes, two seeds)."""
    from kir.measure.model import ModelEvaluator
    from kir.rules import apply_trace

    loaded = load_kernel(EXAMPLES / f"{name}.cu", sizes=SMALL[name])
    registry = load_registry()
    found = hints(loaded.kernel, registry, _ctx(loaded))
    assert found
    with ModelEvaluator(loaded, workers=1) as evaluator:
        for hint in found:
            kernel = apply_trace(loaded.kernel, hint.steps, registry, _ctx(loaded),
                                 strict=True).kernel
            verdict = evaluator.evaluate(kernel)
            assert verdict.ok, f"{hint.name}: {verdict.status}: {verdict.error}"


def test_search_without_a_check_table_validates_at_derived_small_sizes(tmp_path, capsys):
    """`--size rows=8192 --size cols=8192` on a spec without a check table: candidates are
    validated at small sizes derived from the spec's defaults (said on stderr), not on the
    interpreter at 8192 x 8192 (issue 14: 5 evaluations in 68 s)."""
    import time

    started = time.monotonic()
    code = main(["compile", str(EXAMPLES / "softmax.cu"), "--search", "--target", "model",
                 "--size", "rows=8192", "--size", "cols=8192", "--budget", "6", "-q",
                 "--db", str(tmp_path / "t.db"), "--out-dir", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "at rows=64, cols=1000 (derived from the spec's defaults" in out.err
    # ... and the model prices them at the compiled sizes, from counts at a few small ones.
    assert "modelled at the compiled sizes rows=8192, cols=8192: each candidate counted " \
        "at sizes such as rows=64, cols=1024 and 2 size(s) doubled" in out.err, out.err
    assert "(modelled at rows=8192, cols=8192)" in out.out
    assert time.monotonic() - started < 60


def test_derived_check_sizes_keep_structure_and_shrink_problem_sizes():
    from kir.spec import load_spec
    from kir.spec.shrink import check_sizes, small_sizes

    sgemm = load_spec(EXAMPLES / "sgemm.kir.toml")
    big = {**sgemm.sizes, "M": 2048, "N": 2048, "K": 2048, "TILE": 32}
    assert check_sizes(sgemm, big) == {"M": 128, "N": 96, "K": 64, "TILE": 32}
    softmax = load_spec(EXAMPLES / "softmax.kir.toml")
    assert small_sizes(softmax, {"rows": 8192, "cols": 8192}) == {"rows": 512, "cols": 512}


def test_derived_check_sizes_shrink_until_the_work_fits():
    """Buffer sizes do not say how much work a kernel does at them: a FlashAttention spec's
    defaults (4 heads of 256 queries: 65,536 elements a buffer, under the element cap) cost
    the unrewritten kernel 278,600 interpreter loop iterations, and every candidate was
    validated there (6.6 s each on the H200's host, 9 evaluations in a 60-s search). The
    derived sizes now also keep the unrewritten kernel within CHECK_STEPS iterations:
    queries halve to 64 (sizes above 64 first), the tile T (structural) stays. Candidates are
    validated at the spec's ragged sizes too (N=200 on top of them): the heads, which the
    ragged table leaves alone, halve until that run fits as well (at 4 heads it cost three
    times the check sizes: 10 evaluations in a 120-s search on the H200)."""
    from kir.api.searching import CHECK_STEPS, SearchRequest, SearchSession, _within_check_steps
    from kir.spec.shrink import shrink_until

    loaded = load_kernel(ROOT / "tests" / "rules" / "data" / "flash_attn_rows.cu",
                         sizes={"N": 1024, "H": 16})
    fits = _within_check_steps(loaded)
    assert not fits({"B": 1, "H": 4, "N": 256, "D": 64, "T": 32})
    assert shrink_until(loaded.spec, {"B": 1, "H": 4, "N": 256, "D": 64, "T": 32}, fits) \
        == {"B": 1, "H": 4, "N": 64, "D": 64, "T": 32}
    # the session says so, and a spec's own small defaults are left alone
    session = SearchSession.__new__(SearchSession)
    session.loaded = loaded
    request = SearchRequest(target="model")
    sizes, source = session.check_sizes_of(request)
    assert not fits({"B": 1, "H": 4, "N": 200, "D": 64, "T": 32})
    assert sizes == {"B": 1, "H": 1, "N": 64, "D": 64, "T": 32}
    assert "derived from the spec's defaults" in source
    layernorm = load_kernel(EXAMPLES / "layernorm.cu", sizes={"rows": 8192, "cols": 8192})
    assert _within_check_steps(layernorm)({"rows": 64, "cols": 512})
    assert CHECK_STEPS == 1 << 15


def test_shrink_until_halves_large_sizes_first_and_respects_the_spec():
    from kir.spec import load_spec
    from kir.spec.shrink import shrink_until

    spec = load_spec(EXAMPLES / "flash_attn.kir.toml")
    seen = []

    def fits(sizes):
        seen.append(dict(sizes))
        return sizes["N"] * sizes["H"] <= 32

    final = shrink_until(spec, {"B": 1, "H": 4, "N": 256, "D": 64, "T": 32}, fits)
    # N to the floor of 64 first, then the largest (N again, H, ...), T never (structural)
    assert [s["N"] for s in seen[:3]] == [256, 128, 64]
    assert final["T"] == 32 and final["N"] * final["H"] <= 32
    assert shrink_until(spec, {"B": 1, "H": 1, "N": 1, "D": 1, "T": 32},
                        lambda sizes: False)["T"] == 32  # nothing left to halve: it stops
    kept = shrink_until(spec, {"B": 1, "H": 4, "N": 256, "D": 64, "T": 32},
                        lambda sizes: sizes["H"] * sizes["D"] <= 64, keep={"N"})
    assert kept["N"] == 256 and kept["H"] * kept["D"] <= 64  # sizes in keep never halve


def test_no_db_searches_without_a_tuning_database(tmp_path, capsys, monkeypatch):
    """`--no-db` judges every candidate afresh and stores nothing (before it, `--db false`
    wrote a database file named `false`); with `--db` it is an error."""
    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path / "cache"))
    command = ["compile", str(EXAMPLES / "softmax.cu"), "--search", "--target", "model",
               "--budget", "3", "-q", "--out-dir", str(tmp_path / "out")]
    assert main([*command, "--no-db"]) == 0
    out = capsys.readouterr().out
    assert "tuning database: none" in out and "(0 from the tuning database)" in out
    assert not (tmp_path / "cache").exists()
    assert main([*command, "--no-db", "--db", str(tmp_path / "t.db")]) == 2
    assert "--db and --no-db together" in capsys.readouterr().err
    assert not (tmp_path / "t.db").exists()
