"""Less common math functions (``normcdff``, ``erfcf``, ``hypotf``, ``norm3df``, ``cbrtf``,
``sinpif``, ``exp10f``, ``asinhf``, ``lrintf``, ``ldexpf``, ``signbit``, ``fdimf`` ...) and
math.h's ``M_*`` constants against float64 numpy on every target, the original kernel on the
emulator included; the double forms and the edge cases of ``ldexp`` and ``fdim`` on the
interpreter."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from kir.frontends.cuda import load_cuda
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.driver.load import load_kernel
from kir.interp import run_kernel
from kir.ir import Launch

KERNEL = Path(__file__).parent / "data" / "math_more.cu"
ONE = Launch(("1", "1", "1"), (1, 1, 1), 0)


@pytest.mark.parametrize("target", TARGETS)
def test_math_functions_everywhere(target):
    check_everywhere(KERNEL, target, [{}, {"n": 70}], seed=6)


def _run(body: str, out_type: str, n_out: int) -> np.ndarray:
    source = f"#include <math.h>\n__global__ void k({out_type}* out) {{\n{body}\n}}\n"
    dtype = {"double": np.float64, "float": np.float32, "long long": np.int64,
             "int": np.int32}[out_type]
    kernel = load_cuda(source, "m.cu", launch=ONE)
    return run_kernel(kernel, {"out": np.zeros(n_out, dtype)})["out"]


def test_double_forms():
    out = _run("out[0] = hypot(3.0, 4.0); out[1] = ldexp(1.5, 600); out[2] = exp10(2.5);\n"
               "out[3] = signbit(-0.0) ? 1.0 : 0.0; out[4] = normcdf(1.0);\n"
               "out[5] = M_E * M_LN2 + M_SQRT2;", "double", 6)
    np.testing.assert_allclose(out, [5.0, 1.5 * 2.0 ** 600, 10 ** 2.5, 1.0,
                                     0.5 * math.erfc(-1 / math.sqrt(2)),
                                     math.e * math.log(2) + math.sqrt(2)], rtol=1e-12)


def test_ldexp_edges():
    """Exponents past one power of two's range, into subnormals, and saturating."""
    out = _run("out[0] = ldexpf(1.0f, 200 - 250); out[1] = ldexpf(0x1p-100f, 200);\n"
               "out[2] = ldexpf(1.0f, -140); out[3] = ldexpf(3.0f, 1000);\n"
               "out[4] = ldexpf(3.0f, -1000); out[5] = scalbnf(-0.75f, 3);", "float", 6)
    expected = np.array([2.0 ** -50, 2.0 ** 100, 2.0 ** -140, np.inf, 0.0, -6.0], np.float32)
    np.testing.assert_array_equal(out, expected)


def test_fdim_and_rounding_edges():
    out = _run("out[0] = fdimf(INFINITY, INFINITY); out[1] = fdimf(2.0f, 5.0f);\n"
               "out[2] = fdimf(NAN, 1.0f); out[3] = fdimf(5.0f, 2.0f);", "float", 4)
    assert out[0] == 0 and out[1] == 0 and math.isnan(out[2]) and out[3] == 3
    rounded = _run("out[0] = lrintf(2.5f); out[1] = lroundf(2.5f); out[2] = llroundf(-2.5f);\n"
                   "out[3] = llrintf(-3.5f); out[4] = lround(1e12);", "long long", 5)
    assert rounded.tolist() == [2, 3, -3, -4, 10 ** 12]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_emitted_cuda_compiles(tmp_path):
    from kir.backends import emit
    from tests.nvcc_build import nvcc_sm90

    loaded = load_kernel(KERNEL)
    nvcc_sm90(emit(loaded.kernel, loaded.bound, "cuda"), tmp_path, assemble=False)


HALF_MATH = """
#include <cuda_fp16.h>
__global__ void k(const half* x, half* y) {
    int i = threadIdx.x;
    half v = x[i];
    y[5 * i] = hrsqrt(v);
    y[5 * i + 1] = hlog(v) + hlog2(v);
    y[5 * i + 2] = hexp2(v) + hexp(v);
    y[5 * i + 3] = hfloor(v) + hceil(v) + htrunc(v) + hrint(v);
    y[5 * i + 4] = hsin(v) + hcos(v);
}
"""


def test_half_math_of_cuda_fp16():
    kernel = load_cuda(HALF_MATH, "h.cu", launch=Launch(("1", "1", "1"), (32, 1, 1), 0))
    x = np.linspace(0.3, 3.7, 32).astype(np.float16)
    got = run_kernel(kernel, {"x": x, "y": np.zeros(160, np.float16)}, {})["y"]
    v = x.astype(np.float64)
    want = np.stack([1 / np.sqrt(v), np.log(v) + np.log2(v), np.exp2(v) + np.exp(v),
                     np.floor(v) + np.ceil(v) + np.trunc(v) + np.rint(v),
                     np.sin(v) + np.cos(v)], axis=1).ravel()
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=3e-3, atol=3e-3)


CLAMPS = """\
#include <math_constants.h>
#include <algorithm>
__global__ void k(const float* x, float* out, unsigned* u, int n) {
    int i = threadIdx.x;
    out[i] = std::clamp(x[i] * CUDART_PI_F, -1.0f, 2.0f) + (float)CUDART_SQRT_2PI;
    u[i] = umin((unsigned)i, 5u) + umax(3u, (unsigned)n)
         + (unsigned)min(llmax(-4LL, (long long)i - 6), 9LL) + ullmin(7ull, 8ull);
}
"""


@pytest.mark.parametrize("target", ["interp", "emulate-original"])
def test_clamp_integer_min_max_and_math_constants(target, tmp_path):
    (tmp_path / "clamps.cu").write_text(CLAMPS)
    (tmp_path / "clamps.kir.toml").write_text(
        'kernel = "k"\nsizes = { N = 32 }\nlaunch = { grid = [1], block = [32] }\n'
        'reference = "clamps_ref:k"\n[args]\nx = { dtype = "f32", shape = ["N"] }\n'
        'out = { dtype = "f32", shape = ["N"], role = "out", init = "none" }\n'
        'u = { dtype = "u32", shape = ["N"], role = "out", init = "none" }\n'
        'n = { value = "N", dtype = "i32" }\n')
    (tmp_path / "clamps_ref.py").write_text(
        "import math\nimport numpy as np\n\n"
        "def k(args, sizes):\n"
        "    x = np.asarray(args['x'], np.float32) * np.float32(math.pi)\n"
        "    i = np.arange(32)\n"
        "    u = np.minimum(i, 5) + 32 + np.minimum(np.maximum(-4, i - 6), 9) + 7\n"
        "    return {'out': np.clip(x, -1, 2) + np.float32(math.sqrt(2 * math.pi)),\n"
        "            'u': u.astype(np.uint32)}\n")
    check_everywhere(tmp_path / "clamps.cu", target, [{}], seed=2)
