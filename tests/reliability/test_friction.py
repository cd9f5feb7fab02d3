"""Issue 10's friction list: editing a dump as documented, which launch a .kir runs with,
`kir db` on a read-only database and its "(modelled)", hints that point where they say,
a UTF-8 byte order mark, module names from odd file names, the second search's site
analyses, and the documented cache location and exit codes. Each test failed on main
before its fix."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from kir.driver.load import load_kernel
from kir.driver.registry import load_registry
from kir.rules import Step, apply_step, context_for

from .cli import (
    EXAMPLES,
    ROOT,
    SCALE_CU,
    SCALE_REF,
    example_copy,
    kir,
    kir_here,
    no_traceback,
    read_only_prefix,
    scale_kernel,
)

BOM = b"\xef\xbb\xbf"

# -------------------------------------------------------------------- editing a dump


def test_a_dump_runs_on_its_own_as_the_docs_say(tmp_path, capsys):
    """`kir parse X.cu > x.kir; kir run x.kir`: the dump names its spec."""
    source = scale_kernel(tmp_path / "src", reference=SCALE_REF)
    dump = kir_here(capsys, "parse", source).out
    assert dump.startswith("# spec: ")
    elsewhere = tmp_path / "edits"
    elsewhere.mkdir()
    (elsewhere / "x.kir").write_text(dump.replace("2.0", "2.5", 1))  # an edit: now wrong
    ran = kir_here(capsys, "run", elsewhere / "x.kir")
    assert ran.code == 1 and "FAIL" in ran.out, ran.text  # checked against the reference
    (elsewhere / "x.kir").write_text(dump)
    assert kir_here(capsys, "run", elsewhere / "x.kir").code == 0


def test_a_dump_naming_a_missing_spec_says_where(tmp_path, capsys):
    source = scale_kernel(tmp_path)
    dump = kir_here(capsys, "parse", source).out
    (tmp_path / "scale.kir.toml").rename(tmp_path / "moved.toml")
    (tmp_path / "x.kir").write_text(dump)
    ran = kir_here(capsys, "run", tmp_path / "x.kir")
    assert ran.code == 2 and f"{tmp_path / 'x.kir'}:1:1:" in ran.err, ran.text
    assert "--spec" in ran.err


def test_kir_apply_output_and_best_kir_name_their_spec(tmp_path, capsys):
    out = tmp_path / "after.kir"
    ran = kir_here(capsys, "apply", EXAMPLES / "softmax.cu", "--step",
                   "unroll-loop{loop=L0,factor=2}", "-o", out)
    assert ran.code == 0 and ran.out.startswith("# spec: ")
    assert out.read_text().startswith("# spec: ")
    assert kir_here(capsys, "run", out).code == 0


# ------------------------------------------------------------------ which launch wins


def test_a_spec_less_dump_marks_its_launch_and_the_spec_replaces_it(tmp_path, capsys):
    folder = tmp_path / "nospec"
    folder.mkdir()
    (folder / "scale.cu").write_text(SCALE_CU)
    ran = kir_here(capsys, "parse", folder / "scale.cu")
    assert ran.code == 0 and "placeholder" in ran.err, ran.text
    assert ran.out.startswith("# launch: placeholder")
    (tmp_path / "x.kir").write_text(ran.out)
    scale_kernel(tmp_path / "withspec")
    spec = tmp_path / "withspec" / "scale.kir.toml"
    ran = kir_here(capsys, "run", tmp_path / "x.kir", "--spec", spec)
    assert ran.code == 0 and "PASS" in ran.out, ran.text  # not a 1x1 launch
    assert "placeholder" in ran.err and "spec's is used" in ran.err, ran.err


def test_a_kir_launch_that_differs_from_the_spec_is_said_loudly(tmp_path, capsys):
    source = scale_kernel(tmp_path)
    dump = kir_here(capsys, "parse", source).out
    edited = dump.replace('grid=("ceil(N / 128)", "1", "1") block=(128, 1, 1)',
                          'grid=("ceil(N / 64)", "1", "1") block=(64, 1, 1)')
    assert edited != dump
    (tmp_path / "x.kir").write_text(edited)
    ran = kir_here(capsys, "run", tmp_path / "x.kir")
    assert ran.code == 0, ran.text
    assert "differs from the spec's" in ran.err and "the IR's is used" in ran.err, ran.err
    assert "block (64, 1, 1)" in ran.err and "block (128, 1, 1)" in ran.err


# ---------------------------------------------------------------------------- kir db


def _small_search(tmp_path: Path, capsys, db: Path) -> None:
    ran = kir_here(capsys, "compile", EXAMPLES / "softmax.cu", "--search", "--target", "model",
                   "--size", "rows=4", "--size", "cols=64", "--budget", "4", "--db", db,
                   "--out-dir", tmp_path / "out", "-q")
    assert ran.code == 0, ran.text


def test_kir_db_show_says_modelled(tmp_path, capsys):
    db = tmp_path / "t.db"
    _small_search(tmp_path, capsys, db)
    shown = kir_here(capsys, "db", "show", "1", "--db", db).out
    assert "(modelled)" in shown.splitlines()[2], shown  # the summary line
    assert all("(modelled)" in line for line in shown.splitlines()[4:] if " ms" in line)
    listed = kir_here(capsys, "db", "list", "--db", db).out
    assert "modelled" in listed


def test_kir_db_reads_a_read_only_database(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "t.db"
    _small_search(tmp_path, capsys, db)
    for extra in folder.glob("t.db-*"):  # as a copied or archived database would be
        extra.unlink()
    prefix = read_only_prefix(folder)
    if prefix is None:
        pytest.skip("cannot make a folder read-only here (root without unshare)")
    if not prefix:
        db.chmod(0o444)
        folder.chmod(0o555)
    try:
        for action in ("list", "show", "export"):
            ran = kir("db", action, *(["1"] if action == "show" else []), "--db", db,
                      prefix=prefix)
            assert ran.code == 0 and "softmax_rows" in ran.out, ran.text
            no_traceback(ran)
    finally:
        folder.chmod(0o755)
    assert sorted(p.name for p in folder.iterdir()) == ["t.db"]  # nothing written


# ------------------------------------------------------------- hints that point nowhere


def test_check_size_errors_name_check_size(tmp_path, capsys):
    for bad in ("rows=x", "nope=3"):
        ran = kir_here(capsys, "compile", EXAMPLES / "softmax.cu", "--search", "--target",
                       "model", "--check-size", bad, "--budget", "1", "--db", tmp_path / "t.db",
                       "--out-dir", tmp_path / "out")
        assert ran.code == 2 and "--check-size" in ran.err and "--size" not in \
            ran.err.replace("--check-size", ""), ran.err


def test_a_missing_gpu_is_not_answered_with_a_target_compile_lacks(tmp_path, capsys):
    from kir.backends.mlx_runner import available_targets

    if "metal" in available_targets():
        pytest.skip("this machine has MLX's Metal back end")
    ran = kir_here(capsys, "compile", EXAMPLES / "softmax.cu", "--search", "--target", "metal",
                   "--db", tmp_path / "t.db", "--out-dir", tmp_path / "out")
    assert ran.code == 2 and "--target model" in ran.err and "interp" not in ran.err, ran.err


def test_kir_rules_test_finds_the_examples_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no examples/ here: the checkout's are used
    from kir.driver.rulecheck import default_examples_dir

    assert (default_examples_dir() / "softmax.cu").is_file()


# --------------------------------------------------------------- a byte order mark


def test_a_utf8_byte_order_mark_is_accepted_everywhere(tmp_path, capsys):
    folder = tmp_path / "bom"
    example_copy(folder, "softmax")
    for name in ("softmax.cu", "softmax.kir.toml"):
        (folder / name).write_bytes(BOM + (folder / name).read_bytes())
    assert kir_here(capsys, "run", folder / "softmax.cu", "--size", "rows=4").code == 0
    dump = kir_here(capsys, "parse", folder / "softmax.cu").out
    (folder / "d.kir").write_bytes(BOM + dump.encode())
    assert kir_here(capsys, "run", folder / "d.kir", "--size", "rows=4").code == 0
    trace = folder / "t.json"
    trace.write_bytes(BOM + json.dumps({"steps": ["unroll-loop{loop=L0,factor=2}"]}).encode())
    assert kir_here(capsys, "apply", folder / "softmax.cu", "--trace", trace).code == 0
    rules = folder / "mine.rules"
    rules.write_bytes(BOM + b'rule times-one "x * 1 => x":\n    ?x * 1.0 => ?x if float(?x)\n')
    listed = kir_here(capsys, "rules", "--rules", rules)
    assert listed.code == 0 and "times-one" in listed.out, listed.text


# --------------------------------------------------- a module from an odd file name


@pytest.mark.parametrize("stem", ["my kernel", "núcleo", "3d-scale"])
def test_a_source_with_an_odd_name_gives_an_importable_module(tmp_path, capsys, stem):
    folder = tmp_path / "src"
    source = scale_kernel(folder, reference=SCALE_REF)
    odd = folder / f"{stem}.cu"
    shutil.move(source, odd)
    shutil.move(folder / "scale.kir.toml", folder / f"{stem}.kir.toml")
    out = tmp_path / "out"
    ran = kir_here(capsys, "compile", odd, "--search", "--target", "model", "--budget", "2",
                   "--db", tmp_path / "t.db", "--out-dir", out, "-q")
    assert ran.code == 0, ran.text
    modules = list(out.glob("*_kir.py"))
    assert len(modules) == 1 and modules[0].stem.isidentifier(), modules
    sys.path.insert(0, str(out))
    try:
        module = importlib.import_module(modules[0].stem)
    finally:
        sys.path.remove(str(out))
        sys.modules.pop(modules[0].stem, None)
    assert callable(module.scale)


# -------------------------------------------------------- a second search's analyses


class CountingRule:
    """A first-protocol rule whose sites are its (counted) analysis."""

    name = "count-sites"
    site_key = "loop"
    params = ()
    calls = 0

    def sites(self, kernel):
        CountingRule.calls += 1
        return ["L0"]

    def apply(self, kernel, site, params, ctx):
        return kernel


def test_a_rules_sites_are_analysed_once_per_kernel():
    """The second search answered from the database re-ran every rule's site analysis for
    every kernel it met, several times each (34 s of 90): now once per kernel."""
    loaded = load_kernel(EXAMPLES / "softmax.cu")
    registry = load_registry(plugins=False)
    registry.add(CountingRule(), "test")
    ctx = context_for(loaded)
    from kir.search.genome import safe_sites

    for _ in range(3):
        assert safe_sites(registry["count-sites"], loaded.kernel, registry) == ["L0"]
        apply_step(loaded.kernel, Step("count-sites", "L0"), registry, ctx)
    assert CountingRule.calls == 1


# ------------------------------------------------------------------------ the docs


def test_the_docs_state_the_cache_location_and_every_exit_code():
    readme = (ROOT / "README.md").read_text()
    for needle in ("KIR_CACHE_DIR", "XDG_CACHE_HOME", "~/Library/Caches/kir", "130", "3 ",
                   "--limit"):
        assert needle in readme, needle
    reliability = (ROOT / "docs" / "RELIABILITY.md").read_text()
    for name in ("reference_s", "rule_s", "interp_s", "candidate_s", "ir_nodes",
                 "memory_fraction", "MAX_INT_BITS", "MAX_DEPENDENCE_TESTS"):
        assert name in reliability, name
