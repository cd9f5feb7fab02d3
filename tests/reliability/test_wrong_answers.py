"""Issue 10's wrong-answer items: no wrong kernel from the tuning database, the module or the
exit code. Each test failed on main before its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kir.cli import main
from kir.load import load_kernel
from kir.targets import check_on_target

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DROP_LOOP = Path(__file__).parent / "drop_loop_rule.py"


def _layernorm_copy(folder: Path, tolerance: str) -> Path:
    """examples/layernorm.cu with its spec and reference in ``folder``, the spec's tolerance
    replaced by ``tolerance`` (a TOML line, or "" for the defaults)."""
    folder.mkdir()
    for name in ("layernorm.cu", "refs.py"):
        shutil.copy(EXAMPLES / name, folder / name)
    spec = (EXAMPLES / "layernorm.kir.toml").read_text()
    (folder / "layernorm.kir.toml").write_text(spec.replace(
        'reference = "refs:layernorm"', f'reference = "refs:layernorm"\n{tolerance}'))
    return folder / "layernorm.cu"


def _search(source: Path, tmp_path: Path, out: str) -> int:
    return main(["compile", str(source), "--search", "--target", "model", "--size", "rows=8",
                 "--size", "cols=64", "--strategy", "greedy", "--budget", "12",
                 "--rules", str(DROP_LOOP), "--db", str(tmp_path / "shared.db"),
                 "--out-dir", str(tmp_path / out), "-q"])


def test_w1_a_loose_specs_verdicts_do_not_answer_a_strict_search(tmp_path, capsys):
    loose = _layernorm_copy(tmp_path / "loose", "tolerance = { rtol = 1e9, atol = 1e9 }")
    strict = _layernorm_copy(tmp_path / "strict", "")
    assert _search(loose, tmp_path, "out-loose") == 0
    loose_steps = json.loads((tmp_path / "out-loose" / "best.trace.json").read_text())["steps"]
    wrong = [s for s in loose_steps if s.startswith("drop-loop")]
    assert wrong  # the plant won there: it deletes a loop the result needs
    capsys.readouterr()
    assert _search(strict, tmp_path, "out-strict") == 0
    out = capsys.readouterr().out
    assert "(0 from the tuning database)" in out  # nothing judged under the loose spec
    steps = json.loads((tmp_path / "out-strict" / "best.trace.json").read_text())["steps"]
    assert not set(wrong) & set(steps), out
    # The written kernel passes the strict spec's check.
    best = tmp_path / "strict" / "best.kir"
    shutil.copy(tmp_path / "out-strict" / "best.kir", best)
    loaded = load_kernel(best, spec_path=tmp_path / "strict" / "layernorm.kir.toml",
                         sizes={"rows": 8, "cols": 64})
    assert check_on_target(loaded, "interp").result.ok
