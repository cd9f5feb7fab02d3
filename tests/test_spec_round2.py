"""Spec format round 2 (issue 13): size expressions in ``range``, ``require`` constraints held
at every size set, launch-time pointer offsets, ``reference_mlx``, and specs given as TOML
text or a dict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kir.backends.emulate import emulator_available

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import KirError
from kir.spec import load_spec, load_spec_text, spec_from_data
from kir.spec.pyexpr import size_expr_to_python
from kir.spec.require import holds, to_python

DATA = Path(__file__).parent / "data"
BASE = """
sizes = { M = 64, BM = 16, V = 5 }
launch = { grid = ["M // BM"], block = [32] }
[args]
x = { dtype = "f32", shape = ["M"] }
y = { dtype = "f32", shape = ["M"], role = "out" }
"""


def spec(text: str, tmp_path: Path, extra: str = ""):
    path = tmp_path / "k.kir.toml"
    head, _, args = BASE.partition("[args]")
    path.write_text(head + text + "\n[args]" + args + extra)
    return load_spec(path)


def test_range_takes_size_expressions_and_integer_ranges_include_both_ends(tmp_path):
    s = spec("", tmp_path, 'i = { dtype = "i32", shape = ["M"], range = [0, "V - 1"] }\n')
    bound = s.bind({"M": 4096})
    values = bound.make_inputs(0)["i"]
    assert set(np.unique(values)) == {0, 1, 2, 3, 4}  # V - 1 = 4 is drawn too
    assert bound.range("i") == (0.0, 4.0)
    assert set(np.unique(s.bind({"V": 2, "M": 512}).make_inputs(0)["i"])) == {0, 1}


def test_range_errors_name_the_key(tmp_path):
    with pytest.raises(KirError, match="unknown size 'W'") as raised:
        spec("", tmp_path, 'i = { dtype = "i32", shape = ["M"], range = [0, "W"] }\n')
    assert raised.value.loc.line == 8  # the line of args.i
    s = spec("", tmp_path, 'i = { dtype = "i32", shape = ["M"], range = ["V", 0] }\n')
    with pytest.raises(KirError, match="low <= high"):
        s.bind().make_inputs(0)


def test_require_holds_at_defaults_ragged_check_and_overrides(tmp_path):
    s = spec('require = ["M % BM == 0", "BM <= M"]\nragged = { M = 48 }', tmp_path)
    assert s.require == ("M % BM == 0", "BM <= M")
    with pytest.raises(KirError, match=r"breaks the spec's constraint 'M % BM == 0'"):
        s.bind({"M": 50})
    assert s.bind({"M": 80}).sizes["M"] == 80
    with pytest.raises(KirError, match="ragged break the constraint 'M % BM == 0'") as raised:
        spec('require = ["M % BM == 0"]\nragged = { M = 50 }', tmp_path)
    assert raised.value.loc.line == 5  # the ragged line
    with pytest.raises(KirError, match="check break"):
        spec('require = ["M % BM == 0"]\ncheck = { M = 20 }', tmp_path)
    with pytest.raises(KirError, match="sizes break"):
        spec('require = ["M > 100"]', tmp_path)


def test_require_is_checked_and_located(tmp_path):
    with pytest.raises(KirError, match="not a comparison"):
        spec('require = ["M + 1"]', tmp_path)
    with pytest.raises(KirError, match="unknown size 'Q'"):
        spec('require = ["Q > 1"]', tmp_path)
    with pytest.raises(KirError, match="only == != < <= > >="):
        spec('require = ["M in BM"]', tmp_path)
    assert holds("1 <= BM <= 32 and not M < 8", {"BM": 16, "M": 64})
    assert not holds("1 <= BM <= 8 or M == 1", {"BM": 16, "M": 64})
    python = to_python("M % BM == 0 and not N < 2", "S")
    assert eval(python, {"S": {"M": 64, "BM": 16, "N": 3}}) is True  # noqa: S307 - test
    assert eval(python, {"S": {"M": 64, "BM": 16, "N": 1}}) is False  # noqa: S307


def test_size_expressions_as_python():
    python = size_expr_to_python("ceil(N / T) * 2 + max(D, 4) // 2", "S")
    import math

    namespace = {"S": {"N": 100, "T": 32, "D": 8}, "math": math,
                 "_ceil": math.ceil, "_floor": math.floor}
    assert eval(python, namespace) == 12  # noqa: S307 - the test's own text
    with pytest.raises(KirError):
        size_expr_to_python("__import__('os')")


@pytest.mark.parametrize("target", ["interp"] + (["emulate-metal", "emulate-cuda"]
                                                 if emulator_available()[0] else []))
def test_pointer_offset_at_the_launch(target):
    """k<<<...>>>(x + half, ...): the kernel reads x[i - 1] before its own start."""
    loaded = load_kernel(DATA / "shift_add.cu")
    assert not loaded.kernel.launch.specialized  # the offset comes from the scalar n
    for sizes in ({}, {"half": 77}):
        outcome = check_on_target(load_kernel(DATA / "shift_add.cu", sizes=sizes), target)
        assert outcome.result.ok, outcome.result.describe()


def test_an_offset_the_kernel_cannot_compute_is_baked_in_and_specialized(tmp_path):
    text = (DATA / "shift_add.kir.toml").read_text().replace('offset = "half"',
                                                             'offset = "half + 0 * 7 ** 1"')
    (tmp_path / "s.cu").write_text((DATA / "shift_add.cu").read_text())
    (tmp_path / "s.kir.toml").write_text(text.replace('reference = "refs:shift_add"\n', ""))
    loaded = load_kernel(tmp_path / "s.cu")
    assert loaded.kernel.launch.specialized
    assert check_on_target(loaded, "interp").result.ok


def test_offset_errors(tmp_path):
    text = (DATA / "shift_add.kir.toml").read_text()
    path = tmp_path / "s.kir.toml"
    path.write_text(text.replace('offset = "half"', 'offset = "2 * half"'))
    with pytest.raises(KirError, match="offset '2 \\* half' = 600.*from 0 to 599"):
        load_spec(path).bind().offset("x")
    path.write_text(text.replace('n = { value = "half", dtype = "i32" }',
                                 'n = { value = "half", dtype = "i32", offset = "1" }'))
    with pytest.raises(KirError, match="cannot have an offset"):
        load_spec(path)


def test_reference_mlx_is_checked(tmp_path):
    s = spec('reference_mlx = "refs:softmax_mlx"', tmp_path)
    assert s.reference_mlx == "refs:softmax_mlx"
    with pytest.raises(KirError, match='reference_mlx must be "module:function"'):
        spec('reference_mlx = "refs"', tmp_path)


def test_spec_from_text_and_from_a_dict(tmp_path):
    s = load_spec_text(BASE, tmp_path / "virtual.kir.toml")
    assert s.sizes == {"M": 64, "BM": 16, "V": 5} and s.path.name == "virtual.kir.toml"
    d = spec_from_data({"sizes": {"N": 8}, "launch": {"grid": ["N"], "block": [1]},
                        "args": {"y": {"dtype": "f32", "shape": ["N"], "role": "out"}}},
                       tmp_path / "d.kir.toml")
    assert d.args["y"].role == "out" and d.bind().shape("y") == (8,)
    with pytest.raises(KirError, match="unknown size 'Q'") as raised:
        spec_from_data({"sizes": {"N": 8}, "launch": {"grid": ["Q"], "block": [1]}},
                       tmp_path / "d.kir.toml")
    assert raised.value.loc.line == 2  # a line of the TOML the dict became


def test_ragged_sizes_over_check_sizes_that_break_require_are_left_out(tmp_path):
    """check M=32 with ragged BM=24 would give M % BM != 0: that case is noted, not run."""
    from kir.measure.cases import build_cases

    (tmp_path / "k.cu").write_text((DATA / "shift_add.cu").read_text())
    text = (DATA / "shift_add.kir.toml").read_text().replace(
        "ragged = { half = 77 }", 'ragged = { half = 90 }\nrequire = ["half % 30 == 0"]')
    (tmp_path / "k.kir.toml").write_text(text)
    (tmp_path / "refs.py").write_text((DATA / "refs.py").read_text())
    loaded = load_kernel(tmp_path / "k.cu")
    cases, notes = build_cases(loaded, validate_sizes=[{"half": 90}, {"half": 100}],
                               seeds=(0,))
    assert [c.sizes["half"] for c in cases] == [300, 90]
    assert any("breaks the spec's require 'half % 30 == 0'" in n for n in notes)


def test_a_gpu_job_carries_a_spec_that_is_not_a_file(tmp_path):
    """A spec given to the Python API as text reaches the GPU worker as text."""
    from kir.measure.gpu.jobs import GpuJob, build_gpu_case

    loaded = load_kernel(DATA / "shift_add.cu")
    virtual = DATA / "not_a_file.kir.toml"  # refs.py is looked up beside it: DATA/refs.py
    job = GpuJob(loaded.kernel, str(virtual), {"half": 77}, "metal",
                 spec_text=(DATA / "shift_add.kir.toml").read_text())
    prepared = build_gpu_case(job, runner=None)
    assert prepared.case.sizes == {"half": 77} and "y" in prepared.case.expected
