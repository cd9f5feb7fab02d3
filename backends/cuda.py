"""The CUDA dialect for MLX's ``mx.fast.cuda_kernel``, and the full source MLX would build.

MLX's CUDA back end writes ``__global__ void custom_kernel_<name>(const T* in..., T* out...)``
inside ``namespace mlx::core::cu`` after a default header that defines ``inf`` as a macro.
Every input, 0-d ones included, arrives as a ``const T*`` pointer, so a scalar parameter is
read as ``name[0]``. The launch takes a grid in threads and runs ceil(grid/threadgroup)
blocks with ``shared_memory`` dynamic bytes.
"""

from __future__ import annotations

from typing import Iterable

from kir.backends.cstyle import BufferInfo, Dialect, Printer
from kir.backends.matrix_emit import (CUDA_HELPER, CUDA_TF32_HELPER, CUDA_TF32X3_HELPER,
                                      cuda_matrix, cuda_products)

from kir import ir
from kir.errors import UnsupportedError
from kir.ir.types import ScalarType
from kir.target import Target

MLX_CUDA_TYPES = {"bool": "bool", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t",
                  "u16": "uint16_t", "i32": "int32_t",
                  "u32": "uint32_t", "i64": "int64_t",
                  "u64": "uint64_t", "f16": "__half", "bf16": "__nv_bfloat16", "f32": "float",
                  "f64": "double"}

_F32 = {"exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f", "sqrt": "sqrtf",
        "rsqrt": "rsqrtf", "max": "fmaxf", "min": "fminf", "abs": "fabsf", "tanh": "tanhf",
        "pow": "powf", "erf": "erff", "fma": "fmaf", "sin": "sinf", "cos": "cosf",
        "tan": "tanf", "asin": "asinf", "acos": "acosf", "atan": "atanf", "atan2": "atan2f",
        "log10": "log10f", "fmod": "fmodf", "copysign": "copysignf", "isnan": "isnan",
        "isinf": "isinf",
        "floor": "floorf", "ceil": "ceilf", "round": "roundf", "rint": "rintf",
        "trunc": "truncf", "exp10": "exp10f", "sinpi": "sinpif", "cospi": "cospif",
        "asinh": "asinhf", "acosh": "acoshf", "atanh": "atanhf", "hypot": "hypotf",
        "cbrt": "cbrtf", "erfc": "erfcf"}
_F32_FAST = {"exp": "__expf", "log": "__logf", "log2": "__log2f", "pow": "__powf",
             "exp10": "__exp10f", "tan": "__tanf", "log10": "__log10f",
             "sin": "__sinf", "cos": "__cosf"}


# an integer's bits, by width: CUDA's intrinsics (the count of trailing zeros: a helper)
_BITS = {("popcount", 4): "__popc", ("popcount", 8): "__popcll", ("clz", 4): "__clz",
         ("clz", 8): "__clzll", ("ctz", 4): "kir_ctz", ("ctz", 8): "kir_ctzll"}


def _math(fn: str, t: ScalarType, fast: bool) -> str:
    if t.is_int:
        if fn in ("max", "min", "abs"):
            return fn if fn != "abs" or t.is_signed else ""
        if (fn, t.nbytes) in _BITS:
            return _BITS[(fn, t.nbytes)]
        raise UnsupportedError(f"CUDA: no integer {fn}")
    if t.name == "f64":
        return {"abs": "fabs", "max": "fmax", "min": "fmin"}.get(fn, fn)
    if fn == "fma" and t.name in ("f16", "bf16"):
        return "__hfma"  # one rounding to the half type (f32's fmaf, then a second rounding)
    name = (_F32_FAST.get(fn) if fast else None) or _F32[fn]
    if t.name in ("f16", "bf16"):
        return "(float)" + name     # computed in f32 (see Printer._call)
    return name


def _bit_view(src: ScalarType, dst: ScalarType, name: str, value: str) -> str:
    """CUDA's intrinsic reading a 32-bit value's bits as another type (a plain conversion
    between two integers of one width keeps the bits)."""
    if src.is_int and dst.is_int:
        return f"(({name})({value}))"
    named = {("i32", "f32"): "__int_as_float", ("u32", "f32"): "__uint_as_float",
             ("f32", "i32"): "__float_as_int", ("f32", "u32"): "__float_as_uint",
             ("i64", "f64"): "__longlong_as_double", ("f64", "i64"): "__double_as_longlong",
             ("i16", "f16"): "__short_as_half", ("u16", "f16"): "__ushort_as_half",
             ("u16", "bf16"): "__ushort_as_bfloat16"}
    if src.name in ("f16", "bf16") and dst.is_int:  # through a 32-bit register (HELPERS)
        helper = "kir_half_bits" if src.name == "f16" else "kir_bfloat16_bits"
        return f"(({name}){helper}({value}))"
    if (src.name, dst.name) not in named:
        raise UnsupportedError(f"CUDA: no bit view from {src} to {dst}")
    return f"{named[(src.name, dst.name)]}({value})"


def _atomic(p: Printer, a: ir.Atomic, info: BufferInfo, index: str, value: str) -> str:
    ptr = f"&{p.element(a.buffer, index)}"
    elem = info.elem
    if not isinstance(elem, ScalarType):
        raise UnsupportedError(f"atomic on vector buffer {a.buffer!r}", a.loc)
    if a.op == "add":
        return f"atomicAdd({ptr}, {value})"
    if a.op == "exch":
        return f"atomicExch({ptr}, {value})"
    if a.op == "inc":
        if elem.name != "u32":
            raise UnsupportedError(f"CUDA atomicInc on {elem} (it takes unsigned int)", a.loc)
        return f"atomicInc({ptr}, {value})"
    if elem.name == "f32":
        p.helpers.add(f"atomic_{a.op}_float")
        return f"kir_atomic_{a.op}({ptr}, {value})"
    if elem.name in ("i32", "u32", "i64", "u64"):
        return f"atomic{a.op.capitalize()}({ptr}, {value})"
    raise UnsupportedError(f"CUDA atomic {a.op} on {elem}", a.loc)


CUDA = Dialect(
    name="cuda",
    scalar_types={"bool": "bool", "i8": "signed char", "u8": "unsigned char", "i16": "short",
                  "u16": "unsigned short", "i32": "int",
                  "u32": "unsigned int", "i64": "long long",
                  "u64": "unsigned long long", "f16": "__half", "bf16": "__nv_bfloat16",
                  "f32": "float", "f64": "double"},
    vector_elems={"f32": "float", "i32": "int", "u32": "uint", "f64": "double", "i8": "char",
                  "u8": "uchar", "i16": "short", "u16": "ushort", "f16": "half"},
    make_vector="make_{type}({elems})",
    vector_names={"f16x4": "kir_half4", "bf16x4": "kir_bfloat164", "bf16x2": "kir_bfloat162"},
    shared_qualifier="__shared__",
    aligned_array="{qual}__align__(16) {elem} {name}[{size}]",
    local_qualifier="",
    barrier_block="__syncthreads()",
    barrier_block_device="__syncthreads()",
    barrier_warp="__syncwarp()",
    fences={"device": "__threadfence()", "block": "__threadfence_block()"},
    specials={
        "thread.x": "threadIdx.x", "thread.y": "threadIdx.y", "thread.z": "threadIdx.z",
        "block.x": "blockIdx.x", "block.y": "blockIdx.y", "block.z": "blockIdx.z",
        "block_dim.x": "blockDim.x", "block_dim.y": "blockDim.y", "block_dim.z": "blockDim.z",
        "grid_dim.x": "gridDim.x", "grid_dim.y": "gridDim.y", "grid_dim.z": "gridDim.z",
        "lane": "kir_lane()", "warp": "kir_warp()", "warp_size": "32u",
    },
    shuffles={"xor": "__shfl_xor_sync(0xffffffffu, {value}, {lane}, {width})",
              "down": "__shfl_down_sync(0xffffffffu, {value}, {lane}, {width})",
              "up": "__shfl_up_sync(0xffffffffu, {value}, {lane}, {width})",
              "idx": "__shfl_sync(0xffffffffu, {value}, {lane}, {width})"},
    warp_reduces={"sum": "kir_warp_sum({value})", "max": "kir_warp_max({value})",
                  "min": "kir_warp_min({value})"},
    # MLX passes scalars as device pointers (`const int32_t* n`) that nothing marks as
    # unaliased, so a read of n[0] after any store is a fresh global load: in a loop that
    # stores to shared memory each load then waits for the store before it (a tile-loading
    # loop of a GEMM ran ~10x slower). Each scalar is read once, into a local.
    scalar_param="kir_arg_{name}",
    scalar_copy="const {type} kir_arg_{name} = {name}[0];",
    vector_pointer="*(({space}{type}*)({buffer} + {index}))",
    # MLX's header makes `inf` a macro; bit patterns need no header at all.
    infinity="__int_as_float(0x7f800000)",
    nan="__int_as_float(0x7fffffff)",
    math=_math,
    bit_view=_bit_view,
    atomic=_atomic,
    atomic_load=None,
    atomic_store=None,
    cast_vector="{type}({value})",
    keywords=frozenset({
        "inf", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "cg", "mlx",
        "max", "min", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "pow",
        "fma", "sin", "cos", "floor", "ceil", "erf", "signed", "unsigned", "short", "long",
        "half", "uint", "Shape", "Strides", "round", "rint", "trunc", "char", "tan", "asin",
        "acos", "atan", "atan2", "log10", "fmod", "copysign", "isnan", "isinf", "exp10",
        "sinpi", "cospi", "asinh", "acosh", "atanh", "hypot", "cbrt", "erfc"}),
    half_suffix="",
    int_suffixes={"u32": "u", "i64": "ll", "u64": "ull"},
    bare_special_floats=frozenset({"f32", "f64"}),
    matrix=cuda_matrix,
    matrix_products=cuda_products,
    async_copy="kir_copy_async<{bytes}>({dst}, {src})",
    async_commit="kir_copy_commit()",
    async_wait="kir_copy_wait<{pending}>()",
    async_helper="async_copy",
)

# A 16-bit float's bits, widened in a 32-bit register the compiler must keep: NVRTC for
# sm_90 (MLX 0.30.1's CUDA back end on the H200) stored the low byte of a half's bits kept in
# a 16-bit register as 0 (a block's half scale split into bytes came out with its low byte
# lost; with the value forced through a 32-bit register, or a printf of it, it was right).
_SIXTEEN_BITS = """__device__ __forceinline__ unsigned int {name}({type} h) {{
    unsigned int bits = {view}(h);
#ifdef __CUDA_ARCH__
    asm volatile("" : "+r"(bits));
#endif
    return bits;
}}"""

# kir type -> (the unsigned type of its width, expression of v's bits, the value from bits
# b): one kir_xor_<type> per type an encoded output may have (backends.emitted), in MLX's
# names of the types (int64_t is long, not long long, on Linux).
_XOR_TYPES = {
    "f32": ("unsigned int", "__float_as_uint(v)", "__uint_as_float({b})"),
    "i32": ("unsigned int", "(unsigned int)v", "(int32_t)({b})"),
    "u32": ("unsigned int", "v", "{b}"),
    "f16": ("unsigned short", "__half_as_ushort(v)", "__ushort_as_half({b})"),
    "bf16": ("unsigned short", "__bfloat16_as_ushort(v)", "__ushort_as_bfloat16({b})"),
    "i16": ("unsigned short", "(unsigned short)v", "(int16_t)({b})"),
    "u16": ("unsigned short", "v", "{b}"),
    "f64": ("uint64_t", "__double_as_longlong(v)", "__longlong_as_double((long long)({b}))"),
    "i64": ("uint64_t", "(uint64_t)v", "(int64_t)({b})"),
    "u64": ("uint64_t", "v", "{b}"),
}
XOR_HELPERS = {
    f"xor_{k}": f"__device__ __forceinline__ {MLX_CUDA_TYPES[k]} "
                f"kir_xor_{k}({MLX_CUDA_TYPES[k]} v, {u} key) {{\n"
                f"    return {back.format(b=f'({u})({bits} ^ key)')};\n}}"
    for k, (u, bits, back) in _XOR_TYPES.items()}

HELPERS = {
    "kir_half_bits": _SIXTEEN_BITS.format(name="kir_half_bits", type="__half",
                                          view="__half_as_ushort"),
    "kir_bfloat16_bits": _SIXTEEN_BITS.format(name="kir_bfloat16_bits", type="__nv_bfloat16",
                                              view="__bfloat16_as_ushort"),
    "kir_ctz": """__device__ __forceinline__ unsigned int kir_ctz(unsigned int x) {
    return x ? (unsigned int)(__ffs((int)x) - 1) : 32u;
}""",
    "kir_ctzll": """__device__ __forceinline__ unsigned long long kir_ctzll(unsigned long long x) {
    return x ? (unsigned long long)(__ffsll((long long)x) - 1) : 64ull;
}""",
    "lane": """__device__ __forceinline__ unsigned int kir_lane() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
}""",
    "warp": """__device__ __forceinline__ unsigned int kir_warp() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) >> 5;
}""",
    **XOR_HELPERS,
    "atomic_max_float": """__device__ __forceinline__ float kir_atomic_max(float* p, float v) {
    int* bits = (int*)p;
    int old = *bits;
    while (__int_as_float(old) < v) {
        int seen = atomicCAS(bits, old, __float_as_int(v));
        if (seen == old) break;
        old = seen;
    }
    return __int_as_float(old);
}""",
    "atomic_min_float": """__device__ __forceinline__ float kir_atomic_min(float* p, float v) {
    int* bits = (int*)p;
    int old = *bits;
    while (__int_as_float(old) > v) {
        int seen = atomicCAS(bits, old, __float_as_int(v));
        if (seen == old) break;
        old = seen;
    }
    return __int_as_float(old);
}""",
    # Warp reductions as a shuffle butterfly: every lane ends with the result, as simd_sum.
    **{f"warp_{op}": f"""template <typename T> __device__ __forceinline__ T kir_warp_{op}(T v) {{
    for (int offset = 16; offset > 0; offset >>= 1) {{
        T other = __shfl_xor_sync(0xffffffffu, v, offset);
        v = {expr};
    }}
    return v;
}}""" for op, expr in (("sum", "v + other"), ("max", "other > v ? other : v"),
                       ("min", "other < v ? other : v"))},
    # 8-byte vectors of halves and bfloat16s (CUDA's headers stop at two), and a pair of
    # bfloat16s with the members kir prints (x, y) and a make_ function: the loads and
    # stores of 16-bit packs, each lane a member as in float4
    **{name: f"""struct __align__({2 * len(lanes)}) {name} {{ {elem} {", ".join(lanes)}; }};
__device__ __forceinline__ {name} make_{name}({", ".join(f"{elem} {c}" for c in lanes)}) {{
    {name} v; {" ".join(f"v.{c} = {c};" for c in lanes)} return v;
}}""" for name, elem, lanes in (("kir_half4", "__half", "xyzw"),
                                ("kir_bfloat164", "__nv_bfloat16", "xyzw"),
                                ("kir_bfloat162", "__nv_bfloat16", "xy"))},
    "vector_ops": "\n".join(
        f"__device__ __forceinline__ {t}{n} operator{op}({t}{n} a, {t}{n} b) {{ "
        f"return make_{t}{n}({', '.join(f'a.{c} {op} b.{c}' for c in 'xyzw'[:n])}); }}"
        for t in ("float", "int") for n in (2, 4) for op in "+-*/"),
}

# cp.async (PTX ISA, "Data Movement and Conversion Instructions: cp.async", sm_80+): 16 bytes
# bypass L1 (.cg, the only size it takes), 4 and 8 go through it (.ca). The "memory" clobbers
# keep the compiler from moving shared-memory accesses across a commit or wait. Elsewhere
# (older GPUs, the C++ emulator) the copy is a plain one, which the asynchronous one allows.
HELPERS["async_copy"] = """template <int Bytes>
__device__ __forceinline__ void kir_copy_async(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned int at = (unsigned int)__cvta_generic_to_shared(dst);
    if (Bytes == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(at), "l"(src) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(at), "l"(src), "n"(Bytes)
                     : "memory");
#else
    __builtin_memcpy(dst, src, Bytes);
#endif
}
__device__ __forceinline__ void kir_copy_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int Pending> __device__ __forceinline__ void kir_copy_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" :: "n"(Pending) : "memory");
#endif
}"""

# After "lane": the fragment helpers call kir_lane(); the TF32 ones use kir_frag8x8.
HELPERS["matrix"] = CUDA_HELPER
HELPERS["matrix_tf32"] = CUDA_TF32_HELPER
HELPERS["matrix_tf32x3"] = CUDA_TF32X3_HELPER

def _input_space(shape: tuple[int, ...]) -> str:
    return "const "


# NVIDIA GPUs through MLX: 1024 threads per block, 48 KiB of static shared memory and up to
# 227 KiB with the dynamic part (compute capability 9.0), warps of 32.
CUDA_TARGET = Target(
    name="cuda", title="CUDA", group_word="block", max_threads=1024, max_shared_bytes=227 * 1024,
    max_static_shared_bytes=48 * 1024, warp_size=32, supports_f64=True, dynamic_shared=True,
    narrow_shuffles=True, whole_warp_exchanges=True, input_space=_input_space,
    output_space="", shared_space="", local_space="", typed_atomics=False, tf32_matrix=True, dialect=CUDA,
    helpers=HELPERS)

# What MLX puts before the header (mlx/backend/cuda/custom_kernel.cpp); for compiling the
# full source outside MLX, STANDALONE_PRELUDE stands in for its utils.cuh include.
STANDALONE_PRELUDE = """#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cuda/std/limits>

#define inf cuda::std::numeric_limits<float>::infinity()
"""


def mlx_parameters(inputs: Iterable[tuple[str, str]], outputs: Iterable[tuple[str, str]]
                   ) -> list[str]:
    """The parameter lines MLX writes for a custom kernel: each input (name, kir dtype) as
    ``const T*``, each output as ``T*``."""
    return [f"    const {MLX_CUDA_TYPES[dtype]}* {arg}" for arg, dtype in inputs] + \
        [f"    {MLX_CUDA_TYPES[dtype]}* {arg}" for arg, dtype in outputs]


def cuda_signature(name: str, inputs: list[tuple[str, str, tuple[int, ...]]],
                   outputs: list[tuple[str, str]], body: str, header: str,
                   template: list[tuple[str, object]] | None = None,
                   prelude: str = STANDALONE_PRELUDE) -> str:
    """The translation unit MLX builds around ``body`` (``build_kernel`` in MLX's CUDA
    custom_kernel.cpp): ``inputs`` as (name, kir dtype, shape), ``outputs`` (name, dtype)."""
    params = mlx_parameters([(arg, dtype) for arg, dtype, _ in inputs], outputs)
    consts = []
    for tname, value in template or []:
        if isinstance(value, bool):
            consts.append(f"  constexpr bool {tname} = {'true' if value else 'false'};")
        elif isinstance(value, int):
            consts.append(f"  constexpr int {tname} = {value};")
        else:
            consts.append(f"  using {tname} = {value};")
    text = (f"{prelude}{header}\nnamespace mlx::core::cu {{\n\nnamespace cg = cooperative_groups;"
            f"\n\n__global__ void custom_kernel_{name}(\n" + ",\n".join(params) + ") {\n")
    if consts:
        text += "\n".join(consts) + "\n\n"
    return text + body + "\n}\n\n} // namespace mlx::core::cu\n"


def standalone_source(e) -> str:
    """An emitted CUDA kernel (:class:`kir.backends.emitted.Emitted`) as the translation unit
    MLX compiles it into, for nvcc outside MLX (the tests build it for sm_90)."""
    return cuda_signature(e.name, list(zip(e.input_names, e.input_dtypes, e.input_shapes)),
                          list(zip(e.output_names, e.output_dtypes)), e.source, e.header or "")
