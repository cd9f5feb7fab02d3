"""The Python API (issue 13): ``import kir`` is light, ``kir.load`` takes a spec as a path,
TOML text or a dict, ``run``/``search``/``module``/``write``/``save`` work and go through the
same search as the CLI, and the README's Python example runs as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

import kir
from kir.commands.main import main
from kir.errors import KirError

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "softmax.cu"
SMALL = {"rows": 4, "cols": 96}


def test_import_kir_is_light_and_has_a_version():
    script = ("import sys, time; t = time.perf_counter(); import kir; "
              "ms = (time.perf_counter() - t) * 1e3; "
              "print(kir.__version__, [m for m in ('numpy', 'mlx', 'lark', 'kir.api') "
              "if m in sys.modules], ms)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    version, loaded, ms = done.stdout.rsplit(" ", 2)[0], done.stdout.split("[")[1].split("]")[0], \
        float(done.stdout.split()[-1])
    from kir.version import __version__

    assert version == __version__ and loaded == ""  # nothing heavy until it is used
    assert ms < 500  # measured about 2 ms; generous for a loaded CI machine


def test_kir_version_on_the_command_line(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"kir {kir.__version__}"


def test_load_takes_a_spec_path_text_or_dict(tmp_path):
    text = (ROOT / "examples" / "softmax.kir.toml").read_text()
    by_path = kir.load(SOFTMAX, spec=ROOT / "examples" / "softmax.kir.toml", sizes=SMALL)
    by_text = kir.load(SOFTMAX, spec=text, sizes=SMALL)
    by_dict = kir.load(SOFTMAX, sizes=SMALL, spec={
        "sizes": {"rows": 64, "cols": 1000}, "launch": {"grid": ["rows"], "block": [256]},
        "reference": "refs:softmax",
        "args": {"x": {"dtype": "f32", "shape": ["rows", "cols"]},
                 "y": {"dtype": "f32", "shape": ["rows", "cols"], "role": "out",
                       "init": "none"},
                 "cols": {"value": "cols", "dtype": "i32"}}})
    for k in (by_path, by_text, by_dict):
        result = k.run()
        assert result.ok and result.reference == "reference refs:softmax", result
        assert k.sizes == SMALL and k.name == "softmax_rows"
    assert by_text.ir.fingerprint() == by_dict.ir.fingerprint()
    with pytest.raises(KirError, match="unknown size 'nope'"):
        kir.load(SOFTMAX, spec=text.replace('grid = ["rows"]', 'grid = ["nope"]'))
    with pytest.raises(KirError, match="spec must be a path, TOML text or a dict"):
        kir.load(SOFTMAX, spec=42)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "t.db"
    return kir.load(SOFTMAX, sizes=SMALL).search(target="model", budget=8, seed=1, db=db), db


def test_search_gives_a_result_a_module_and_files(searched, tmp_path):
    result, _ = searched
    assert result.ok and result.modelled and result.best_ms > 0
    assert result.evaluations == 8 and "(modelled at rows=4, cols=96)" in result.unit
    softmax = result.module()
    x = np.random.default_rng(0).normal(size=(5, 77)).astype(np.float32)
    y = np.array(softmax(mx.array(x)))  # another shape than searched: no Metal here, so the
    want = np.exp(x - x.max(axis=1, keepdims=True))  # spec's reference_mlx answers
    np.testing.assert_allclose(y, want / want.sum(axis=1, keepdims=True), rtol=1e-5)
    path = result.write(tmp_path / "softmax_kir.py")
    assert "def softmax_rows(x):" in path.read_text()
    files = result.save(tmp_path / "out")
    assert {files[role].name for role in ("module", "trace", "ir", "report", "plot")} == \
        {"softmax_kir.py", "best.trace.json", "best.kir", "report.md", "progress.svg"}
    assert json.loads(files["trace"].read_text())["steps"] == result.steps


def test_the_cli_and_the_api_run_one_search(searched, tmp_path, capsys):
    """Same kernel, sizes, budget and seed: the CLI finds the same winner from the same
    database (every evaluation is answered by the API's rows)."""
    result, db = searched
    code = main(["compile", str(SOFTMAX), "--search", "--target", "model", "--budget", "8",
                 "--seed", "1", "--size", "rows=4", "--size", "cols=96", "--db", str(db),
                 "--out-dir", str(tmp_path / "cli")])
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"8 evaluations \(8 from the tuning database\)", out)
    trace = json.loads((tmp_path / "cli" / "best.trace.json").read_text())
    assert trace["steps"] == result.steps and trace["time_ms"] == pytest.approx(result.best_ms)


def test_a_kernel_without_a_spec_says_how_to_get_one(tmp_path):
    (tmp_path / "k.cu").write_text("__global__ void k(float* y) { y[0] = 1.0f; }\n")
    k = kir.load(tmp_path / "k.cu")
    with pytest.raises(KirError, match="kir spec init drafts one"):
        k.run()


def readme_python() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path / "cache"))  # not the user's database
    exec(compile(readme_python(), "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    out = capsys.readouterr().out
    assert "PASS" in out or "ok" in out
    assert "(32, 1000) 32.0" in out
    assert (tmp_path / "softmax_kir.py").exists()
