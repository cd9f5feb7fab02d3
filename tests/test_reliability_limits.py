"""Limits and bad specs: kernels over a target's limits, sizes that overflow 32-bit indices and
inconsistent shapes are KirErrors before anything runs, and ``kir run`` exits 2 with the
message, not a traceback."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from kir.backends import TARGETS

from kir.commands.main import main
from kir.driver.load import load_kernel
from kir.errors import KirError, LimitError
from kir.ir import Alloc, Block, Launch
from kir.ir.types import F32
from kir.ir.verify import check_limits

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "examples" / "softmax.cu"


def _softmax():
    return load_kernel(SOFTMAX, sizes={"rows": 2, "cols": 64}).kernel


def test_too_many_threads_per_group_is_a_limit_error():
    kernel = dataclasses.replace(_softmax(), launch=Launch(("rows", "1", "1"), (2048, 1, 1), 0))
    with pytest.raises(LimitError, match="2048 threads; Metal allows at most 1024"):
        check_limits(kernel, TARGETS["metal"])


def test_too_much_threadgroup_memory_is_a_limit_error_naming_the_array():
    kernel = _softmax()
    big = Alloc("huge", F32, 10000, "shared")
    kernel = dataclasses.replace(kernel, body=Block((big,) + kernel.body.stmts))
    with pytest.raises(LimitError, match="huge: 40000 B.*at most 32768"):
        check_limits(kernel, TARGETS["metal"])
    check_limits(dataclasses.replace(kernel, body=_softmax().body), TARGETS["cuda"])


def test_a_buffer_past_two_to_the_31_elements_is_refused_before_running():
    with pytest.raises(KirError, match="4294967296 elements.*32-bit") as info:
        load_kernel(SOFTMAX, sizes={"rows": 65536, "cols": 65536})
    assert info.value.loc is not None and info.value.loc.file.endswith("softmax.kir.toml")


def test_a_launch_past_two_to_the_31_threads_is_refused(tmp_path):
    spec = (ROOT / "examples" / "softmax.kir.toml").read_text()
    # One block per 8 columns of a small buffer: many threads, little memory.
    spec = spec.replace('grid = ["rows"]', 'grid = ["rows * 1024 * 1024"]')
    shutil.copy(SOFTMAX, tmp_path / "softmax.cu")
    shutil.copy(ROOT / "examples" / "refs.py", tmp_path / "refs.py")
    (tmp_path / "softmax.kir.toml").write_text(spec)
    with pytest.raises(KirError, match="threads .*32-bit thread index"):
        load_kernel(tmp_path / "softmax.cu", sizes={"rows": 16, "cols": 64})


@pytest.mark.parametrize("size, message", [
    ("rows=65536", "32-bit"), ("cols=0", "positive"), ("cols=-4", "positive"),
    ("width=3", "has no size 'width'"), ("cols=x", "not an integer"),
])
def test_kir_run_exits_2_with_the_message(capsys, size, message):
    code = main(["run", str(SOFTMAX), "--size", size, "--size", "cols=65536"]
                if size == "rows=65536" else ["run", str(SOFTMAX), "--size", size])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("args_text, message", [
    ('x = { dtype = "f32", shape = ["rows", "cols"] }\ny = { dtype = "f32", role = "out" }',
     "has no shape"),
    ('x = { dtype = "f32", shape = [] }', "empty shape"),
    ('x = { dtype = "f32", shape = ["rows", "depth"] }', "unknown size 'depth'"),
    ('x = { dtype = "f32", shape = ["rows - 100"] }', "must be a positive integer"),
    ('x = { dtype = "f32", shape = ["rows / 3"] }', "must be a positive integer"),
    ('x = { dtype = "f32", shape = ["2 ** 70"] }', "32-bit"),
])
def test_missing_or_inconsistent_shapes_are_located_errors(tmp_path, args_text, message):
    spec = (ROOT / "examples" / "softmax.kir.toml").read_text()
    head = spec[:spec.index("[args]")]
    rest = 'y = { dtype = "f32", shape = ["rows", "cols"], role = "out" }\n' \
        if "y =" not in args_text else ""
    (tmp_path / "softmax.kir.toml").write_text(
        head + "[args]\n" + args_text + "\n" + rest + 'cols = { value = "cols", dtype = "i32" }\n')
    shutil.copy(SOFTMAX, tmp_path / "softmax.cu")
    shutil.copy(ROOT / "examples" / "refs.py", tmp_path / "refs.py")
    with pytest.raises(KirError, match=message) as info:
        loaded = load_kernel(tmp_path / "softmax.cu", sizes={"rows": 4, "cols": 64})
        loaded.bound.make_inputs(0)
    assert info.value.loc is not None
