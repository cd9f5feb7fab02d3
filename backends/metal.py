"""The Metal dialect for MLX's ``mx.fast.metal_kernel``, and the full source MLX would build.

MLX writes the ``[[kernel]]`` signature itself: inputs become ``const device T*`` (``const
constant T*`` when they hold fewer than 8 elements, ``const constant T&`` when 0-d), outputs
``device T*`` (``device atomic<T>*`` for every output when ``atomic_outputs``), and each
thread attribute named anywhere in the body (``thread_position_in_grid`` ...) is added as a
parameter. So the body may use those attribute names freely and must not declare them.
"""

from __future__ import annotations

from kir.backends.cstyle import BufferInfo, Dialect, Printer
from kir.backends.matrix_emit import METAL_HELPER, metal_matrix

from kir import ir
from kir.errors import UnsupportedError
from kir.ir.types import ScalarType
from kir.target import Target

# Attributes MLX adds to the signature when their name occurs in the body (custom_kernel).
MLX_ATTRIBUTES = {
    "dispatch_quadgroups_per_threadgroup": "uint",
    "dispatch_simdgroups_per_threadgroup": "uint",
    "dispatch_threads_per_threadgroup": "uint3",
    "grid_origin": "uint3", "grid_size": "uint3",
    "quadgroup_index_in_threadgroup": "uint", "quadgroups_per_threadgroup": "uint",
    "simdgroup_index_in_threadgroup": "uint", "simdgroups_per_threadgroup": "uint",
    "thread_execution_width": "uint", "thread_index_in_quadgroup": "uint",
    "thread_index_in_simdgroup": "uint", "thread_index_in_threadgroup": "uint",
    "thread_position_in_grid": "uint3", "thread_position_in_threadgroup": "uint3",
    "threadgroup_position_in_grid": "uint3", "threadgroups_per_grid": "uint3",
    "threads_per_grid": "uint3", "threads_per_simdgroup": "uint",
    "threads_per_threadgroup": "uint3",
}
# Inputs with fewer elements than this go to the constant address space (MLX's rule).
MAX_CONSTANT_ARRAY_SIZE = 8
MLX_TYPE_STRINGS = {"bool": "bool", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t",
                    "u16": "uint16_t", "i32": "int32_t",
                    "u32": "uint32_t", "i64": "int64_t",
                    "u64": "uint64_t", "f16": "float16_t", "bf16": "bfloat16_t",
                    "f32": "float"}

_FAST = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "pow", "sin", "cos", "tanh"}
_HELPED = ("erf", "erfc", "hypot", "cbrt")


def _math(fn: str, t: ScalarType, fast: bool) -> str:
    if fn in _HELPED:
        return f"kir_{fn}"      # Metal has no erf, erfc, hypot or cbrt: helpers in the header
    if t.is_int and fn == "abs":
        return "metal::abs"
    if fast and fn in _FAST and t.name == "f32":
        return f"metal::fast::{fn}"
    return f"metal::{fn}"


def _atomic(p: Printer, a: ir.Atomic, info: BufferInfo, index: str, value: str) -> str:
    if not info.atomic:
        raise UnsupportedError(f"atomic {a.op} on {a.buffer!r}, which Metal cannot update "
                               "atomically (only outputs and shared arrays)", a.loc)
    ptr = f"&{p.element(a.buffer, index)}"
    elem = info.elem
    if not isinstance(elem, ScalarType) or elem.name not in ("f32", "i32", "u32"):
        raise UnsupportedError(f"Metal atomics need f32, i32 or u32, not {elem}", a.loc)
    if a.op == "add":
        return f"atomic_fetch_add_explicit({ptr}, {value}, memory_order_relaxed)"
    if a.op == "exch":
        return f"atomic_exchange_explicit({ptr}, {value}, memory_order_relaxed)"
    if a.op == "inc":
        if elem.name != "u32":
            raise UnsupportedError(f"an atomic increment with wrap on {elem} (u32 only)", a.loc)
        # Metal has no wrapping increment: a compare-and-swap loop in the header.
        p.helpers.add(f"atomic_inc_{info.space.strip() or 'device'}")
        return f"kir_atomic_inc({ptr}, {value})"
    if elem.name == "f32":
        # No float atomic max/min in Metal: a compare-and-swap loop in the header, for the
        # address space the buffer is in (the overloads differ only by it, which the CPU
        # emulator's C++ cannot tell apart, so only those used are defined).
        p.helpers.add(f"atomic_{a.op}_float_{info.space.strip() or 'device'}")
        return f"kir_atomic_{a.op}({ptr}, {value})"
    return f"atomic_fetch_{a.op}_explicit({ptr}, {value}, memory_order_relaxed)"


METAL = Dialect(
    name="metal",
    scalar_types={"bool": "bool", "i8": "char", "u8": "uchar", "i16": "short",
                  "u16": "ushort", "i32": "int", "u32": "uint",
                  "i64": "long", "u64": "ulong",
                  "f16": "half", "bf16": "bfloat", "f32": "float"},
    vector_elems={"f32": "float", "f16": "half", "bf16": "bfloat", "i32": "int", "u32": "uint",
                  "bool": "bool", "i8": "char", "u8": "uchar", "i16": "short", "u16": "ushort"},
    make_vector="{type}({elems})",
    shared_qualifier="threadgroup",
    aligned_array="alignas(16) {qual}{elem} {name}[{size}]",
    local_qualifier="",
    barrier_block="threadgroup_barrier(mem_flags::mem_threadgroup)",
    barrier_block_device="threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device)",
    # mem_threadgroup (not mem_none): __syncwarp also orders shared memory among the lanes.
    barrier_warp="simdgroup_barrier(mem_flags::mem_threadgroup)",
    # Fences with a scope are Metal 3.2 (macOS 15; MLX compiles with 3.2 there). Not run on
    # an Apple GPU by kir: the CPU emulator runs blocks one after another.
    fences={"device": "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, "
                      "thread_scope_device)",
            "block": "atomic_thread_fence(mem_flags::mem_device | mem_flags::mem_threadgroup, "
                     "memory_order_seq_cst, thread_scope_threadgroup)"},
    specials={
        "thread.x": "thread_position_in_threadgroup.x",
        "thread.y": "thread_position_in_threadgroup.y",
        "thread.z": "thread_position_in_threadgroup.z",
        "block.x": "threadgroup_position_in_grid.x",
        "block.y": "threadgroup_position_in_grid.y",
        "block.z": "threadgroup_position_in_grid.z",
        "block_dim.x": "threads_per_threadgroup.x",
        "block_dim.y": "threads_per_threadgroup.y",
        "block_dim.z": "threads_per_threadgroup.z",
        "grid_dim.x": "threadgroups_per_grid.x",
        "grid_dim.y": "threadgroups_per_grid.y",
        "grid_dim.z": "threadgroups_per_grid.z",
        "lane": "thread_index_in_simdgroup",
        "warp": "simdgroup_index_in_threadgroup",
        "warp_size": "threads_per_simdgroup",
    },
    shuffles={"xor": "simd_shuffle_xor({value}, {lane})",
              "down": "simd_shuffle_down({value}, {lane})",
              "up": "simd_shuffle_up({value}, {lane})",
              "idx": "simd_shuffle({value}, {lane})"},
    warp_reduces={"sum": "simd_sum({value})", "max": "simd_max({value})",
                  "min": "simd_min({value})"},
    scalar_param="{name}",
    vector_pointer="*(({space}{type}*)({buffer} + {index}))",
    infinity="INFINITY",
    nan="NAN",
    math=_math,
    bit_view=lambda src, dst, name, value: f"as_type<{name}>({value})",
    atomic=_atomic,
    atomic_load="atomic_load_explicit({ptr}, memory_order_relaxed)",
    atomic_store="atomic_store_explicit({ptr}, {value}, memory_order_relaxed)",
    cast_vector="{type}({value})",
    keywords=frozenset(MLX_ATTRIBUTES) | frozenset({
        "kernel", "device", "threadgroup", "constant", "thread", "half", "uint", "bfloat",
        "metal", "vec", "atomic", "simd_sum", "simd_max", "simd_min", "select", "as_type",
        "max", "min", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "pow",
        "fma", "sin", "cos", "floor", "ceil", "erf", "simdgroup_load", "simdgroup_store",
        "simdgroup_multiply_accumulate", "make_filled_simdgroup_matrix", "ulong", "ulong2",
        "round", "rint", "trunc", "char", "uchar", "tan", "asin", "acos", "atan", "atan2",
        "log10", "fmod", "copysign", "isnan", "isinf", "popcount", "clz", "ctz", "exp10",
        "sinpi", "cospi", "asinh", "acosh", "atanh"}),
    half_suffix="h",
    int_suffixes={"u32": "u", "i64": "l", "u64": "ul"},
    bare_special_floats=frozenset({"f32"}),
    matrix=metal_matrix,
)

# kir type -> (Metal type, same-size unsigned type). The XOR result is cast back to the
# unsigned type: ushort ^ ushort promotes to int, and as_type needs equal sizes.
_XOR_TYPES = {"f32": ("float", "uint"), "i32": ("int", "uint"), "u32": ("uint", "uint"),
              "f16": ("half", "ushort"), "bf16": ("bfloat", "ushort"),
              "i16": ("short", "ushort"), "u16": ("ushort", "ushort"),
              "i64": ("long", "ulong"), "u64": ("ulong", "ulong")}

HELPERS = {
    "simdgroup_matrix": METAL_HELPER,
    **{f"xor_{k}": f"inline {t} kir_xor_{k}({t} v, {b} key) "
                   f"{{ return as_type<{t}>({b}(as_type<{b}>(v) ^ key)); }}"
       for k, (t, b) in _XOR_TYPES.items()},
    **{f"atomic_{op}_float_{space}": f"""inline float kir_atomic_{op}({space} atomic<float>* p, float v) {{
    float old = atomic_load_explicit(p, memory_order_relaxed);
    while (old {cmp} v && !atomic_compare_exchange_weak_explicit(
               p, &old, v, memory_order_relaxed, memory_order_relaxed)) {{
    }}
    return old;
}}""" for op, cmp in (("max", "<"), ("min", ">")) for space in ("device", "threadgroup")},
    **{f"atomic_inc_{space}": f"""inline uint kir_atomic_inc({space} atomic<uint>* p, uint limit) {{
    uint old = atomic_load_explicit(p, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(
               p, &old, old >= limit ? 0u : old + 1u, memory_order_relaxed, memory_order_relaxed)) {{
    }}
    return old;
}}""" for space in ("device", "threadgroup")},
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, below f32 tolerances).
    "kir_erf": """inline float kir_erf(float x) {
    float t = 1.0f / (1.0f + 0.3275911f * metal::abs(x));
    float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t
                       - 0.284496736f) * t + 0.254829592f) * t * metal::exp(-x * x);
    return metal::copysign(y, x);
}
inline half kir_erf(half x) { return half(kir_erf(float(x))); }""",
    # The complementary error function by the Chebyshev fit of Press et al., Numerical
    # Recipes 6.2 (erfcc: fractional error under 1.2e-7 everywhere, so erfc(4) ~ 1.5e-8
    # keeps its digits, where 1 - erf(x) would round to 0).
    "kir_erfc": """inline float kir_erfc(float x) {
    float z = metal::abs(x);
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = -0.82215223f + t * 0.17087277f;
    p = 1.48851587f + t * p;
    p = -1.13520398f + t * p;
    p = 0.27886807f + t * p;
    p = -0.18628806f + t * p;
    p = 0.09678418f + t * p;
    p = 0.37409196f + t * p;
    p = 1.00002368f + t * p;
    float r = t * metal::exp(-z * z - 1.26551223f + t * p);
    return x >= 0.0f ? r : 2.0f - r;
}
inline half kir_erfc(half x) { return half(kir_erfc(float(x))); }""",
    # hypot without overflow or underflow in the squares: the larger magnitude factored out.
    "kir_hypot": """inline float kir_hypot(float x, float y) {
    float a = metal::abs(x), b = metal::abs(y);
    float big = metal::max(a, b), small = metal::min(a, b);
    if (metal::isinf(a) || metal::isinf(b)) return INFINITY;
    if (big == 0.0f || metal::isnan(big)) return big + small;
    float r = small / big;
    return big * metal::sqrt(1.0f + r * r);
}
inline half kir_hypot(half x, half y) { return half(kir_hypot(float(x), float(y))); }""",
    # cbrt: pow of the magnitude with the sign put back, then one Newton step (to ~1 ulp).
    "kir_cbrt": """inline float kir_cbrt(float x) {
    float a = metal::abs(x);
    if (a == 0.0f || metal::isinf(a) || metal::isnan(a)) return x;
    float r = metal::pow(a, 1.0f / 3.0f);
    r = r - (r * r * r - a) / (3.0f * r * r);
    return metal::copysign(r, x);
}
inline half kir_cbrt(half x) { return half(kir_cbrt(float(x))); }""",
}


def _input_space(shape: tuple[int, ...]) -> str:
    # Small read-only arrays go to the constant address space (MLX does the same).
    size = 1
    for dim in shape:
        size *= dim
    return "const constant " if size < MAX_CONSTANT_ARRAY_SIZE else "const device "


# Apple GPUs through MLX: 1024 threads and 32 KiB of threadgroup memory per threadgroup on
# M1-M4 (Metal feature set tables), SIMD-groups of 32, no double, no dynamic threadgroup
# memory in mx.fast.metal_kernel.
METAL_TARGET = Target(
    name="metal", title="Metal", group_word="threadgroup", max_threads=1024, max_shared_bytes=32 * 1024,
    max_static_shared_bytes=32 * 1024, warp_size=32, supports_f64=False, dynamic_shared=False,
    narrow_shuffles=False, input_space=_input_space, output_space="device ",
    shared_space="threadgroup ", local_space="thread ", typed_atomics=True,
    typed_atomic_types=frozenset({"f32", "i32", "u32"}), dialect=METAL, helpers=HELPERS)


def metal_signature(name: str, inputs: list[tuple[str, str, tuple[int, ...]]],
                    outputs: list[tuple[str, str]], body: str, atomic_outputs: bool,
                    template: list[tuple[str, object]] | None = None) -> str:
    """The ``[[kernel]]`` function MLX generates around ``body`` (see MLX custom_kernel):
    ``inputs`` as (name, kir dtype, shape), ``outputs`` as (name, kir dtype)."""
    lines = []
    if template:
        kinds = ["bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "typename"
                 for _, v in template]
        params = ", ".join(f"{kind} {n}" for kind, (n, _) in zip(kinds, template))
        lines.append(f"template <{params}>")
    lines.append(f"[[kernel]] void custom_kernel_{name}(")
    params: list[str] = []
    index = 0
    for arg, dtype, shape in inputs:
        size = 1
        for dim in shape:
            size *= dim
        space = "constant" if size < MAX_CONSTANT_ARRAY_SIZE else "device"
        ref = "&" if len(shape) == 0 else "*"
        params.append(f"  const {space} {MLX_TYPE_STRINGS[dtype]}{ref} {arg} [[buffer({index})]]")
        index += 1
    for arg, dtype in outputs:
        elem = MLX_TYPE_STRINGS[dtype]
        if atomic_outputs:
            elem = f"atomic<{elem}>"
        params.append(f"  device {elem}* {arg} [[buffer({index})]]")
        index += 1
    for attr, attr_type in MLX_ATTRIBUTES.items():
        if attr in body:
            params.append(f"  {attr_type} {attr} [[{attr}]]")
    return "\n".join(lines) + "\n" + ",\n".join(params) + ") {\n" + body + "\n}\n"
