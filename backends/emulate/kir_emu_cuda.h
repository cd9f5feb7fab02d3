// kir_emu_cuda.h -- compile CUDA kernels (MLX cuda_kernel bodies or a user's original __global__
// functions) as C++20; blocks run one after another, the threads of a block as fibers.
//
// `__shared__` declarations are rewritten in Python (arrays -> registered statics), and
// `extern __shared__ T x[]` becomes a pointer to the launch's dynamic shared memory.
#ifndef KIR_EMU_CUDA_H
#define KIR_EMU_CUDA_H
#include "kir_emu_runtime.h"  // first: it sets up feature macros (ucontext on macOS)
#define KIR_EMU_VEC3_ALIGN(T) alignas(sizeof(T))  // float3: 12 bytes, aligned to 4, as CUDA
#include "kir_emu_vec.h"
#include <float.h>
#include <assert.h>  // assert() in device code needs no include under nvcc
#include <math.h>  // the float overloads (expf, exp(float) ...) in the global namespace

#pragma GCC diagnostic ignored "-Wattributes"

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr dim3(uint3 u) : x(u.x), y(u.y), z(u.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

namespace kir_emu::cuda {
inline uint3 thread_idx() { auto& f = self(); return uint3{f.tid[0], f.tid[1], f.tid[2]}; }
inline uint3 block_idx() { auto& R = *rt(); return uint3{R.gid[0], R.gid[1], R.gid[2]}; }
inline dim3 block_dim() { auto& R = *rt(); return dim3(R.tg[0], R.tg[1], R.tg[2]); }
inline dim3 grid_dim() { auto& R = *rt(); return dim3(R.ngroups[0], R.ngroups[1], R.ngroups[2]); }
inline unsigned char* dyn_smem() { return rt()->smem; }
}  // namespace kir_emu::cuda
// PTX reads of a lane's special registers (asm("mov.u32 %0, %%laneid;" : "=r"(x))), which
// the original's text has as these calls (kir.frontends.cuda.ptx_reads)
inline unsigned __kir_ptx_laneid() { return ::kir_emu::self().lane; }
inline unsigned __kir_ptx_lanemask_eq() { return 1u << ::kir_emu::self().lane; }
inline unsigned __kir_ptx_lanemask_lt() { return __kir_ptx_lanemask_eq() - 1u; }
inline unsigned __kir_ptx_lanemask_le() {
  return __kir_ptx_lanemask_lt() | __kir_ptx_lanemask_eq();
}
inline unsigned __kir_ptx_lanemask_gt() { return ~__kir_ptx_lanemask_le(); }
inline unsigned __kir_ptx_lanemask_ge() { return ~__kir_ptx_lanemask_lt(); }
#define threadIdx (::kir_emu::cuda::thread_idx())
#define blockIdx (::kir_emu::cuda::block_idx())
#define blockDim (::kir_emu::cuda::block_dim())
#define gridDim (::kir_emu::cuda::grid_dim())
constexpr int warpSize = 32;

// vector types (CUDA's have no operators; these do, a harmless superset)
using float2 = kir_emu::vec<float, 2>;
using float3 = kir_emu::vec<float, 3>;
using float4 = kir_emu::vec<float, 4>;
using int2 = kir_emu::vec<int, 2>;
using int4 = kir_emu::vec<int, 4>;
using uint2 = kir_emu::vec<unsigned, 2>;
using uint4 = kir_emu::vec<unsigned, 4>;
using int3 = kir_emu::vec<int, 3>;
using double2 = kir_emu::vec<double, 2>;
using uchar2 = kir_emu::vec<unsigned char, 2>;
using uchar3 = kir_emu::vec<unsigned char, 3>;
using uchar4 = kir_emu::vec<unsigned char, 4>;
using char2 = kir_emu::vec<signed char, 2>;
using char4 = kir_emu::vec<signed char, 4>;
using short2 = kir_emu::vec<short, 2>;
using ushort2 = kir_emu::vec<unsigned short, 2>;
using short4 = kir_emu::vec<short, 4>;
using ushort4 = kir_emu::vec<unsigned short, 4>;
using uchar = unsigned char;
using ushort = unsigned short;
inline short2 make_short2(short a, short b) { return short2(a, b); }
inline ushort2 make_ushort2(ushort a, ushort b) { return ushort2(a, b); }
inline short4 make_short4(short a, short b, short c, short d) { return short4(a, b, c, d); }
inline ushort4 make_ushort4(ushort a, ushort b, ushort c, ushort d) {
  return ushort4(a, b, c, d);
}
inline uchar4 make_uchar4(unsigned char a, unsigned char b, unsigned char c, unsigned char d) {
  return uchar4(a, b, c, d);
}
inline double2 make_double2(double a, double b) { return double2(a, b); }
inline float2 make_float2(float a, float b) { return float2(a, b); }
inline float3 make_float3(float a, float b, float c) { return float3(a, b, c); }
inline float4 make_float4(float a, float b, float c, float d) { return float4(a, b, c, d); }
inline int2 make_int2(int a, int b) { return int2(a, b); }
inline int4 make_int4(int a, int b, int c, int d) { return int4(a, b, c, d); }
inline uint2 make_uint2(unsigned a, unsigned b) { return uint2(a, b); }

// half / bfloat16
using __half = _Float16;
using half = _Float16;
inline __half __float2half(float f) { return (__half)f; }
inline __half __float2half_rn(float f) { return (__half)f; }
inline float __half2float(__half h) { return (float)h; }
inline __half __hadd(__half a, __half b) { return (__half)((float)a + (float)b); }
inline __half __hmul(__half a, __half b) { return (__half)((float)a * (float)b); }
using __half2 = kir_emu::vec<__half, 2>;
using half2 = __half2;
inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2((__half)a, (__half)b); }
inline __half2 __float2half2_rn(float a) { return __half2((__half)a, (__half)a); }
inline float __low2float(__half2 v) { return (float)v.x; }
inline float __high2float(__half2 v) { return (float)v.y; }
inline float2 __half22float2(__half2 v) { return float2((float)v.x, (float)v.y); }
inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __half2half2(__half a) { return __half2(a, a); }
inline __half2 __float22half2_rn(float2 v) { return __half2((__half)v.x, (__half)v.y); }
inline __half __low2half(__half2 v) { return v.x; }
inline __half __high2half(__half2 v) { return v.y; }
inline __half2 __hsub2(__half2 a, __half2 b) { return a - b; }
inline __half2 __h2div(__half2 a, __half2 b) { return a / b; }
inline __half __hfma(__half a, __half b, __half c);
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline __half2 __hneg2(__half2 a) { return -a; }
inline __half __hmax(__half a, __half b) { return a > b ? a : b; }
inline __half __hmin(__half a, __half b) { return a < b ? a : b; }
inline __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
inline __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
inline __half __hsub(__half a, __half b) { return (__half)((float)a - (float)b); }
inline __half __hdiv(__half a, __half b) { return (__half)((float)a / (float)b); }
// fused: one rounding to the half type (the product of two halves is exact in a double)
inline __half __hfma(__half a, __half b, __half c) { return (__half)((double)a * (double)b + (double)c); }
inline __half __hneg(__half a) { return -a; }
inline __half2 __hadd2(__half2 a, __half2 b) { return a + b; }
inline __half2 __hmul2(__half2 a, __half2 b) { return a * b; }
struct __nv_bfloat16 {
  uint16_t bits;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = uint16_t((u >> 16) | 0x40); return; }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = uint16_t(u >> 16);
  }
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
};
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
// scalar bfloat16 arithmetic (without these the __half overloads took bfloat16 arguments
// through float and computed in half precision); a product or sum of two bfloat16 values is
// exact in a float, an fma's in a double
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a + (float)b); }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a - (float)b); }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a * (float)b); }
inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a / (float)b); }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16((float)((double)(float)a * (double)(float)b + (double)(float)c));
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return __nv_bfloat16(-(float)a); }
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a > (float)b ? a : b; }
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a < (float)b ? a : b; }
// 16-bit bit views (cuda_fp16.h / cuda_bf16.h)
inline __half __ushort_as_half(unsigned short u) { __half h; memcpy(&h, &u, 2); return h; }
inline unsigned short __half_as_ushort(__half h) { unsigned short u; memcpy(&u, &h, 2); return u; }
inline __half __short_as_half(short u) { __half h; memcpy(&h, &u, 2); return h; }
inline short __half_as_short(__half h) { short u; memcpy(&u, &h, 2); return u; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 b; b.bits = u; return b; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }
// integer averages without overflow (cuda's __hadd of two ints is one of these)
inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
inline unsigned __uhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b) >> 1); }
inline unsigned __urhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b + 1) >> 1); }
// bfloat16 pairs (cuda_bf16.h): the arithmetic names overloaded, the conversions named
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
};
using nv_bfloat162 = __nv_bfloat162;
inline __nv_bfloat162 kir_bf2(float a, float b) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b)); }
inline __nv_bfloat162 operator+(__nv_bfloat162 a, __nv_bfloat162 b) { return kir_bf2((float)a.x + (float)b.x, (float)a.y + (float)b.y); }
inline __nv_bfloat162 operator-(__nv_bfloat162 a, __nv_bfloat162 b) { return kir_bf2((float)a.x - (float)b.x, (float)a.y - (float)b.y); }
inline __nv_bfloat162 operator*(__nv_bfloat162 a, __nv_bfloat162 b) { return kir_bf2((float)a.x * (float)b.x, (float)a.y * (float)b.y); }
inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return a + b; }
inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) { return a - b; }
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return a * b; }
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) { return kir_bf2((float)a.x * (float)b.x + (float)c.x, (float)a.y * (float)b.y + (float)c.y); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return kir_bf2(a, b); }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return kir_bf2(a, a); }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return float2((float)v.x, (float)v.y); }
inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return kir_bf2(v.x, v.y); }
inline float __low2float(__nv_bfloat162 v) { return (float)v.x; }
inline float __high2float(__nv_bfloat162 v) { return (float)v.y; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }
// cuda_fp16.h's and cuda_bf16.h's comparisons: with a NaN the ordered ones are false, the
// unordered ones (-u) true
#define KIR_HALF_COMPARES(T)                                                                 \
  inline bool __heq(T a, T b) { return (float)a == (float)b; }                               \
  inline bool __hne(T a, T b) { return (float)a < (float)b || (float)a > (float)b; }         \
  inline bool __hlt(T a, T b) { return (float)a < (float)b; }                                \
  inline bool __hle(T a, T b) { return (float)a <= (float)b; }                               \
  inline bool __hgt(T a, T b) { return (float)a > (float)b; }                                \
  inline bool __hge(T a, T b) { return (float)a >= (float)b; }                               \
  inline bool __hequ(T a, T b) { return !__hne(a, b); }                                      \
  inline bool __hneu(T a, T b) { return (float)a != (float)b; }                              \
  inline bool __hltu(T a, T b) { return !((float)a >= (float)b); }                           \
  inline bool __hleu(T a, T b) { return !((float)a > (float)b); }                            \
  inline bool __hgtu(T a, T b) { return !((float)a <= (float)b); }                           \
  inline bool __hgeu(T a, T b) { return !((float)a < (float)b); }
KIR_HALF_COMPARES(__half)
KIR_HALF_COMPARES(__nv_bfloat16)
#undef KIR_HALF_COMPARES

#define __global__
#define __device__
#define __host__
// Plain inline: the host compiler chooses. Forced, the fragment helpers of a fully unrolled
// tensor-core kernel (hundreds of calls) were inlined everywhere and its compile took 7.6 s
// instead of 0.5 s; on the emulator a call costs nothing next to a shuffle's fiber switch.
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __constant__
#define __managed__
#define __grid_constant__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
// math_constants.h (its include is dropped like every CUDA header's)
#define CUDART_INF_F (__builtin_inff())
#define CUDART_NAN_F (__builtin_nanf(""))
#define CUDART_INF (__builtin_inf())

// ---------------------------------------------------------------- math
template <class A, class B>
inline auto max(A a, B b) -> std::common_type_t<A, B> {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return std::fmax((C)a, (C)b);
  else return (C)a > (C)b ? (C)a : (C)b;
}
template <class A, class B>
inline auto min(A a, B b) -> std::common_type_t<A, B> {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return std::fmin((C)a, (C)b);
  else return (C)a < (C)b ? (C)a : (C)b;
}
// CUDA's integer min and max of one width and signedness
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
// fast intrinsics compute exactly here (the GPU's are approximate, e.g. ~2 ulp for __expf)
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __saturatef(float x) { return fminf(fmaxf(x, 0.0f), 1.0f); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float rsqrt(float x) { return 1.0f / sqrtf(x); }  // CUDA's overloads of rsqrt
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned i) { float x; memcpy(&x, &i, 4); return x; }
inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
inline double __longlong_as_double(long long i) { double x; memcpy(&x, &i, 8); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
// float to integer with a rounding mode, as kir reads them (frontends/cuda/lower_calls.py)
#define KIR_EMU_ROUNDED(NAME, T)                                            \
  inline T __float2##NAME##_rd(float x) { return (T)floorf(x); }            \
  inline T __float2##NAME##_ru(float x) { return (T)ceilf(x); }
KIR_EMU_ROUNDED(int, int)
KIR_EMU_ROUNDED(uint, unsigned)
KIR_EMU_ROUNDED(ll, long long)
KIR_EMU_ROUNDED(ull, unsigned long long)
#undef KIR_EMU_ROUNDED
inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
inline long long __float2ll_rn(float x) { return (long long)nearbyintf(x); }
inline unsigned long long __float2ull_rn(float x) { return (unsigned long long)nearbyintf(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// sinpi / cospi (CUDA's, not in glibc): the argument reduced modulo 2 exactly first
inline double sinpi(double x) { return std::sin(3.14159265358979323846 * std::fmod(x, 2.0)); }
inline double cospi(double x) { return std::cos(3.14159265358979323846 * std::fmod(x, 2.0)); }
inline float sinpif(float x) { return (float)sinpi(x); }
inline float cospif(float x) { return (float)cospi(x); }
// CUDA's composed math functions, from their definitions
inline double rhypot(double x, double y) { return 1.0 / std::hypot(x, y); }
inline float rhypotf(float x, float y) { return 1.0f / hypotf(x, y); }
inline double norm3d(double a, double b, double c) { return std::sqrt(a * a + b * b + c * c); }
inline float norm3df(float a, float b, float c) { return (float)norm3d(a, b, c); }
inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
inline float rnorm3df(float a, float b, float c) { return (float)rnorm3d(a, b, c); }
inline double rcbrt(double x) { return 1.0 / std::cbrt(x); }
inline float rcbrtf(float x) { return (float)rcbrt(x); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752440); }
inline float normcdff(float x) { return (float)normcdf(x); }
// integer intrinsics (CUDA Math API, "Integer Intrinsics"), written byte by byte here so
// that the original kernels check kir's shift-and-mask lowering of the same calls
inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) c += (int)(signed char)(a >> (8 * k)) * (int)(signed char)(b >> (8 * k));
  return c;
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int k = 0; k < 4; ++k) c += ((a >> (8 * k)) & 0xffu) * ((b >> (8 * k)) & 0xffu);
  return c;
}
inline int kir_emu_dp2a(int a, int b, int c, int first) {
  for (int k = 0; k < 2; ++k) c += (int)(short)(a >> (16 * k)) * (int)(signed char)(b >> (8 * (first + k)));
  return c;
}
inline int __dp2a_lo(int a, int b, int c) { return kir_emu_dp2a(a, b, c, 0); }
inline int __dp2a_hi(int a, int b, int c) { return kir_emu_dp2a(a, b, c, 2); }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned char in[8];
  for (int k = 0; k < 4; ++k) { in[k] = (unsigned char)(x >> (8 * k)); in[k + 4] = (unsigned char)(y >> (8 * k)); }
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= (unsigned)in[(s >> (4 * n)) & 7] << (8 * n);
  return r;
}
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int k = 0; k < 32; ++k) r |= ((x >> k) & 1u) << (31 - k);
  return r;
}
inline unsigned long long __brevll(unsigned long long x) {
  unsigned long long r = 0;
  for (int k = 0; k < 64; ++k) r |= ((x >> k) & 1ull) << (63 - k);
  return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)((((unsigned long long)hi << 32 | lo) << (s & 31)) >> 32);
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)((((unsigned long long)hi << 32 | lo) << (s < 32 ? s : 32)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)(((unsigned long long)hi << 32 | lo) >> (s & 31));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned s) {
  return (unsigned)(((unsigned long long)hi << 32 | lo) >> (s < 32 ? s : 32));
}
inline unsigned __sad(int x, int y, unsigned z) { return z + (unsigned)(x > y ? (long long)x - y : (long long)y - x); }
inline unsigned __usad(unsigned x, unsigned y, unsigned z) { return z + (x > y ? x - y : y - x); }
inline int __mul24(int a, int b) {
  long long a24 = (long long)((int)((unsigned)a << 8) >> 8), b24 = (long long)((int)((unsigned)b << 8) >> 8);
  return (int)(unsigned)(a24 * b24);
}
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

// ---------------------------------------------------------------- atomics (return the old value)
// One OS thread, fibers switch only at barriers: a plain read-modify-write is atomic here.
template <class T, class U> inline T atomicAdd(T* p, U v) { T o = *p; *p = T(o + (T)v); return o; }
template <class T, class U> inline T atomicSub(T* p, U v) { T o = *p; *p = T(o - (T)v); return o; }
template <class T, class U> inline T atomicExch(T* p, U v) { T o = *p; *p = (T)v; return o; }
template <class T, class U> inline T atomicAnd(T* p, U v) { T o = *p; *p = T(o & (T)v); return o; }
template <class T, class U> inline T atomicOr(T* p, U v) { T o = *p; *p = T(o | (T)v); return o; }
template <class T, class U> inline T atomicXor(T* p, U v) { T o = *p; *p = T(o ^ (T)v); return o; }
template <class T, class U> inline T atomicMax(T* p, U v) { T o = *p; if ((T)v > o) *p = (T)v; return o; }
template <class T, class U> inline T atomicMin(T* p, U v) { T o = *p; if ((T)v < o) *p = (T)v; return o; }
inline unsigned int atomicInc(unsigned int* p, unsigned int limit) {
  unsigned int o = *p;
  *p = o >= limit ? 0u : o + 1u;
  return o;
}
template <class T, class U, class V> inline T atomicCAS(T* p, U cmp, V val) {
  T o = *p;
  if (o == (T)cmp) *p = (T)val;
  return o;
}
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}

// ---------------------------------------------------------------- block / warp sync
inline void __syncthreads(std::source_location l = std::source_location::current()) {
  kir_emu::tg_barrier(kir_emu::site_of(l));
}
// Block votes: one counter (the emulator runs a block's threads as fibers of one OS thread,
// a block at a time), zeroed, counted and read between barriers.
inline int __syncthreads_count(int pred, std::source_location l = std::source_location::current()) {
  static int counter;
  __syncthreads(l);
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) counter = 0;
  __syncthreads(l);
  if (pred) counter += 1;
  __syncthreads(l);
  int seen = counter;
  __syncthreads(l);
  return seen;
}
inline int __syncthreads_or(int pred, std::source_location l = std::source_location::current()) {
  return __syncthreads_count(pred, l) != 0;
}
inline int __syncthreads_and(int pred, std::source_location l = std::source_location::current()) {
  return __syncthreads_count(pred, l) == (int)(blockDim.x * blockDim.y * blockDim.z);
}
namespace kir_emu::cuda {
inline void check_mask(unsigned mask, const char* fn) {
  auto& sd = rt()->simd[self().sg];
  uint32_t live = sd.nlanes == 32 ? 0xffffffffu : ((1u << sd.nlanes) - 1u);
  if ((mask & live) != live)
    fail("%s with partial mask 0x%x: the emulator needs every lane of the warp", fn, mask);
}
}  // namespace kir_emu::cuda
using KirSL = std::source_location;
inline void __syncwarp(unsigned mask = 0xffffffffu, KirSL l = KirSL::current()) {
  kir_emu::cuda::check_mask(mask, "__syncwarp");
  kir_emu::simd_barrier(kir_emu::site_of(l));
}
template <class T>
inline T __shfl_sync(unsigned mask, T var, int src, int width = warpSize, KirSL l = KirSL::current()) {
  kir_emu::cuda::check_mask(mask, "__shfl_sync");
  auto e = kir_emu::simd_exchange(var, kir_emu::site_of(l));
  uint32_t base = e.lane / width * width;
  return kir_emu::xread<T>(e, base + ((uint32_t)src % width), var);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lm, int width = warpSize, KirSL l = KirSL::current()) {
  kir_emu::cuda::check_mask(mask, "__shfl_xor_sync");
  auto e = kir_emu::simd_exchange(var, kir_emu::site_of(l));
  uint32_t src = e.lane ^ (uint32_t)lm;
  if (src >= (e.lane / width + 1) * width) return var;
  return kir_emu::xread<T>(e, src, var);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned d, int width = warpSize, KirSL l = KirSL::current()) {
  kir_emu::cuda::check_mask(mask, "__shfl_down_sync");
  auto e = kir_emu::simd_exchange(var, kir_emu::site_of(l));
  uint32_t src = e.lane + d;
  if (src >= (e.lane / width + 1) * width) return var;
  return kir_emu::xread<T>(e, src, var);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned d, int width = warpSize, KirSL l = KirSL::current()) {
  kir_emu::cuda::check_mask(mask, "__shfl_up_sync");
  auto e = kir_emu::simd_exchange(var, kir_emu::site_of(l));
  uint32_t base = e.lane / width * width;
  if (e.lane < base + d) return var;
  return kir_emu::xread<T>(e, e.lane - d, var);
}
inline unsigned __ballot_sync(unsigned mask, int pred, KirSL l = KirSL::current()) {
  kir_emu::cuda::check_mask(mask, "__ballot_sync");
  auto e = kir_emu::simd_exchange((bool)pred, kir_emu::site_of(l));
  unsigned m = 0;
  for (uint32_t i = 0; i < 32; i++) if ((e.mask >> i & 1u) && kir_emu::xread<bool>(e, i, false)) m |= 1u << i;
  return m & mask;
}
inline int __any_sync(unsigned mask, int p, KirSL l = KirSL::current()) { return __ballot_sync(mask, p, l) != 0; }
inline int __all_sync(unsigned mask, int p, KirSL l = KirSL::current()) {
  auto& sd = kir_emu::rt()->simd[kir_emu::self().sg];
  uint32_t live = sd.nlanes == 32 ? 0xffffffffu : ((1u << sd.nlanes) - 1u);
  return __ballot_sync(mask, p, l) == (mask & live);
}

// Ampere's warp reduce and match functions: one exchange, each lane reading every live lane
// (a mask naming a group of lanes, each lane of it passing the same mask, as after
// __match_any_sync: every lane of the warp takes part in the exchange)
template <class T, class F>
inline T kir_emu_warp_fold(unsigned mask, T v, F f, const char* fn, KirSL l) {
  (void)fn;
  auto e = kir_emu::simd_exchange(v, kir_emu::site_of(l));
  T acc = v;
  for (uint32_t i = 0; i < 32; i++)
    if ((e.mask >> i & 1u) && (mask >> i & 1u) && i != e.lane) acc = f(acc, kir_emu::xread<T>(e, i, v));
  return acc;
}
#define KIR_EMU_WARP_REDUCE(NAME, T, EXPR)                                                   \
  inline T NAME(unsigned mask, T v, KirSL l = KirSL::current()) {                           \
    return kir_emu_warp_fold(mask, v, [](T a, T b) { return (T)(EXPR); }, #NAME, l);        \
  }
KIR_EMU_WARP_REDUCE(__reduce_add_sync, int, a + b)
KIR_EMU_WARP_REDUCE(__reduce_add_sync, unsigned, a + b)
KIR_EMU_WARP_REDUCE(__reduce_min_sync, int, a < b ? a : b)
KIR_EMU_WARP_REDUCE(__reduce_min_sync, unsigned, a < b ? a : b)
KIR_EMU_WARP_REDUCE(__reduce_max_sync, int, a > b ? a : b)
KIR_EMU_WARP_REDUCE(__reduce_max_sync, unsigned, a > b ? a : b)
KIR_EMU_WARP_REDUCE(__reduce_and_sync, unsigned, a & b)
KIR_EMU_WARP_REDUCE(__reduce_or_sync, unsigned, a | b)
KIR_EMU_WARP_REDUCE(__reduce_xor_sync, unsigned, a ^ b)
#undef KIR_EMU_WARP_REDUCE
template <class T>
inline unsigned __match_any_sync(unsigned mask, T v, KirSL l = KirSL::current()) {
  kir_emu::cuda::check_mask(mask, "__match_any_sync");
  auto e = kir_emu::simd_exchange(v, kir_emu::site_of(l));
  unsigned m = 0;
  for (uint32_t i = 0; i < 32; i++)
    if ((e.mask >> i & 1u) && kir_emu::xread<T>(e, i, v) == v) m |= 1u << i;
  return m & mask;
}
template <class T>
inline unsigned __match_all_sync(unsigned mask, T v, int* pred, KirSL l = KirSL::current()) {
  unsigned same = __match_any_sync(mask, v, l);
  auto& sd = kir_emu::rt()->simd[kir_emu::self().sg];
  uint32_t live = sd.nlanes == 32 ? 0xffffffffu : ((1u << sd.nlanes) - 1u);
  *pred = same == (mask & live);
  return *pred ? mask : 0u;
}

// cooperative groups: blocks, tiles of a warp (tiled_partition<N>), their shuffles and votes,
// cg::reduce / inclusive_scan / exclusive_scan with cg::plus / greater / less.
namespace cooperative_groups {
struct thread_block {
  void sync(KirSL l = KirSL::current()) const { kir_emu::tg_barrier(kir_emu::site_of(l)); }
  unsigned thread_rank() const { return kir_emu::self().lin; }
  unsigned size() const { return kir_emu::rt()->nthreads; }
  unsigned num_threads() const { return size(); }
  dim3 group_index() const { return dim3(::kir_emu::cuda::block_idx()); }
  dim3 thread_index() const { return dim3(::kir_emu::cuda::thread_idx()); }
  dim3 group_dim() const { return ::kir_emu::cuda::block_dim(); }
  dim3 dim_threads() const { return group_dim(); }
};
inline thread_block this_thread_block() { return {}; }
inline void sync(const thread_block& b, KirSL l = KirSL::current()) { b.sync(l); }
struct grid_group {
  unsigned long long thread_rank() const {
    auto& R = *kir_emu::rt();
    unsigned long long blockid = R.gid[0] + (unsigned long long)R.ngroups[0] * (R.gid[1] + (unsigned long long)R.ngroups[1] * R.gid[2]);
    return blockid * R.nthreads + kir_emu::self().lin;
  }
  unsigned long long size() const {
    auto& R = *kir_emu::rt();
    return (unsigned long long)R.ngroups[0] * R.ngroups[1] * R.ngroups[2] * R.nthreads;
  }
};
inline grid_group this_grid() { return {}; }
template <unsigned N>
struct thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tiles of 1 to 32 threads");
  void sync(KirSL l = KirSL::current()) const { __syncwarp(0xffffffffu, l); }
  unsigned thread_rank() const { return kir_emu::self().lin % N; }
  unsigned size() const { return N; }
  unsigned num_threads() const { return N; }
  unsigned meta_group_rank() const { return kir_emu::self().lin / N; }
  unsigned meta_group_size() const { return (kir_emu::rt()->nthreads + N - 1) / N; }
  template <class T> T shfl(T v, int src, KirSL l = KirSL::current()) const {
    return __shfl_sync(0xffffffffu, v, src, N, l);
  }
  template <class T> T shfl_down(T v, unsigned d, KirSL l = KirSL::current()) const {
    return __shfl_down_sync(0xffffffffu, v, d, N, l);
  }
  template <class T> T shfl_up(T v, unsigned d, KirSL l = KirSL::current()) const {
    return __shfl_up_sync(0xffffffffu, v, d, N, l);
  }
  template <class T> T shfl_xor(T v, int m, KirSL l = KirSL::current()) const {
    return __shfl_xor_sync(0xffffffffu, v, m, N, l);
  }
  int any(int p, KirSL l = KirSL::current()) const { return __any_sync(0xffffffffu, p, l); }
  int all(int p, KirSL l = KirSL::current()) const { return __all_sync(0xffffffffu, p, l); }
  unsigned ballot(int p, KirSL l = KirSL::current()) const { return __ballot_sync(0xffffffffu, p, l); }
};
template <unsigned N, class Parent>
inline thread_block_tile<N> tiled_partition(const Parent&) { return {}; }
template <class T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <class T> struct greater { T operator()(T a, T b) const { return a > b ? a : b; } };
template <class T> struct less { T operator()(T a, T b) const { return a < b ? a : b; } };
template <unsigned N, class T, class Op>
inline T reduce(const thread_block_tile<N>& g, T v, Op op, KirSL l = KirSL::current()) {
  for (unsigned m = N / 2; m > 0; m /= 2) v = op(v, g.shfl_xor(v, (int)m, l));
  return v;
}
template <unsigned N, class T, class Op>
inline T inclusive_scan(const thread_block_tile<N>& g, T v, Op op, KirSL l = KirSL::current()) {
  for (unsigned d = 1; d < N; d *= 2) {
    T other = g.shfl_up(v, d, l);
    if (g.thread_rank() >= d) v = op(v, other);
  }
  return v;
}
template <unsigned N, class T>
inline T inclusive_scan(const thread_block_tile<N>& g, T v, KirSL l = KirSL::current()) {
  return inclusive_scan(g, v, plus<T>(), l);
}
template <unsigned N, class T, class Op>
inline T exclusive_scan(const thread_block_tile<N>& g, T v, Op op, KirSL l = KirSL::current()) {
  T incl = inclusive_scan(g, v, op, l);
  T before = g.shfl_up(incl, 1, l);
  return g.thread_rank() == 0 ? T(0) : before;
}
template <unsigned N, class T>
inline T exclusive_scan(const thread_block_tile<N>& g, T v, KirSL l = KirSL::current()) {
  return exclusive_scan(g, v, plus<T>(), l);
}
}  // namespace cooperative_groups
// <cuda/std/...>: cuda::std::min and friends are std's on the host
namespace cuda { namespace std = ::std; }

// MLX cuda_kernel: shape/strides parameters (mlx/backend/cuda/device/utils.cuh)
namespace mlx::core::cu {
constexpr int MAX_NDIM = 8;
using Shape = std::array<int32_t, MAX_NDIM>;
using Strides = std::array<int64_t, MAX_NDIM>;
template <typename IdxT = int64_t>
inline IdxT elem_to_loc(IdxT elem, const int* shape, const int64_t* strides, int ndim) {
  IdxT loc = 0;
  for (int i = ndim - 1; i >= 0 && elem > 0; --i) {
    loc += (elem % shape[i]) * IdxT(strides[i]);
    elem /= shape[i];
  }
  return loc;
}
}  // namespace mlx::core::cu

// ---------------------------------------------------------------- launching an original kernel
namespace kir_emu::cuda {
template <class P>
inline P convert_arg(const Arg& a) {
  if constexpr (std::is_pointer_v<P>) return reinterpret_cast<P>(a.p);
  else if constexpr (std::is_integral_v<P> || std::is_enum_v<P>) return (P)(a.kind == 2 ? (int64_t)a.f : a.i);
  else if constexpr (std::is_class_v<P>) {  // a struct by value (kind 3): its bytes, C's layout
    P v;
    std::memcpy(static_cast<void*>(&v), a.p, sizeof(P));
    return v;
  }
  else return (P)(a.kind == 1 ? (double)a.i : a.f);
}
template <class... P>
struct Closure {
  void (*k)(P...);
  std::tuple<std::decay_t<P>...> vals;
  static void run(void* p) {
    auto* c = static_cast<Closure*>(p);
    std::apply(c->k, c->vals);
  }
};
template <class... P, size_t... I>
inline std::tuple<std::decay_t<P>...> convert_all(const Arg* a, std::index_sequence<I...>) {
  return std::tuple<std::decay_t<P>...>(convert_arg<std::decay_t<P>>(a[I])...);
}
template <class... P>
inline int launch_kernel(const char* name, void (*k)(P...), const Arg* args, int nargs, const uint32_t* dims,
                         uint64_t smem, uint64_t stack_kib, char* err, uint64_t errlen) {
  if (nargs != (int)sizeof...(P)) {
    snprintf(err, errlen, "kernel '%s' takes %d argument(s), got %d", name, (int)sizeof...(P), nargs);
    return 2;
  }
  Closure<P...> c{k, convert_all<P...>(args, std::index_sequence_for<P...>{})};
  return launch(name, true, &Closure<P...>::run, &c, dims, smem, stack_kib, err, errlen);
}
// Launching with the first N of the kernel's parameters given; `Call` calls the kernel with
// them, so C++ supplies the defaults of the rest (enum and constexpr defaults included).
template <class... T> struct Types {};
template <class Tuple, class Seq> struct Take;
template <class Tuple, size_t... I>
struct Take<Tuple, std::index_sequence<I...>> { using type = Types<std::tuple_element_t<I, Tuple>...>; };
template <class Call, class... P>
struct PrefixClosure {
  std::tuple<std::decay_t<P>...> vals;
  static void run(void* p) { std::apply(Call{}, static_cast<PrefixClosure*>(p)->vals); }
};
template <class Call, class... P>
inline int launch_prefix(Types<P...>, const char* name, const Arg* args, const uint32_t* dims, uint64_t smem,
                         uint64_t stack_kib, char* err, uint64_t errlen) {
  PrefixClosure<Call, P...> c{convert_all<P...>(args, std::index_sequence_for<P...>{})};
  return launch(name, true, &PrefixClosure<Call, P...>::run, &c, dims, smem, stack_kib, err, errlen);
}
template <size_t N, class Call, class... P>
inline int launch_kernel_n(const char* name, void (*)(P...), const Arg* args, int nargs, const uint32_t* dims,
                           uint64_t smem, uint64_t stack_kib, char* err, uint64_t errlen) {
  static_assert(N <= sizeof...(P), "more arguments than the kernel has parameters");
  if (nargs != (int)N) {
    snprintf(err, errlen, "kernel '%s' given %d argument(s), expected %d", name, nargs, (int)N);
    return 2;
  }
  using Given = typename Take<std::tuple<P...>, std::make_index_sequence<N>>::type;
  return launch_prefix<Call>(Given{}, name, args, dims, smem, stack_kib, err, errlen);
}
}  // namespace kir_emu::cuda
#endif  // KIR_EMU_CUDA_H
