"""PyTorch's names in device code: ``at::acc_type<scalar_t, true>`` and
``at::opmath_type<scalar_t>`` accumulate half in float (as ATen defines them for CUDA; a sum
of 3000 halves of 1 in half precision would stop at 2048), ``c10::Half`` / ``at::BFloat16``
are kir's f16 / bf16, and a file defining its own ``acc_type`` is read as written. An
extension's kernel file (``data/torch_acc.cu``) runs on every target, the original through
the emulator's stand-ins for torch's headers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.frontend.everywhere import TARGETS, check_everywhere

from kir.errors import KirError
from kir.frontends.cuda import load_cuda
from kir.interp import run_kernel
from kir.ir import Launch
from kir.ir.printer import print_kernel

@pytest.mark.parametrize("target", TARGETS)
def test_an_extension_kernel_on_every_target(target):
    check_everywhere(Path(__file__).parent / "data" / "torch_acc.cu", target,
                     [{}, {"R": 2, "C": 77}], seed=8)


SUM = """\
template <typename scalar_t>
__global__ void row_sum(const scalar_t* __restrict__ x, float* __restrict__ out, int n) {
    using acc_t = %s;
    acc_t total = acc_t(0);
    for (int i = 0; i < n; ++i) total += static_cast<acc_t>(x[i]);
    out[0] = static_cast<float>(total);
}
"""


def _sum(acc: str, scalar: str = "f16", source: str = SUM) -> float:
    kernel = load_cuda(source % acc, "sum.cu", template_values={"scalar_t": scalar},
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    dtype = {"f16": np.float16, "f32": np.float32, "f64": np.float64}[scalar]
    args = {"x": np.ones(3000, dtype), "out": np.zeros(1, np.float32), "n": 3000}
    return float(run_kernel(kernel, args, {})["out"][0])


@pytest.mark.parametrize("acc", ["at::acc_type<scalar_t, true>", "at::opmath_type<scalar_t>",
                                 "at::acc_type<scalar_t, /*is_cuda=*/true>"])
def test_half_accumulates_in_float(acc):
    assert _sum(acc) == 3000.0
    assert _sum("scalar_t") == 2048.0  # what half accumulation gives: the test can tell


@pytest.mark.parametrize("scalar, acc, expected", [
    ("f32", "at::acc_type<scalar_t, true>", "f32"),
    ("f32", "at::acc_type<scalar_t, false>", "f64"),  # the CPU's
    ("f64", "at::opmath_type<scalar_t>", "f64"),
])
def test_the_accumulation_type_of_other_elements(scalar, acc, expected):
    kernel = load_cuda(SUM % acc, "sum.cu", template_values={"scalar_t": scalar},
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    assert f"let total: {expected} =" in print_kernel(kernel)


def test_pytorch_half_names_are_kirs_half_types():
    source = ("__global__ void k(const c10::Half* a, const at::BFloat16* b, at::Half* c) {\n"
              "    int i = threadIdx.x;\n"
              "    c[i] = (at::Half)((float)a[i] * (float)b[i]);\n}\n")
    kernel = load_cuda(source, "k.cu", launch=Launch(("1", "1", "1"), (4, 1, 1), 0))
    assert [str(p.type.elem) for p in kernel.params] == ["f16", "bf16", "f16"]


def test_a_file_defining_its_own_acc_type_is_read_as_written():
    own = ("namespace at {\ntemplate <typename T, bool is_cuda> struct acc_type;\n"
           "template <> struct acc_type<__half, true> { using type = __half; };\n}\n")
    kernel_text = own + SUM.replace("using acc_t = %s;",
                                    "using acc_t = typename at::acc_type<scalar_t, true>::type;")
    kernel = load_cuda(kernel_text.replace("%", "%%") % (), "sum.cu",
                       template_values={"scalar_t": "f16"},
                       launch=Launch(("1", "1", "1"), (1, 1, 1), 0))
    assert "let total: f16 =" in print_kernel(kernel)


def test_a_malformed_accumulation_type_is_refused_where_it_is_written():
    with pytest.raises(KirError, match="takes a scalar type and is_cuda") as info:
        _sum("at::acc_type<scalar_t>")
    assert info.value.loc.line == 3
