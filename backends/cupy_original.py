"""The user's original ``.cu`` kernel on an NVIDIA GPU, compiled by NVRTC through CuPy
(``cupy.RawModule``): the independent check of kir's emitted CUDA on the GPU.

The file is prepared as :mod:`kir.backends.original_source` describes. NVRTC has CUDA's
device headers (``cuda_fp16.h``, ``cooperative_groups.h``, ``cuda/std/...``) but no host C++
library, so the standard headers a kernel includes become comments and a short prelude gives
the few names kernels take from them (``std::min``, ``std::numeric_limits``, ``uintptr_t``,
``M_PI``, ``FLT_MAX``, ``INFINITY``; ``assert`` is dropped, as in release builds). The kernel
is looked up by its C++ name expression (namespace and template arguments), so ``extern
"C"`` is not needed. Arguments come in the kernel's parameter order: arrays, numbers typed by
the parameter's dtype, None for a null pointer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from kir.errors import UnsupportedError
from kir.backends.original_source import expand_source, qualified_name

#: Headers NVRTC provides (the rest are commented out).
NVRTC_HEADERS = frozenset({
    "cuda_fp16.h", "cuda_bf16.h", "cooperative_groups.h", "cooperative_groups/reduce.h",
    "cooperative_groups/scan.h", "cooperative_groups/memcpy_async.h", "mma.h",
    "cuda_pipeline.h", "cuda_awbarrier.h",
})
PRELUDE = """// kir: NVRTC has no host C++ library; what kernels take from it
#include <cuda/std/cstdint>
#include <cuda/std/limits>
#include <cuda/std/cmath>
#include <cuda/std/utility>
namespace kir_nvrtc {
template <class T> __device__ __forceinline__ T min(T a, T b) { return b < a ? b : a; }
template <class T> __device__ __forceinline__ T max(T a, T b) { return a < b ? b : a; }
template <class T> __device__ __forceinline__ void swap(T& a, T& b) { T t = a; a = b; b = t; }
}
namespace std { using namespace cuda::std; using kir_nvrtc::min; using kir_nvrtc::max;
                using kir_nvrtc::swap; }
typedef cuda::std::int8_t int8_t; typedef cuda::std::uint8_t uint8_t;
typedef cuda::std::int16_t int16_t; typedef cuda::std::uint16_t uint16_t;
typedef cuda::std::int32_t int32_t; typedef cuda::std::uint32_t uint32_t;
typedef cuda::std::int64_t int64_t; typedef cuda::std::uint64_t uint64_t;
typedef cuda::std::uintptr_t uintptr_t; typedef cuda::std::intptr_t intptr_t;
typedef unsigned int uint;
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef M_SQRT1_2
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38f
#endif
#ifndef FLT_MIN
#define FLT_MIN 1.175494351e-38f
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef assert
#define assert(e) ((void)0)
#endif
"""
# The NVRTC on the H200 machine refuses --expt-relaxed-constexpr ("unrecognized option"),
# which would let kernels call host-only constexpr helpers as nvcc users build them.
OPTIONS = ("-std=c++17",)
_DTYPES = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32,
           "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "bool": np.bool_}


def _keep(name: str) -> bool:
    return name in NVRTC_HEADERS or name.startswith("cuda/std/")


def nvrtc_source(cu_source: str, kernel_name: str, filename: str = "kernel.cu",
                 include_dirs: Sequence[str | Path] = ()) -> str:
    """The text NVRTC compiles for ``kernel_name`` of the user's file."""
    body = expand_source(cu_source, filename, include_dirs, kernel=kernel_name, keep=_keep)
    return PRELUDE + f'#line 1 "{filename}"\n' + body


def name_expression(cu_source: str, kernel_name: str, template_args: Sequence[str]) -> str:
    """``ns::kernel<args>``: how NVRTC names the instance to launch."""
    expr = qualified_name(cu_source, kernel_name)
    if template_args:
        expr += "<" + ", ".join(template_args) + ">"
    return expr


def run_original_cupy(cu_source: str, kernel_name: str, args: Sequence[Any],
                      dtypes: Sequence[str | None], grid: Sequence[int], block: Sequence[int],
                      shared_bytes: int = 0, template_args: Sequence[str] = (), *,
                      filename: str = "kernel.cu",
                      include_dirs: Sequence[str | Path] = ()) -> list[np.ndarray | None]:
    """Compile and launch the original kernel; ``args`` in parameter order (arrays, numbers,
    None for a null pointer), ``dtypes`` each scalar's kir dtype. Returns each array
    argument's final contents, None for the others."""
    import cupy as cp

    expr = name_expression(cu_source, kernel_name, template_args)
    module = cp.RawModule(code=nvrtc_source(cu_source, kernel_name, filename, include_dirs),
                          options=OPTIONS, name_expressions=[expr])
    try:
        function = module.get_function(expr)
    except cp.cuda.compiler.CompileException as exc:  # the file's own C++, as NVRTC reads it
        raise UnsupportedError(f"NVRTC cannot compile the original {kernel_name}: "
                               f"{str(exc).strip()[:1500]}",
                               hint="the original kernel runs through CuPy's NVRTC, which "
                                    "lacks host headers; check it with --target "
                                    "emulate-original") from None
    device, launch_args = [], []
    for value, dtype in zip(args, dtypes):
        if value is None:
            launch_args.append(np.uint64(0))  # a null pointer
            device.append(None)
        elif isinstance(value, np.ndarray):
            array = cp.asarray(value)
            launch_args.append(array)
            device.append(array)
        else:
            launch_args.append(_DTYPES[dtype or ("f32" if isinstance(value, float) else "i32")](
                value))
            device.append(None)
    function(tuple(grid), tuple(block), tuple(launch_args), shared_mem=shared_bytes)
    cp.cuda.Device().synchronize()
    return [cp.asnumpy(d) if d is not None else None for d in device]
