"""kir.spec: loading, checking and binding X.kir.toml kernel specs."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kir.errors import KirError
from kir.ir import Launch
from kir.spec import ArgSpec, BoundSpec, Spec, find_spec, load_spec

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

GOOD = """\
kernel = "attention_fwd"
sizes = { B = 1, H = 8, N = 256, D = 64, T = 32 }
ragged = { N = 200 }
templates = { BM = "T * 2" }
launch = { grid = ["B", "H"], block = ["T"], shared_bytes = "(3*T*D + T*T) * 4" }
reference = "myrefs:attention"

[args]
q = { dtype = "f32", shape = ["B", "H", "N", "D"], range = [-3.0, 3.0] }
seq_len = { value = "N" }
n_tiles = { value = "ceil(N / T)", dtype = "i32" }
scale = { value = "1 / sqrt(D)", dtype = "f32" }
half_in = { dtype = "f16", shape = ["N"] }
idx = { dtype = "i32", shape = ["N"], range = [0, 9] }
row_max = { dtype = "f32", shape = ["B", "H", "N"], role = "inout", init = "-inf" }
acc = { dtype = "f32", shape = ["N"], role = "inout" }
out = { dtype = "f32", shape = ["B", "H", "N", "D"], role = "out", init = 0 }
"""

REFS = """\
import numpy as np

def attention(args, sizes):
    return {"row_max": np.maximum(args["row_max"], 1.0), "acc": args["acc"] * 2,
            "out": np.broadcast_to(args["q"].sum(-1, keepdims=True), args["q"].shape)}

def broken(args, sizes):
    return {"row_max": args["row_max"]}
"""


def write(tmp_path: Path, text: str, name: str = "k.kir.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_error(tmp_path: Path, text: str) -> KirError:
    path = write(tmp_path, text)
    with pytest.raises(KirError) as info:
        load_spec(path)
    assert "k.kir.toml" in str(info.value)
    return info.value


# ---------------------------------------------------------------------- good specs


def test_good_spec_parses(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    assert isinstance(spec, Spec)
    assert spec.kernel == "attention_fwd"
    assert spec.sizes == {"B": 1, "H": 8, "N": 256, "D": 64, "T": 32}
    assert spec.ragged == {"N": 200}
    assert spec.grid == ("B", "H", "1") and spec.block == ("T", "1", "1")
    assert spec.rtol is None and spec.atol is None
    assert list(spec.args) == ["q", "seq_len", "n_tiles", "scale", "half_in", "idx", "row_max",
                               "acc", "out"]
    q, seq_len = spec.args["q"], spec.args["seq_len"]
    assert isinstance(q, ArgSpec) and q.is_buffer and not q.is_scalar
    assert q.shape == ("B", "H", "N", "D") and q.role == "in" and q.range == (-3.0, 3.0)
    assert seq_len.is_scalar and seq_len.dtype is None and seq_len.value == "N"
    assert spec.args["row_max"].init == float("-inf")
    assert spec.args["acc"].init == "input"        # inout without init keeps its input data
    assert spec.args["out"].init == 0.0


def test_bind_evaluates_everything(tmp_path: Path) -> None:
    bound = load_spec(write(tmp_path, GOOD)).bind()
    assert isinstance(bound, BoundSpec)
    assert bound.grid == (1, 8, 1) and bound.block == (32, 1, 1)
    assert bound.shared_bytes == (3 * 32 * 64 + 32 * 32) * 4
    assert bound.shape("q") == (1, 8, 256, 64)
    assert bound.scalar("seq_len") == 256 and isinstance(bound.scalar("seq_len"), int)
    assert bound.scalar("n_tiles") == 8
    assert bound.scalar("scale") == pytest.approx(0.125)
    assert bound.template_values()["BM"] == 64 and bound.template_values()["T"] == 32
    assert bound.launch() == Launch(("B", "H", "1"), (32, 1, 1), 28672)
    assert bound.outputs == ["row_max", "acc", "out"]


def test_overrides_and_ragged(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    bound = spec.bind(spec.ragged)
    assert bound.sizes["N"] == 200 and bound.shape("q") == (1, 8, 200, 64)
    assert bound.scalar("n_tiles") == 7                      # ceil(200 / 32)
    assert spec.bind({"D": 32, "T": 16}).shared_bytes == (3 * 16 * 32 + 16 * 16) * 4
    assert spec.sizes["N"] == 256                            # the spec itself is unchanged


@pytest.mark.parametrize("overrides, pattern", [
    ({"Q": 4}, r"--size Q=4: k\.kir\.toml has no size 'Q'"),
    ({"N": 0}, r"positive"),
    ({"N": -3}, r"positive"),
])
def test_bad_overrides(tmp_path: Path, overrides: dict, pattern: str) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    with pytest.raises(KirError, match=pattern):
        spec.bind(overrides)


def test_unknown_override_suggests(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    with pytest.raises(KirError) as info:
        spec.bind({"n": 3})
    assert "did you mean 'N'" in str(info.value)


def test_make_inputs(tmp_path: Path) -> None:
    bound = load_spec(write(tmp_path, GOOD)).bind()
    values = bound.make_inputs(seed=3)
    assert list(values) == list(bound.spec.args)
    q = values["q"]
    assert q.dtype == np.float32 and q.shape == (1, 8, 256, 64)
    assert q.min() >= -3.0 and q.max() <= 3.0 and q.std() > 1.0
    assert values["half_in"].dtype == np.float16 and values["half_in"].shape == (256,)
    assert values["idx"].dtype == np.int32 and set(np.unique(values["idx"])) <= set(range(10))
    assert np.all(values["row_max"] == -np.inf) and values["row_max"].shape == (1, 8, 256)
    assert np.all(values["out"] == 0) and values["out"].dtype == np.float32
    assert np.abs(values["acc"]).max() > 0                  # "input": random data
    assert values["seq_len"] == 256 and isinstance(values["scale"], float)
    again = bound.make_inputs(seed=3)
    assert np.array_equal(again["q"], q)
    assert not np.array_equal(bound.make_inputs(seed=4)["q"], q)


def test_bf16_inputs_are_rounded(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, """\
        sizes = { N = 64 }
        launch = { grid = [1], block = ["N"] }
        [args]
        x = { dtype = "bf16", shape = ["N"] }
    """))
    x = spec.bind().make_inputs()["x"]
    assert x.dtype == np.float32
    assert np.all(x.view(np.uint32) & 0xFFFF == 0)


def test_tolerance_defaults_and_spec_values(tmp_path: Path) -> None:
    bound = load_spec(write(tmp_path, GOOD)).bind()
    assert bound.tolerance("f32") == (1e-4, 1e-5)
    assert bound.tolerance("f16") == (1e-2, 1e-3)
    assert bound.tolerance("bf16") == (1e-2, 1e-3)
    assert bound.tolerance("f64") == (1e-9, 1e-12)
    assert bound.tolerance("i32") == (0.0, 0.0)
    text = GOOD.replace('reference = "myrefs:attention"',
                        'reference = "myrefs:attention"\ntolerance = { rtol = 1e-3 }')
    spec = load_spec(write(tmp_path, text))
    assert spec.bind().tolerance("f32") == (1e-3, 1e-5)


def test_reference_call(tmp_path: Path) -> None:
    (tmp_path / "myrefs.py").write_text(REFS)
    bound = load_spec(write(tmp_path, GOOD)).bind({"N": 40})
    values = bound.make_inputs()
    before = values["acc"].copy()
    result = bound.reference(values)
    assert set(result) == {"row_max", "acc", "out"}
    assert np.all(result["row_max"] == 1.0)
    assert np.allclose(result["acc"], before * 2)
    assert np.array_equal(values["acc"], before)              # the reference gets copies
    assert result["out"].shape == (1, 8, 40, 64) and result["out"].dtype == np.float32


def test_reference_module_loaded_by_path_not_sys_path(tmp_path: Path) -> None:
    import sys

    (tmp_path / "myrefs.py").write_text(REFS)
    load_spec(write(tmp_path, GOOD)).bind().reference(
        load_spec(tmp_path / "k.kir.toml").bind().make_inputs())
    assert str(tmp_path) not in sys.path
    assert "myrefs" not in sys.modules


def test_no_reference_gives_none(tmp_path: Path) -> None:
    text = GOOD.replace('reference = "myrefs:attention"\n', "")
    bound = load_spec(write(tmp_path, text)).bind()
    assert bound.reference(bound.make_inputs()) is None


def test_reference_module_missing(tmp_path: Path) -> None:
    bound = load_spec(write(tmp_path, GOOD)).bind()   # loading succeeds: checked at call time
    with pytest.raises(KirError) as info:
        bound.reference(bound.make_inputs())
    text = str(info.value)
    assert "k.kir.toml" in text and "myrefs" in text and str(tmp_path / "myrefs.py") in text


def test_reference_function_missing_or_incomplete(tmp_path: Path) -> None:
    (tmp_path / "myrefs.py").write_text(REFS)
    bound = load_spec(write(tmp_path, GOOD.replace("myrefs:attention", "myrefs:nope"))).bind()
    with pytest.raises(KirError, match=r"'nope' not found in .*myrefs\.py"):
        bound.reference(bound.make_inputs())
    bound = load_spec(write(tmp_path, GOOD.replace("myrefs:attention", "myrefs:broken"))).bind()
    with pytest.raises(KirError, match=r"did not return output 'acc'"):
        bound.reference(bound.make_inputs())


def test_find_spec(tmp_path: Path) -> None:
    (tmp_path / "softmax.cu").write_text("")
    assert find_spec(tmp_path / "softmax.cu") is None
    write(tmp_path, GOOD, "softmax.kir.toml")
    assert find_spec(str(tmp_path / "softmax.cu")) == tmp_path / "softmax.kir.toml"


# ---------------------------------------------------------------------- bad specs

MINIMAL = 'sizes = { N = 4 }\nlaunch = { grid = [1], block = ["N"] }\n[args]\n'


def test_toml_syntax_error_has_line_and_col(tmp_path: Path) -> None:
    error = load_error(tmp_path, 'sizes = { N = 4 }\nlaunch = { grid = [1], block = ["N"] }\n'
                                 "kernel = = 3\n")
    assert error.loc is not None and error.loc.line == 3
    assert "not valid TOML" in str(error) and "k.kir.toml:3:" in str(error)


def test_unknown_top_level_key(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL.replace("[args]", "tolerence = { rtol = 1 }\n[args]"))
    assert "unknown key 'tolerence'" in str(error)
    assert "did you mean 'tolerance'?" in str(error)
    assert error.loc.line == 3 and error.loc.col == 1


def test_missing_launch(tmp_path: Path) -> None:
    error = load_error(tmp_path, "sizes = { N = 4 }\n[args]\n")
    assert "missing launch" in str(error) and "grid" in str(error)


def test_shape_with_unknown_size(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + 'x = { dtype = "f32", shape = ["M"] }\n')
    assert "unknown size 'M'" in str(error)
    assert error.loc.line == 4


def test_bad_role(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + 'x = { dtype = "f32", shape = ["N"], role = "output" }')
    assert "role must be in, out, inout or scratch" in str(error) and "'output'" in str(error)
    assert error.loc.line == 4 and error.source_line is not None


@pytest.mark.parametrize("init", ['"zero"', "true", "[0]", '"nan"'])
def test_bad_init(tmp_path: Path, init: str) -> None:
    error = load_error(tmp_path, MINIMAL
                       + f'x = {{ dtype = "f32", shape = ["N"], role = "out", init = {init} }}')
    assert "init must be a number, '-inf', 'inf', 'input' or 'none'" in str(error)


def test_toml_inf_literal_is_accepted(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL + 'x = { dtype = "f32", shape = ["N"], '
                                               'role = "out", init = -inf }'))
    assert spec.args["x"].init == float("-inf")


def test_bad_dtype(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + 'x = { dtype = "float", shape = ["N"] }')
    assert "unknown dtype 'float'" in str(error) and "did you mean 'f32'?" in str(error)


@pytest.mark.parametrize("value", ["0", "-2"])
def test_non_positive_size(tmp_path: Path, value: str) -> None:
    error = load_error(tmp_path, MINIMAL.replace("N = 4", f"N = {value}"))
    assert "sizes must be positive" in str(error) and error.loc.line == 1


def test_ragged_unknown_size(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL.replace("[args]", "ragged = { n = 3 }\n[args]"))
    assert "ragged overrides unknown size 'n'" in str(error)


def test_scalar_without_value(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + "n = { }")
    assert "scalar argument 'n' has no value" in str(error)


def test_buffer_without_shape(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + 'y = { dtype = "f32", role = "out" }')
    assert "buffer argument 'y' has no shape" in str(error)


def test_unknown_arg_key(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + 'y = { dtype = "f32", shap = ["N"] }')
    assert "unknown key 'shap'" in str(error) and "did you mean 'shape'?" in str(error)


def test_bad_reference_format(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL.replace("[args]", 'reference = "refs.attention"\n[args]'))
    assert "module:function" in str(error)


def test_shape_not_positive_at_bind(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL + 'x = { dtype = "f32", shape = ["N - 4"] }'))
    with pytest.raises(KirError, match=r"argument 'x' dimension 0: 'N - 4' = 0"):
        spec.bind().shape("x")


# ---------------------------------------------------------------------- the examples


@pytest.mark.parametrize("spec_path", sorted(EXAMPLES.glob("*.kir.toml")), ids=lambda p: p.stem)
def test_example_specs_follow_kernel_signature(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    source = find_spec(spec_path.with_name(spec_path.name.replace(".kir.toml", ".cu")))
    assert source == spec_path
    text = spec_path.with_name(spec_path.name.replace(".kir.toml", ".cu")).read_text()
    params = re.search(rf"__global__\s+void\s+{spec.kernel}\s*\(([^)]*)\)", text).group(1)
    names = [re.findall(r"\w+", p)[-1] for p in params.split(",")]
    assert names == list(spec.args)
    for ragged in (False, True):
        bound = spec.bind(spec.ragged if ragged else None)
        outputs = bound.reference(bound.make_inputs())
        assert set(outputs) == set(bound.outputs)


def test_init_none_is_for_outputs_only_and_poisons(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL + 'x = { dtype = "f32", shape = ["N"], '
                                               'role = "out", init = "none" }'))
    assert spec.args["x"].init == "none"
    assert np.isnan(spec.bind().make_inputs(0)["x"]).all()  # unwritten elements show up
    error = load_error(tmp_path, MINIMAL + 'x = { dtype = "f32", shape = ["N"], '
                                           'role = "inout", init = "none" }')
    assert "init = 'none' is for role 'out'" in str(error)
