"""Each file in invalid/ holds one construct kir must reject; its first line says where and
with what message: ``// expect: LINE:COL: <substring of the message>``."""

from __future__ import annotations

import glob
import os
import re

import pytest
from kir.frontends.cuda import load_cuda

from kir.errors import KirError

HERE = os.path.dirname(__file__)
FILES = sorted(glob.glob(os.path.join(HERE, "invalid", "*.cu")))
EXPECT = re.compile(r"^// expect: (\d+):(\d+): (.+)$")


def test_enough_cases():
    assert len(FILES) >= 25


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_invalid_source_is_rejected_with_location(path):
    text = open(path).read()
    match = EXPECT.match(text.splitlines()[0])
    assert match, f"{path}: first line must be '// expect: LINE:COL: message'"
    line, col, message = int(match.group(1)), int(match.group(2)), match.group(3)
    with pytest.raises(KirError) as info:
        load_cuda(text, path)
    err = info.value
    assert message in err.message
    assert err.loc is not None and err.loc.file == path
    assert (err.loc.line, err.loc.col) == (line, col)
    rendered = str(err).splitlines()
    assert rendered[0].startswith(f"{path}:{line}:{col}: error: ")
    # the user's line, then a caret under the column
    assert rendered[1].strip() == text.splitlines()[line - 1].strip()
    assert rendered[2].rstrip().endswith("^")
    assert len(rendered[2].rstrip()) - 4 == col


@pytest.mark.parametrize("path", [f for f in FILES if os.path.basename(f).startswith("cub_")],
                         ids=os.path.basename)
def test_cub_collectives_are_refused_with_what_to_write_instead(path):
    """kir reads CUB's reductions and scans (tests/frontend/test_cub.py); a refusal of its
    other collectives names those and what to write the others with."""
    with pytest.raises(KirError) as info:
        load_cuda(open(path).read(), path)
    assert info.value.hint and "warp shuffles" in info.value.hint
    assert "cub::BlockReduce" in info.value.hint and "cub::BlockScan" in info.value.hint
