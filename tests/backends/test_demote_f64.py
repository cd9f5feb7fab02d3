"""Metal has no double: a float kernel's stray double arithmetic (``x * 0.5``, ``sqrt(x + 1.0)``
in C promotes to double) is computed in f32 on Metal and validated like everything else, so
a kernel whose doubles matter fails its check instead of passing silently; f64 data and the
bits of a double stay refused."""

from __future__ import annotations

import pytest
from kir.backends import emit
from kir.backends.emulate import emulator_available

from kir.driver.load import load_kernel
from kir.driver.runners import check_on_target
from kir.errors import UnsupportedError

SPEC = """kernel = "k"
sizes = {{ n = 1000 }}
launch = {{ grid = ["ceil(n / 128)"], block = [128] }}
[args]
x = {{ dtype = "{dtype}", shape = ["n"] }}
y = {{ dtype = "f32", shape = ["n"], role = "out" }}
n = {{ value = "n", dtype = "i32" }}
"""


def _kernel(tmp_path, body: str, dtype: str = "f32", x_type: str = "float"):
    (tmp_path / "k.cu").write_text(
        f"__global__ void k(const {x_type}* x, float* y, int n) {{\n"
        f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= n) return;\n"
        f"{body}\n}}\n")
    (tmp_path / "k.kir.toml").write_text(SPEC.format(dtype=dtype))
    return load_kernel(tmp_path / "k.cu")


def test_stray_doubles_are_floats_on_metal(tmp_path):
    loaded = _kernel(tmp_path, "    y[i] = x[i] * 0.5 + sqrt(x[i] * x[i] + 1.0);")
    source = emit(loaded.kernel, loaded.bound, "metal").source
    assert "double" not in source and "0.5f" in source
    assert "double" in emit(loaded.kernel, loaded.bound, "cuda").source  # CUDA keeps them
    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    assert check_on_target(loaded, "emulate-metal", seed=1).result.ok


def test_a_double_accumulator_that_matters_fails_its_check(tmp_path):
    """1e8 plus small terms in f32 loses them all: the check reports it."""
    if not emulator_available():
        pytest.skip("no host C++ compiler for the emulator")
    loaded = _kernel(tmp_path, "    double acc = 1e8;\n"
                               "    for (int k = 0; k < 64; ++k) acc += x[(i + k) % n];\n"
                               "    y[i] = (float)(acc - 1e8);")
    assert check_on_target(loaded, "interp", seed=1).result.ok
    assert not check_on_target(loaded, "emulate-metal", seed=1).result.ok


def test_double_data_and_bits_stay_refused(tmp_path):
    loaded = _kernel(tmp_path, "    y[i] = (float)x[i];", dtype="f64", x_type="double")
    with pytest.raises(UnsupportedError, match="parameter 'x' is f64"):
        emit(loaded.kernel, loaded.bound, "metal")
    bits = _kernel(tmp_path, "    y[i] = (float)(__double_as_longlong((double)x[i]) >> 40);")
    with pytest.raises(UnsupportedError, match="reads the bits of a double"):
        emit(bits.kernel, bits.bound, "metal")


def test_the_bits_of_a_double_on_cuda(tmp_path):
    """``__double_as_longlong`` / ``__longlong_as_double`` (CUDA's 64-bit bit views)."""
    loaded = _kernel(tmp_path, "    double d = __longlong_as_double(__double_as_longlong(\n"
                               "        (double)x[i] * 3.0) + 1);\n    y[i] = (float)d;")
    for target in ("interp", "emulate-cuda", "emulate-original"):
        if target != "interp" and not emulator_available():
            pytest.skip("no host C++ compiler for the emulator")
        assert check_on_target(loaded, target, seed=1).result.ok, target
