"""docs/ADDING_RULES.md, followed as written: its two rule files are created from the doc's
code blocks and every shell command in it runs successfully in a scratch folder."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ADDING_RULES.md"


def test_walkthrough_runs_as_written(tmp_path):
    blocks = re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(), re.S)
    rules_text = next(body for lang, body in blocks if lang == "text")
    module_text = next(body for lang, body in blocks if lang == "python")
    (tmp_path / "my.rules").write_text(rules_text)
    (tmp_path / "my_rule.py").write_text(module_text)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    commands = [line.split("   #")[0] for lang, body in blocks if lang == "sh"
                for line in body.strip().splitlines()]
    assert len(commands) >= 6
    kir = [sys.executable, "-m", "kir.commands.main"]
    outputs = []
    for command in commands:
        assert command.startswith("kir "), command
        argv = command.split("|")[0].split()[1:]
        argv = [a.strip("'") for a in argv]
        done = subprocess.run(kir + argv, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    joined = "\n".join(outputs)
    assert "my-fma{at=SITE}" in joined
    assert "retune-unroll-hint{loop=SITE, factor∈{0,2,8}}" in joined
    assert "sites in examples/layernorm.cu: loop=L3" in joined
    assert "fma((x[xr + c_2] - mean) * rstd, gamma[c_2], beta[c_2])" in joined
    assert re.search(r"1 rule\(s\), 6 kernel\(s\): [1-9]\d* applications checked, "
                     r"[1-9]\d* kept results, 0 changed results, 0 errors", joined)
