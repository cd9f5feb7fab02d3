"""What one kernel's lowering reads of its file: only the functions and types it reaches (a
helper kir cannot read refuses only the kernels that call it, at the helper's own line),
``__launch_bounds__`` in every position, macro-generated kernel families instance by
instance, and user headers from the source's folder or include folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from kir.frontends.cuda import list_kernels, load_cuda

from kir.errors import KirError

NEIGHBOURS = """\
#include <cuda_bf16.h>
struct Pair { float a; float b; };
__device__ Pair make(float v) { return {v, 2.0f * v}; }
__device__ float uses_operator(float v) { return operator+(v, v); }
#ifdef ENABLE_BF16
__device__ float to_f(__nv_bfloat162 v) { return __low2float(v); }
#endif
__device__ float bad_asm(float v) { asm volatile("" ::: "memory"); return v; }
__global__ void plain(float* x) { x[threadIdx.x] = 1.0f; }
__global__ void uses_struct(float* x) { Pair p = make(x[0]); x[1] = p.b; }
__global__ void uses_broken(float* x) { x[0] = uses_operator(x[0]); }
__global__ void uses_asm(float* x) { x[0] = bad_asm(x[0]); }
"""


@pytest.mark.parametrize("kernel", ["plain", "uses_struct"])
def test_unreadable_helpers_refuse_no_kernel_that_does_not_call_them(kernel):
    assert load_cuda(NEIGHBOURS, "n.cu", kernel=kernel).name == kernel


@pytest.mark.parametrize("kernel,line,what", [
    ("uses_broken", 4, "operator overloading"),
    ("uses_asm", 8, "inline assembly"),
])
def test_a_kernel_calling_an_unreadable_helper_is_refused_at_the_helper(kernel, line, what):
    with pytest.raises(KirError, match=what) as info:
        load_cuda(NEIGHBOURS, "n.cu", kernel=kernel)
    assert info.value.loc.line == line


@pytest.mark.parametrize("head", [
    "__global__ void __launch_bounds__(256) k",
    "__global__ void __launch_bounds__(256, 2) k",
    "__global__ __launch_bounds__(128) void k",
    "__global__ void __launch_bounds__(((128) > (4) ? (128) : (4))) k",
    "template <int B> __global__ void __launch_bounds__(B * (2)) k",
    "static __global__ void __launch_bounds__(MAX_THREADS, MIN_BLOCKS)\nk",
])
def test_launch_bounds_never_hide_the_kernel(head):
    src = f"#define MAX_THREADS 256\n#define MIN_BLOCKS 2\n{head}(float* x) {{ x[0] = 1.0f; }}\n"
    assert list_kernels(src, "lb.cu") == ["k"]
    assert load_cuda(src, "lb.cu", template_values={"B": 4}).name == "k"


FAMILY = """\
#include <stdint.h>
#define SCALE(NAME, T) \\
    __global__ void NAME(const T* x, T* y, int n) { \\
        int i = threadIdx.x; if (i < n) y[i] = x[i] * (T)2; }
SCALE(scale_f32, float)
SCALE(scale_u8, uint8_t)
SCALE(scale_h2, half2)
SCALE(scale_i16, int16_t)
SCALE(scale_bf, bfloat16)
"""


def test_a_macro_family_lowers_instance_by_instance():
    assert list_kernels(FAMILY, "f.cu") == ["scale_f32", "scale_u8", "scale_h2", "scale_i16",
                                            "scale_bf"]
    for name in ("scale_f32", "scale_u8", "scale_i16"):
        assert load_cuda(FAMILY, "f.cu", kernel=name).name == name
    for name, line, what in (("scale_h2", 7, "half2"), ("scale_bf", 9, "bfloat16")):
        with pytest.raises(KirError, match=what) as info:
            load_cuda(FAMILY, "f.cu", kernel=name)
        assert info.value.loc.line == line  # the instance's own line, the macro's use


def _project(tmp_path: Path) -> Path:
    (tmp_path / "common.h").write_text(
        "#pragma once\n#define SCALE 3.0f\n"
        "__device__ inline float scaled(float v) { return SCALE * v; }\n"
        "__device__ inline float broken(float v) { return v +; }\n")
    (tmp_path / "first.h").write_text("#define FIRST 1\n")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "more.h").write_text(
        "__device__ inline float more(float v) { return scaled(v) + FIRST; }\n")
    (tmp_path / "inc" / "first.h").write_text("#error the source's folder comes first\n")
    path = tmp_path / "k.cu"
    path.write_text('#include "common.h"\n#include "first.h"\n#include "more.h"\n'
                    '#include "common.h"\n#include <torch/extension.h>\n'
                    "__global__ void ok(float* x) { x[0] = more(x[0]) + SCALE; }\n"
                    "__global__ void bad(float* x) { x[0] = broken(x[0]); }\n")
    return path


def test_headers_beside_the_source_and_in_include_folders_are_read(tmp_path):
    path = _project(tmp_path)
    text = path.read_text()
    kernel = load_cuda(text, str(path), kernel="ok", include_dirs=[tmp_path / "inc"])
    assert kernel.body.stmts[-1].loc.line == 6  # lines of the source keep their numbers
    with pytest.raises(KirError, match="unknown function 'more'"):
        load_cuda(text, str(path), kernel="ok")  # more.h is only under inc/


def test_an_error_in_a_header_points_into_the_header(tmp_path):
    path = _project(tmp_path)
    with pytest.raises(KirError) as info:
        load_cuda(path.read_text(), str(path), kernel="bad", include_dirs=[tmp_path / "inc"])
    error = info.value
    assert error.loc.file == str(tmp_path / "common.h")
    assert (error.loc.line, error.loc.col) == (4, 53)
    assert "return v +;" in str(error)  # the header's own line under the caret


def test_an_include_cycle_without_guards_stops(tmp_path):
    (tmp_path / "a.h").write_text('#include "b.h"\n#define A 1\n')
    (tmp_path / "b.h").write_text('#include "a.h"\n#define B 2\n')
    path = tmp_path / "k.cu"
    path.write_text('#include "a.h"\n__global__ void k(int* x) { x[0] = A + B; }\n')
    kernel = load_cuda(path.read_text(), str(path))
    assert kernel.body.stmts[0].value.value == 3
