"""Matrix-fragment statements (:class:`kir.ir.MatrixFill` ...) in Metal and CUDA source.

Metal: Apple's SIMD-group matrix functions (MSL specification §6.7, ``<metal_simdgroup_matrix>``;
MLX's steel GEMM kernels are built on them): ``simdgroup_float8x8``,
``make_filled_simdgroup_matrix``, ``simdgroup_load`` / ``simdgroup_store`` with a row stride
and an optional transpose, ``simdgroup_multiply_accumulate(d, a, b, c)``.

CUDA: tensor cores (``wmma::mma_sync`` / ``mma.sync``) multiply f16/bf16/tf32 inputs, so an
f32 kernel would lose precision that f32 tolerances reject. kir emits instead a small f32
fragment of its own, laid out like an m8n8 ``mma.sync`` accumulator: 64 elements over the
32 lanes, two per lane (lane ``l`` holds row ``l / 4``, columns ``2 (l % 4)`` and ``+ 1``).
Loads and stores are direct per-lane accesses (no shuffles); the product gathers each row of
``a`` and column of ``b`` with ``__shfl_sync`` (3 shuffles and 2 FMAs per k step), so it is
exact f32 arithmetic at a modest cost.

A ``tf32`` product (``MatrixMultiplyAccumulate.precision``) runs on the tensor cores: one
``mma.sync.aligned.m16n8k8`` with TF32 operands and f32 accumulation (PTX ISA, "Matrix
Fragments for mma.m16n8k8", .tf32), its A rows 8-15 zero, so its C rows 0-7 are exactly the
``kir_frag8x8`` layout. Its operands are loaded straight into the instruction's own layouts
(lane ``4g + t`` holds A[g][t] and A[g][t+4], or B[t][g] and B[t+4][g]), rounded to TF32 on
load as :func:`kir.interp.matrix.round_to_tf32` does; which fragments are A or B operands is
found once per kernel (:func:`kir.analysis.matrix_roles.tf32_operand_roles`). Without ``__CUDA_ARCH__ >= 800`` (the CPU
emulator, older GPUs) the same helpers compute the product with shuffles over the same
rounded operands. Consecutive tf32 products that share a B operand are issued two to an
instruction (:func:`cuda_products`): the second fills the A rows 8-15 the lone product leaves
zero. Measured on the H200 (``benchmarks/matmul_probe.py``, BENCHMARKS.md round 5) this, with
the tile copy's 16-byte loads, is what brought the warp-tiled GEMM from ~200 registers a thread
to ~170 and most of its speed-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kir import ir
from kir.analysis.matrix_roles import OperandRole
from kir.errors import UnsupportedError
from kir.ir.nodes import TF32_PRECISIONS
from kir.ir.types import MatrixType

if TYPE_CHECKING:
    from kir.backends.cstyle import Printer


def _check_shape(t: MatrixType, loc, target: str, elems: tuple[str, ...]) -> None:
    if (t.rows, t.cols) != (8, 8) or t.elem.name not in elems:
        raise UnsupportedError(f"{target}: no {t} matrix fragment (only 8x8 of "
                               f"{' or '.join(elems)})", loc)


def _pointer(p: "Printer", buffer: str, index: ir.Expr, store: bool, loc) -> str:
    info = p.info(buffer)
    if info.atomic or info.xor_key or info.xor_key_buffer:
        raise UnsupportedError(f"matrix access to {buffer!r}, whose accesses must be atomic "
                               "or encoded", loc, hint="drop the mma-tile rule for this kernel")
    if store and not info.writable:
        raise UnsupportedError(f"kernel writes to input buffer {buffer!r}", loc)
    return f"&{p.element(buffer, p.expr(index))}"


def metal_matrix(p: "Printer", s: ir.Stmt) -> list[str]:
    """Metal lines for one matrix statement."""
    p.helpers.add("simdgroup_matrix")
    if isinstance(s, ir.MatrixMultiplyAccumulate) and s.precision != "f32":
        raise UnsupportedError(f"Metal has no {s.precision} matrix product (SIMD-group "
                               "matrices multiply in f32)", s.loc,
                               hint=f"drop the {s.precision}-matrix step for the Metal target")
    if isinstance(s, (ir.MatrixFill, ir.MatrixLoad)):
        _check_shape(s.type, s.loc, "Metal", ("f32", "f16"))
        elem = p.type_name(s.type.elem)
        mtype = f"simdgroup_{elem}8x8"
        name = p.name(s.name)
        if isinstance(s, ir.MatrixFill):
            return [f"{mtype} {name} = make_filled_simdgroup_matrix<{elem}, 8, 8>"
                    f"({p.expr(s.value)});"]
        ptr = _pointer(p, s.buffer, s.index, False, s.loc)
        tail = ", ulong2(0, 0), true" if s.transpose else ""
        return [f"{mtype} {name};",
                f"simdgroup_load({name}, {ptr}, (ulong)({p.expr(s.stride)}){tail});"]
    if isinstance(s, ir.MatrixMultiplyAccumulate):
        acc = p.name(s.acc)
        return [f"simdgroup_multiply_accumulate({acc}, {p.name(s.a)}, {p.name(s.b)}, {acc});"]
    if isinstance(s, ir.MatrixStore):
        ptr = _pointer(p, s.buffer, s.index, True, s.loc)
        return [f"simdgroup_store({p.name(s.name)}, {ptr}, (ulong)({p.expr(s.stride)}));"]
    raise UnsupportedError(f"Metal backend cannot print {type(s).__name__}", ir.stmt_loc(s))


def cuda_matrix(p: "Printer", s: ir.Stmt) -> list[str]:
    """CUDA lines for one matrix statement (through the ``kir_frag`` helpers)."""
    p.helpers.update(("lane", "matrix"))
    role = p.fragment_roles.get(s.name) if isinstance(s, (ir.MatrixFill, ir.MatrixLoad)) \
        else None
    if role is not None or (isinstance(s, ir.MatrixMultiplyAccumulate)
                            and s.precision in TF32_PRECISIONS):
        return _cuda_tf32(p, s, role)
    if isinstance(s, (ir.MatrixFill, ir.MatrixLoad)):
        _check_shape(s.type, s.loc, "CUDA", ("f32",))
        name = p.name(s.name)
        if isinstance(s, ir.MatrixFill):
            return [f"kir_frag8x8 {name} = kir_frag_fill({p.expr(s.value)});"]
        ptr = _pointer(p, s.buffer, s.index, False, s.loc)
        transpose = "true" if s.transpose else "false"
        return [f"kir_frag8x8 {name} = kir_frag_load({ptr}, {p.expr(s.stride)}, {transpose});"]
    if isinstance(s, ir.MatrixMultiplyAccumulate):
        return [f"kir_frag_mma({p.name(s.acc)}, {p.name(s.a)}, {p.name(s.b)});"]
    if isinstance(s, ir.MatrixStore):
        ptr = _pointer(p, s.buffer, s.index, True, s.loc)
        return [f"kir_frag_store({ptr}, {p.expr(s.stride)}, {p.name(s.name)});"]
    raise UnsupportedError(f"CUDA backend cannot print {type(s).__name__}", ir.stmt_loc(s))


def cuda_products(p: "Printer", run: list[ir.MatrixMultiplyAccumulate]) -> list[str]:
    """CUDA lines for consecutive matrix products: tf32 products that share their B operand
    go out in pairs as one m16n8k8 (``kir_tf32_mma2``), which halves the tensor-core
    instructions and the zero registers a lone 8x8 product pads its A operand with.

    Pairing moves a product past others; that is sound only among products into distinct
    accumulators (a tf32 operand is never an accumulator: ``tf32_operand_roles``), so the run
    is cut where an accumulator repeats and each piece keeps every accumulator's own order."""
    out: list[str] = []
    piece: list[ir.MatrixMultiplyAccumulate] = []
    for s in run:
        if s.precision not in TF32_PRECISIONS or any(s.acc == q.acc for q in piece):
            out += _paired(p, piece)
            piece = []
        if s.precision in TF32_PRECISIONS:
            piece.append(s)
        else:
            out += cuda_matrix(p, s)
    return out + _paired(p, piece)


def _paired(p: "Printer", piece: list[ir.MatrixMultiplyAccumulate]) -> list[str]:
    """Lines for TF32 products into distinct accumulators, paired by B operand (in the
    order each B first appears; a B operand has one precision, so a pair has one too)."""
    by_b: dict[str, list[ir.MatrixMultiplyAccumulate]] = {}
    for s in piece:
        by_b.setdefault(s.b, []).append(s)
    out: list[str] = []
    for group in by_b.values():
        for first, second in zip(group[::2], group[1::2]):
            p.helpers.update(_helpers(first.precision))
            out.append(f"{_prefix(first.precision)}_mma2({p.name(first.acc)}, "
                       f"{p.name(second.acc)}, "
                       f"{p.name(first.a)}, {p.name(second.a)}, {p.name(first.b)});")
        if len(group) % 2:
            out += cuda_matrix(p, group[-1])
    return out


def _prefix(precision: str) -> str:
    return "kir_tf32x3" if precision == "tf32x3" else "kir_tf32"


def _helpers(precision: str) -> tuple[str, ...]:
    return ("lane", "matrix", "matrix_tf32") + (("matrix_tf32x3",) if precision == "tf32x3"
                                               else ())


def _cuda_tf32(p: "Printer", s: ir.Stmt, role: OperandRole | None) -> list[str]:
    """A TF32 product, or the load or fill of one of its operands."""
    if isinstance(s, ir.MatrixMultiplyAccumulate):
        p.helpers.update(_helpers(s.precision))
        return [f"{_prefix(s.precision)}_mma({p.name(s.acc)}, {p.name(s.a)}, {p.name(s.b)});"]
    assert isinstance(s, (ir.MatrixFill, ir.MatrixLoad)) and role is not None
    p.helpers.update(_helpers(role.precision))
    _check_shape(s.type, s.loc, "CUDA", ("f32",))
    name, prefix = p.name(s.name), _prefix(role.precision)
    if isinstance(s, ir.MatrixFill):
        return [f"{prefix}_frag {name} = {prefix}_fill({p.expr(s.value)});"]
    ptr = _pointer(p, s.buffer, s.index, False, s.loc)
    transpose = "true" if s.transpose else "false"
    return [f"{prefix}_frag {name} = {prefix}_load_{role.operand}({ptr}, "
            f"{p.expr(s.stride)}, {transpose});"]


METAL_HELPER = "#include <metal_simdgroup_matrix>"

CUDA_HELPER = """// An 8x8 f32 matrix held by a warp, two elements per lane
// (kir.backends.matrix_emit).
struct kir_frag8x8 { float v[2]; };
__device__ __forceinline__ kir_frag8x8 kir_frag_fill(float x) {
    kir_frag8x8 f;
    f.v[0] = x;
    f.v[1] = x;
    return f;
}
template <class T>
__device__ __forceinline__ kir_frag8x8 kir_frag_load(const T* p, int stride, bool transpose) {
    unsigned int l = kir_lane();
    int r = (int)(l >> 2), c = (int)(l & 3u) * 2;
    kir_frag8x8 f;
    f.v[0] = (float)(transpose ? p[c * stride + r] : p[r * stride + c]);
    f.v[1] = (float)(transpose ? p[(c + 1) * stride + r] : p[r * stride + c + 1]);
    return f;
}
template <class T>
__device__ __forceinline__ void kir_frag_store(T* p, int stride, const kir_frag8x8& f) {
    unsigned int l = kir_lane();
    int r = (int)(l >> 2), c = (int)(l & 3u) * 2;
    p[r * stride + c] = (T)f.v[0];
    p[r * stride + c + 1] = (T)f.v[1];
}
__device__ __forceinline__ void kir_frag_mma(kir_frag8x8& d, const kir_frag8x8& a,
                                             const kir_frag8x8& b) {
    unsigned int l = kir_lane();
    int r = (int)(l >> 2), q = (int)(l & 3u);
    float d0 = d.v[0], d1 = d.v[1];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        // a[r][k] sits in lane 4r + k/2, slot k%2; b[k][2q..2q+1] in lane 4k + q.
        float ak = __shfl_sync(0xffffffffu, a.v[k & 1], (r << 2) | (k >> 1));
        float b0 = __shfl_sync(0xffffffffu, b.v[0], (k << 2) | q);
        float b1 = __shfl_sync(0xffffffffu, b.v[1], (k << 2) | q);
        d0 = fmaf(ak, b0, d0);
        d1 = fmaf(ak, b1, d1);
    }
    d.v[0] = d0;
    d.v[1] = d1;
}"""


CUDA_TF32_HELPER = r"""// TF32 operands of an m16n8k8 mma.sync whose A rows 8-15 are zero
// (kir.backends.matrix_emit): lane 4g + t holds A[g][t] and A[g][t + 4], or B[t][g] and
// B[t + 4][g], rounded to TF32; the accumulator is a kir_frag8x8 (the C rows 0-7).
struct kir_tf32_frag { float v[2]; };
__device__ __forceinline__ float kir_tf32_round(float x) {
    // To nearest, ties away from zero; infinities and NaNs unchanged.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned int u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    u &= 0xffffe000u;  // PTX leaves the low 13 bits to the implementation; tf32x3 needs zeros
#else
    unsigned int u = __float_as_uint(x);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
#endif
    return __uint_as_float(u);
}
__device__ __forceinline__ kir_tf32_frag kir_tf32_fill(float x) {
    kir_tf32_frag f;
    f.v[0] = f.v[1] = kir_tf32_round(x);
    return f;
}
template <class T>
__device__ __forceinline__ kir_tf32_frag kir_tf32_raw_a(const T* p, int stride, bool transpose) {
    unsigned int l = kir_lane();
    int g = (int)(l >> 2), t = (int)(l & 3u);
    kir_tf32_frag f;
    f.v[0] = (float)(transpose ? p[t * stride + g] : p[g * stride + t]);
    f.v[1] = (float)(transpose ? p[(t + 4) * stride + g] : p[g * stride + t + 4]);
    return f;
}
template <class T>
__device__ __forceinline__ kir_tf32_frag kir_tf32_raw_b(const T* p, int stride, bool transpose) {
    unsigned int l = kir_lane();
    int g = (int)(l >> 2), t = (int)(l & 3u);
    kir_tf32_frag f;
    f.v[0] = (float)(transpose ? p[g * stride + t] : p[t * stride + g]);
    f.v[1] = (float)(transpose ? p[g * stride + t + 4] : p[(t + 4) * stride + g]);
    return f;
}
__device__ __forceinline__ kir_tf32_frag kir_tf32_rounded(kir_tf32_frag f) {
    f.v[0] = kir_tf32_round(f.v[0]);
    f.v[1] = kir_tf32_round(f.v[1]);
    return f;
}
template <class T>
__device__ __forceinline__ kir_tf32_frag kir_tf32_load_a(const T* p, int stride,
                                                        bool transpose) {
    return kir_tf32_rounded(kir_tf32_raw_a(p, stride, transpose));
}
template <class T>
__device__ __forceinline__ kir_tf32_frag kir_tf32_load_b(const T* p, int stride,
                                                        bool transpose) {
    return kir_tf32_rounded(kir_tf32_raw_b(p, stride, transpose));
}
__device__ __forceinline__ void kir_tf32_mma(kir_frag8x8& d, const kir_tf32_frag& a,
                                             const kir_tf32_frag& b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float c0 = d.v[0], c1 = d.v[1], c2 = 0.0f, c3 = 0.0f;
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(__float_as_uint(a.v[0])), "r"(0u), "r"(__float_as_uint(a.v[1])), "r"(0u),
          "r"(__float_as_uint(b.v[0])), "r"(__float_as_uint(b.v[1])));
    d.v[0] = c0;
    d.v[1] = c1;
#else
    unsigned int l = kir_lane();
    int g = (int)(l >> 2), t = (int)(l & 3u);
    float d0 = d.v[0], d1 = d.v[1];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        // A[g][k] sits in lane 4g + k % 4, slot k / 4; B[k][c] in lane 4c + k % 4, slot k / 4.
        float ak = __shfl_sync(0xffffffffu, a.v[k >> 2], (g << 2) | (k & 3));
        float b0 = __shfl_sync(0xffffffffu, b.v[k >> 2], (t << 3) | (k & 3));
        float b1 = __shfl_sync(0xffffffffu, b.v[k >> 2], (t << 3) | 4 | (k & 3));
        d0 = fmaf(ak, b0, d0);
        d1 = fmaf(ak, b1, d1);
    }
    d.v[0] = d0;
    d.v[1] = d1;
#endif
}
// Two products that share their B operand, d0 += a0 * b and d1 += a1 * b, as one m16n8k8:
// a0 fills the instruction's A rows 0-7 and a1 its rows 8-15 (rows are independent, so each
// result is the single product's).
__device__ __forceinline__ void kir_tf32_mma2(kir_frag8x8& d0, kir_frag8x8& d1,
                                              const kir_tf32_frag& a0, const kir_tf32_frag& a1,
                                              const kir_tf32_frag& b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d0.v[0]), "+f"(d0.v[1]), "+f"(d1.v[0]), "+f"(d1.v[1])
        : "r"(__float_as_uint(a0.v[0])), "r"(__float_as_uint(a1.v[0])),
          "r"(__float_as_uint(a0.v[1])), "r"(__float_as_uint(a1.v[1])),
          "r"(__float_as_uint(b.v[0])), "r"(__float_as_uint(b.v[1])));
#else
    kir_tf32_mma(d0, a0, b);
    kir_tf32_mma(d1, a1, b);
#endif
}"""


CUDA_TF32X3_HELPER = r"""// tf32x3 operands (kir.backends.matrix_emit): each f32 value split into its TF32 rounding
// and the TF32-rounded rest (exact in f32), in the kir_tf32_frag operand layouts; a product is
// three TF32 products, small parts first, accumulated in f32.
struct kir_tf32x3_frag { kir_tf32_frag big, small; };
__device__ __forceinline__ kir_tf32x3_frag kir_tf32x3_split(kir_tf32_frag raw) {
    kir_tf32x3_frag f;
    f.big = kir_tf32_rounded(raw);
    for (int i = 0; i < 2; ++i) {
        // The rest is exact in f32; none where big is infinite or NaN (inf - inf is NaN).
        bool finite = (__float_as_uint(f.big.v[i]) & 0x7f800000u) != 0x7f800000u;
        raw.v[i] = finite ? raw.v[i] - f.big.v[i] : 0.0f;
    }
    f.small = kir_tf32_rounded(raw);
    return f;
}
__device__ __forceinline__ kir_tf32x3_frag kir_tf32x3_fill(float x) {
    kir_tf32_frag raw;
    raw.v[0] = raw.v[1] = x;
    return kir_tf32x3_split(raw);
}
template <class T>
__device__ __forceinline__ kir_tf32x3_frag kir_tf32x3_load_a(const T* p, int stride,
                                                            bool transpose) {
    return kir_tf32x3_split(kir_tf32_raw_a(p, stride, transpose));
}
template <class T>
__device__ __forceinline__ kir_tf32x3_frag kir_tf32x3_load_b(const T* p, int stride,
                                                            bool transpose) {
    return kir_tf32x3_split(kir_tf32_raw_b(p, stride, transpose));
}
__device__ __forceinline__ void kir_tf32x3_mma(kir_frag8x8& d, const kir_tf32x3_frag& a,
                                               const kir_tf32x3_frag& b) {
    kir_tf32_mma(d, a.small, b.big);
    kir_tf32_mma(d, a.big, b.small);
    kir_tf32_mma(d, a.big, b.big);
}
__device__ __forceinline__ void kir_tf32x3_mma2(kir_frag8x8& d0, kir_frag8x8& d1,
                                                const kir_tf32x3_frag& a0,
                                                const kir_tf32x3_frag& a1,
                                                const kir_tf32x3_frag& b) {
    kir_tf32_mma2(d0, d1, a0.small, a1.small, b.big);
    kir_tf32_mma2(d0, d1, a0.big, a1.big, b.small);
    kir_tf32_mma2(d0, d1, a0.big, a1.big, b.big);
}"""


__all__ = ["metal_matrix", "cuda_matrix", "cuda_products", "METAL_HELPER", "CUDA_HELPER", "CUDA_TF32_HELPER", "CUDA_TF32X3_HELPER"]
