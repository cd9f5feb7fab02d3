"""``kir compile X.cu --search --cluster ray``: the search judged on the cluster's workers,
its rows filed under the workers' device; without Ray, a message saying how to install it."""

from __future__ import annotations

import sys
from pathlib import Path

from kir.commands.main import main
from kir.search import TuningDB

from .conftest import RESOURCE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEARCH = ["compile", str(EXAMPLES / "softmax.cu"), "--size", "rows=4", "--size", "cols=64",
          "--search", "--budget", "3", "-q"]


def test_search_on_the_cluster(ray_cluster, tmp_path, capsys):
    db = tmp_path / "t.db"
    code = main(SEARCH + ["--cluster", "ray", "--device-resource", RESOURCE, "--target", "model",
                          "--db", str(db), "--out-dir", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "judging candidates on the cluster: device model:apple-m2" in out.err
    assert "3 evaluations" in out.out and (tmp_path / "out" / "softmax_kir.py").is_file()
    with TuningDB(db) as tuning:
        (info,) = tuning.runs()
        assert info.key.device == "model:apple-m2" and info.count >= 3


def test_without_ray_the_message_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    code = main(SEARCH + ["--cluster", "ray", "--db", str(tmp_path / "t.db"),
                          "--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--cluster ray needs Ray, which is not installed" in err
    assert 'pip install -e ".[ray]"' in err


def test_cluster_options_are_checked_before_any_work(tmp_path, capsys):
    assert main(SEARCH + ["--cluster", "dask"]) == 2
    assert "unknown --cluster 'dask'" in capsys.readouterr().err
    assert main(SEARCH + ["--device-resource", "m2"]) == 2
    assert "--device-resource names the device workers" in capsys.readouterr().err


def test_python_api_search_on_the_cluster(ray_cluster):
    import kir

    found = kir.load(EXAMPLES / "softmax.cu", sizes={"rows": 4, "cols": 64}).search(
        "model", 3, db=False, cluster="ray", device_resource=RESOURCE)
    assert found.modelled and found.best_ms is not None
    assert found.result.device == "model:apple-m2" and len(found.result.history) == 3
