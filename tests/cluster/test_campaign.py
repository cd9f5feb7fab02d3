"""``kir campaign``: a campaign file's errors point at their line; a campaign on the local Ray
cluster searches every kernel on every (modelled) device into one database, writes one
report with the transfer table, and started again answers every search from the database."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kir.cluster.campaign import run_campaign
from kir.cluster.campaign_config import load_campaign
from kir.commands.main import main
from kir.errors import KirError

from .conftest import RESOURCE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULES = '["coarsen-threads", "distribute-loop", "unroll-loop", "exp-to-exp2"]'


def campaign_file(tmp_path, cluster="ray", extra=""):
    path = tmp_path / "campaign.toml"
    path.write_text(f"""\
cluster = "{cluster}"
budget = 5
seed = 1
db = "tuning.db"
out = "report"
rules = {RULES}
{extra}
[[kernels]]
file = "{EXAMPLES / 'softmax.cu'}"
sizes = [{{ rows = 4, cols = 64 }}]

[[devices]]
name = "M1"
resource = "{RESOURCE}"
target = "model:apple-m1"
actors = 1

[[devices]]
name = "M4"
resource = "{RESOURCE}"
target = "model:apple-m4"
actors = 1
""")
    return path


@pytest.mark.parametrize("change, message, line", [
    ('budget = 5', 'budgte = 5', "unknown key 'budgte'"),
    ('target = "model:apple-m4"', 'target = "model:apple-m9"', "unknown GPU profile"),
    ('target = "model:apple-m4"', 'target = "tpu"', "unknown device target 'tpu'"),
    ('cluster = "ray"', 'cluster = "dask"', "unknown cluster 'dask'"),
    ('rules = [', 'rules = ["no-such-rule", ', "unknown rule 'no-such-rule'"),
])
def test_campaign_file_errors_name_the_line(tmp_path, change, message, line):
    path = campaign_file(tmp_path)
    path.write_text(path.read_text().replace(change, message, 1))
    with pytest.raises(KirError, match=line) as caught:
        load_campaign(path)
    assert caught.value.loc.file == str(path)
    wrong = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                 if message.split(" =")[0].strip() in text and "=" in text)
    assert caught.value.loc.line == wrong


def test_campaign_file_needs_kernels_and_existing_files(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[devices]]\nname = "a"\nresource = "r"\n')
    with pytest.raises(KirError, match="lists no kernels"):
        load_campaign(path)
    path.write_text('[[kernels]]\nfile = "missing.cu"\n[[devices]]\nname = "a"\n'
                    'resource = "r"\n')
    with pytest.raises(KirError, match="no such file") as caught:
        load_campaign(path)
    assert caught.value.hint == "paths are relative to the campaign file"


def test_campaign_on_the_cluster_and_its_resumption(ray_cluster, tmp_path):
    config = load_campaign(campaign_file(tmp_path))
    lines: list[str] = []
    first = run_campaign(config, say=lines.append)
    assert [(o.kernel, o.device, o.error) for o in first.outcomes] == [
        ("softmax_rows", "M1", ""), ("softmax_rows", "M4", "")]
    m1, m4 = first.outcomes
    assert m1.descriptor.device == "model:apple-m1" and m4.descriptor.device == "model:apple-m4"
    assert m1.baseline_ms != m4.baseline_ms  # two chips, two models
    assert all(o.evaluations == 5 and o.cached == 0 for o in first.outcomes)
    assert len(lines) == 2 and "on M1: best" in "".join(lines)
    report = first.report.read_text()
    assert "> Modelled: no GPU timed M1, M4" in report
    assert "| softmax_rows | rows=4, cols=64 | M1 (modelled) |" in report
    assert "## What transferred: rule x device" in report
    assert "| rule | M1 (modelled) | M4 (modelled) |" in report
    rows = list(csv.DictReader((tmp_path / "report" / "campaign.csv").open()))
    assert [r["device"] for r in rows] == ["M1", "M4"] and all(r["modelled"] == "1" for r in rows)
    assert (tmp_path / "report" / m1.slug / "report.md").is_file()
    # Again: every search answered from the one tuning database.
    again = run_campaign(config, say=lambda line: None)
    assert all(o.cached == o.evaluations == 5 for o in again.outcomes)
    assert [o.best_ms for o in again.outcomes] == [o.best_ms for o in first.outcomes]


def test_kir_campaign_command_on_this_machine(tmp_path, capsys):
    """cluster = "local": the same jobs through this machine's own pools (no Ray)."""
    path = campaign_file(tmp_path, cluster="local")
    assert main(["campaign", str(path), "--out", str(tmp_path / "elsewhere")]) == 0
    out = capsys.readouterr()
    assert "2 searches in" in out.out and "[2/2]" in out.err
    assert (tmp_path / "elsewhere" / "campaign.md").is_file()
