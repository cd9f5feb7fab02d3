"""Spec arguments and the kernel's parameters: null pointers (``bias = { null = true }``),
parameters left to their defaults, arguments bound by name whatever their order in the spec
(on the interpreter and on the original file under the emulator), names that match no
parameter (a located error), include folders and dtype template values."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import KirError
from kir.spec import load_spec

KERNEL = """\
#include "helpers.h"
__global__ void axpb(float* y, const float* x, float a, int n, const float* bias = nullptr,
                     float scale = 1.0f) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = scale * (a * twice(x[i]) + (bias != nullptr ? bias[i] : 0.0f));
}
"""
HELPERS = "#pragma once\n__device__ inline float twice(float v) { return 2.0f * v; }\n"
REFS = """\
import numpy as np
def axpb(args, sizes):
    bias = 0.0 if args.get("bias") is None else args["bias"]
    scale = args.get("scale", 1.0)
    return {"y": scale * (args["a"] * 2 * args["x"] + bias)}
"""
HEAD = """\
sizes = { N = 100 }
launch = { grid = ["ceil(N / 32)"], block = [32] }
reference = "refs:axpb"
"""


def project(tmp_path: Path, args: str, head: str = HEAD) -> Path:
    (tmp_path / "inc").mkdir(exist_ok=True)
    (tmp_path / "inc" / "helpers.h").write_text(HELPERS)
    (tmp_path / "refs.py").write_text(REFS)
    (tmp_path / "k.cu").write_text(KERNEL)
    spec = tmp_path / "k.kir.toml"
    spec.write_text(head + 'include = ["inc"]\n[args]\n' + textwrap.dedent(args))
    return tmp_path / "k.cu"


def test_a_null_argument_has_no_data_and_folds_the_kernels_tests(tmp_path):
    path = project(tmp_path, """\
        y = { dtype = "f32", shape = ["N"], role = "out", init = "none" }
        x = { dtype = "f32", shape = ["N"] }
        a = { value = "3", dtype = "f32" }
        n = { value = "N", dtype = "i32" }
        bias = { null = true }
        """)
    loaded = load_kernel(path)
    assert [p.name for p in loaded.kernel.params] == ["y", "x", "a", "n"]
    spec = loaded.spec
    assert spec.args["bias"].null and not spec.args["bias"].is_buffer
    assert "bias" not in loaded.bound.make_inputs(0)
    assert check_on_target(loaded, "interp").result.ok


@pytest.mark.parametrize("target", ["interp", "emulate-original"])
def test_arguments_bind_by_name_in_any_spec_order(tmp_path, target):
    """The spec lists the arguments in another order than the kernel, gives bias and scale:
    both runs must use each buffer for its own parameter (positional binding swapped x and
    y, and a and n, and still compiled)."""
    if target != "interp":
        from kir.backends.emulate import emulator_available

        if not emulator_available()[0]:
            pytest.skip("no host C++ compiler for the emulator")
    path = project(tmp_path, """\
        scale = { value = "0.5", dtype = "f32" }
        n = { value = "N", dtype = "i32" }
        x = { dtype = "f32", shape = ["N"] }
        bias = { dtype = "f32", shape = ["N"] }
        a = { value = "3", dtype = "f32" }
        y = { dtype = "f32", shape = ["N"], role = "out", init = "none" }
        """)
    outcome = check_on_target(load_kernel(path), target, seed=2)
    assert outcome.result.ok, outcome.result.describe()
    np.testing.assert_allclose(outcome.outputs["y"], outcome.reference["y"], rtol=1e-6)


def test_a_defaulted_pointer_left_out_of_the_spec_is_null_on_the_original(tmp_path):
    from kir.backends.emulate import emulator_available

    if not emulator_available()[0]:
        pytest.skip("no host C++ compiler for the emulator")
    path = project(tmp_path, """\
        y = { dtype = "f32", shape = ["N"], role = "out", init = "none" }
        x = { dtype = "f32", shape = ["N"] }
        a = { value = "3", dtype = "f32" }
        n = { value = "N", dtype = "i32" }
        """)
    outcome = check_on_target(load_kernel(path), "emulate-original")
    assert outcome.result.ok, outcome.result.describe()


def test_a_spec_argument_that_names_no_parameter_is_located(tmp_path):
    path = project(tmp_path, """\
        y = { dtype = "f32", shape = ["N"], role = "out", init = "none" }
        xs = { dtype = "f32", shape = ["N"] }
        a = { value = "3", dtype = "f32" }
        n = { value = "N", dtype = "i32" }
        """)
    with pytest.raises(KirError) as info:
        load_kernel(path)
    error = info.value
    assert "argument 'xs' is not a parameter of kernel 'axpb'" in error.message
    assert error.loc.file.endswith("k.kir.toml") and error.loc.line == 7
    assert "did you mean 'x'" in (error.hint or "")


def test_without_the_include_folder_the_helper_is_unknown(tmp_path):
    path = project(tmp_path, """\
        y = { dtype = "f32", shape = ["N"], role = "out", init = "none" }
        x = { dtype = "f32", shape = ["N"] }
        a = { value = "3", dtype = "f32" }
        n = { value = "N", dtype = "i32" }
        """)
    spec = tmp_path / "k.kir.toml"
    spec.write_text(spec.read_text().replace('include = ["inc"]\n', ""))
    with pytest.raises(KirError, match="unknown function 'twice'") as info:
        load_kernel(path)
    assert info.value.loc.line == 6
    assert load_kernel(path, include_dirs=[tmp_path / "inc"]).kernel.name == "axpb"


@pytest.mark.parametrize("entry,message,key", [
    ("bias = { null = false }", "null must be true", "null"),
    ('bias = { null = true, shape = ["N"] }', "cannot have 'shape'", "shape"),
    ('bias = { null = true, role = "out" }', "cannot have 'role'", "role"),
])
def test_bad_null_arguments_are_located(tmp_path, entry, message, key):
    spec = tmp_path / "k.kir.toml"
    spec.write_text(HEAD + "[args]\n" + entry + "\n")
    with pytest.raises(KirError, match=message) as info:
        load_spec(spec)
    assert info.value.loc.line == 5
    assert info.value.loc.col == entry.index(key) + 1


def test_include_must_be_a_list_of_folders(tmp_path):
    spec = tmp_path / "k.kir.toml"
    spec.write_text(HEAD + "include = 3\n[args]\n")
    with pytest.raises(KirError, match="include must be a list") as info:
        load_spec(spec)
    assert info.value.loc.line == 4


def test_dtype_template_values(tmp_path):
    spec = tmp_path / "k.kir.toml"
    spec.write_text('sizes = { N = 4 }\ntemplates = { T = "f16", B = "N * 2" }\n'
                    'launch = { grid = [1], block = [4] }\n[args]\n')
    assert load_spec(spec).bind().template_values() == {"N": 4, "T": "f16", "B": 8}
