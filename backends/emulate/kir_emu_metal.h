// kir_emu_metal.h -- compile Metal Shading Language kernels (MLX metal_kernel bodies) as C++20.
//
// The generator (kir.backends.emulate.metal) puts the user's header and the generated kernel
// INSIDE `namespace metal`, so unqualified `exp(x)`, `max(a, b)` resolve to the float overloads
// below (float in, float out, as in MSL) rather than the C library's double ones.
// Address-space keywords expand to nothing; `threadgroup` declarations are rewritten in Python
// (arrays -> registered statics, pointers -> plain locals). half is _Float16 (IEEE binary16).
#ifndef KIR_EMU_METAL_H
#define KIR_EMU_METAL_H
#include "kir_emu_runtime.h"
#include "kir_emu_vec.h"

#pragma GCC diagnostic ignored "-Wattributes"
#pragma GCC diagnostic ignored "-Wunknown-pragmas"

namespace metal {

using uint = uint32_t;
using ushort = uint16_t;
using uchar = uint8_t;
using ulong = uint64_t;
using half = _Float16;
using float16_t = half;

// bfloat16: storage type with float arithmetic (round to nearest even on conversion)
struct bfloat {
  uint16_t bits;
  bfloat() = default;
  bfloat(float f) {
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
using bfloat16_t = bfloat;

using kir_emu::vec;
#define KIR_VTYPES(T, name) using name##2 = vec<T, 2>; using name##3 = vec<T, 3>; using name##4 = vec<T, 4>;
KIR_VTYPES(float, float)
KIR_VTYPES(half, half)
KIR_VTYPES(bfloat, bfloat)
KIR_VTYPES(int, int)
KIR_VTYPES(uint, uint)
KIR_VTYPES(short, short)
KIR_VTYPES(ushort, ushort)
KIR_VTYPES(char, char)
KIR_VTYPES(uchar, uchar)
KIR_VTYPES(bool, bool)
KIR_VTYPES(long, long)
KIR_VTYPES(ulong, ulong)
#undef KIR_VTYPES
using packed_float4 = float4;
using kir_emu::all;
using kir_emu::any;

// ---------------------------------------------------------------- type rules
template <class T>
inline constexpr bool is_scalar_v = kir_emu::is_scalar_v<T> || std::is_same_v<std::remove_cv_t<T>, bfloat>;
template <class T>
inline constexpr bool is_fp_v = std::is_floating_point_v<T> || kir_emu::is_half_v<T> || std::is_same_v<T, bfloat>;
// result type of a float function of T: half stays half, anything else computes in float
template <class T>
using fl_t = std::conditional_t<kir_emu::is_half_v<T>, half, float>;
// common type of two scalars, MSL-like: int op float -> float, a double literal takes the other type
template <class A, class B>
struct mct_s {
  using type = std::conditional_t<
      std::is_same_v<A, B>, A,
      std::conditional_t<is_fp_v<A> && !is_fp_v<B>, A,
      std::conditional_t<!is_fp_v<A> && is_fp_v<B>, B,
      std::conditional_t<is_fp_v<A> && is_fp_v<B>,
          std::conditional_t<std::is_same_v<A, double>, B, std::conditional_t<std::is_same_v<B, double>, A, float>>,
          std::common_type_t<A, B>>>>>;
};
template <class A, class B>
using mct = typename mct_s<A, B>::type;

// ---------------------------------------------------------------- math
#define KIR_M1(name, expr)                                                                   \
  template <class T, std::enable_if_t<is_scalar_v<T>, int> = 0>                              \
  inline fl_t<T> name(T x_) {                                                                \
    float x = (float)x_;                                                                     \
    return (fl_t<T>)(expr);                                                                  \
  }                                                                                          \
  template <class T, int N>                                                                  \
  inline vec<fl_t<T>, N> name(const vec<T, N>& v) {                                          \
    vec<fl_t<T>, N> r;                                                                       \
    for (int i = 0; i < N; i++) r[i] = name(v[i]);                                           \
    return r;                                                                                \
  }
KIR_M1(exp, std::exp(x))
KIR_M1(exp2, std::exp2(x))
KIR_M1(exp10, std::pow(10.0f, x))
KIR_M1(log, std::log(x))
KIR_M1(log2, std::log2(x))
KIR_M1(log10, std::log10(x))
KIR_M1(sqrt, std::sqrt(x))
KIR_M1(rsqrt, 1.0f / std::sqrt(x))
KIR_M1(sin, std::sin(x))
KIR_M1(cos, std::cos(x))
KIR_M1(tan, std::tan(x))
KIR_M1(asin, std::asin(x))
KIR_M1(acos, std::acos(x))
KIR_M1(atan, std::atan(x))
KIR_M1(sinh, std::sinh(x))
KIR_M1(cosh, std::cosh(x))
KIR_M1(tanh, std::tanh(x))
KIR_M1(asinh, std::asinh(x))
KIR_M1(acosh, std::acosh(x))
KIR_M1(atanh, std::atanh(x))
KIR_M1(sinpi, std::sin(3.14159265358979323846 * std::fmod((double)x, 2.0)))
KIR_M1(cospi, std::cos(3.14159265358979323846 * std::fmod((double)x, 2.0)))
KIR_M1(erf, std::erf(x))
KIR_M1(floor, std::floor(x))
KIR_M1(ceil, std::ceil(x))
KIR_M1(round, std::round(x))
KIR_M1(rint, std::nearbyint(x))
KIR_M1(trunc, std::trunc(x))
KIR_M1(fract, x - std::floor(x))
KIR_M1(fabs, std::fabs(x))
KIR_M1(log1p, std::log1p(x))
KIR_M1(expm1, std::expm1(x))
KIR_M1(saturate, std::fmin(std::fmax(x, 0.0f), 1.0f))
KIR_M1(sign, (x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f))
#undef KIR_M1

template <class T, std::enable_if_t<is_scalar_v<T>, int> = 0>
inline T abs(T x) { return x < T(0) ? T(-x) : x; }
template <class T, int N>
inline vec<T, N> abs(const vec<T, N>& v) { vec<T, N> r; for (int i = 0; i < N; i++) r[i] = abs(v[i]); return r; }
template <class T, std::enable_if_t<is_scalar_v<T>, int> = 0> inline bool isnan(T x) { return std::isnan((float)x); }
template <class T, std::enable_if_t<is_scalar_v<T>, int> = 0> inline bool isinf(T x) { return std::isinf((float)x); }
template <class T, std::enable_if_t<is_scalar_v<T>, int> = 0> inline bool isfinite(T x) { return std::isfinite((float)x); }
template <class T, std::enable_if_t<is_scalar_v<T>, int> = 0> inline bool signbit(T x) { return std::signbit((float)x); }

#define KIR_M2(name, expr)                                                                   \
  template <class A, class B, std::enable_if_t<is_scalar_v<A> && is_scalar_v<B>, int> = 0>   \
  inline mct<A, B> name(A a_, B b_) {                                                        \
    using R = mct<A, B>;                                                                     \
    R a = (R)a_, b = (R)b_;                                                                  \
    return (R)(expr);                                                                        \
  }                                                                                          \
  template <class T, int N>                                                                  \
  inline vec<T, N> name(const vec<T, N>& a, const vec<T, N>& b) {                            \
    vec<T, N> r;                                                                             \
    for (int i = 0; i < N; i++) r[i] = name(a[i], b[i]);                                     \
    return r;                                                                                \
  }                                                                                          \
  template <class T, int N, class S, std::enable_if_t<is_scalar_v<S>, int> = 0>             \
  inline vec<T, N> name(const vec<T, N>& a, S b) {                                           \
    vec<T, N> r;                                                                             \
    for (int i = 0; i < N; i++) r[i] = name(a[i], (T)b);                                     \
    return r;                                                                                \
  }
// max/min of floats follow fmax/fmin (a NaN operand loses), like Metal
KIR_M2(max, (is_fp_v<R> ? (R)std::fmax((float)a, (float)b) : (a > b ? a : b)))
KIR_M2(min, (is_fp_v<R> ? (R)std::fmin((float)a, (float)b) : (a < b ? a : b)))
KIR_M2(fmax, std::fmax((float)a, (float)b))
KIR_M2(fmin, std::fmin((float)a, (float)b))
KIR_M2(pow, std::pow((float)a, (float)b))
KIR_M2(powr, std::pow((float)a, (float)b))
KIR_M2(atan2, std::atan2((float)a, (float)b))
KIR_M2(fmod, std::fmod((float)a, (float)b))
KIR_M2(copysign, std::copysign((float)a, (float)b))
KIR_M2(step, ((float)b < (float)a ? 0.0f : 1.0f))
KIR_M2(divide, ((float)a / (float)b))
#undef KIR_M2

template <class A, class B, class C, std::enable_if_t<is_scalar_v<A>, int> = 0>
inline A clamp(A x, B lo, C hi) { return min(max(x, (A)lo), (A)hi); }
template <class T, int N, class B, class C>
inline vec<T, N> clamp(const vec<T, N>& x, const B& lo, const C& hi) { return min(max(x, lo), hi); }
template <class A, class B, class C>
inline auto fma(A a, B b, C c) {
  if constexpr (is_scalar_v<A>) {
    using R = mct<A, mct<B, C>>;
    if constexpr (sizeof(R) < 4)  // half / bfloat: one rounding, as the GPU's fma (the
      return (R)std::fma((double)a, (double)b, (double)c);  // f16 product is exact in f64)
    return (R)std::fma((float)a, (float)b, (float)c);
  } else {
    A r;
    for (int i = 0; i < kir_emu::ncomp<A>(); i++) r[i] = fma(a[i], b[i], c[i]);
    return r;
  }
}
template <class A, class B, class C>
inline A mix(A x, B y, C t) { return x + (y - x) * t; }
template <class A, class B, class C>
inline A select(A a, B b, C c) {
  if constexpr (std::is_same_v<C, bool>) return c ? (A)b : a;
  else { A r; for (int i = 0; i < kir_emu::ncomp<A>(); i++) r[i] = c[i] ? b[i] : a[i]; return r; }
}
template <class T, int N>
inline T dot(const vec<T, N>& a, const vec<T, N>& b) { T s = 0; for (int i = 0; i < N; i++) s += a[i] * b[i]; return s; }
template <class T, int N>
inline T length(const vec<T, N>& a) { return (T)std::sqrt((float)dot(a, a)); }
template <class T> inline T popcount(T x) { return (T)__builtin_popcountll((unsigned long long)x & (~0ull >> (64 - 8 * sizeof(T)))); }
template <class T> inline T clz(T x) { return x == 0 ? T(8 * sizeof(T)) : (T)(__builtin_clzll((unsigned long long)x) - (64 - 8 * sizeof(T))); }
template <class T> inline T ctz(T x) { return x == 0 ? T(8 * sizeof(T)) : (T)__builtin_ctzll((unsigned long long)x); }
template <class T> inline T mulhi(T a, T b) { return (T)(((__int128)a * (__int128)b) >> (8 * sizeof(T))); }

template <class To, class From>
inline To as_type(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "as_type: size mismatch");
  To t;
  memcpy((void*)&t, &f, sizeof(To));
  return t;
}

// fast:: and precise:: variants compute exactly here (tests compare with tolerances)
namespace fast {
using metal::exp; using metal::exp2; using metal::exp10; using metal::log; using metal::log2; using metal::log10;
using metal::sqrt; using metal::rsqrt; using metal::sin; using metal::cos; using metal::tan; using metal::tanh;
using metal::pow; using metal::powr; using metal::max; using metal::min; using metal::fmax; using metal::fmin;
using metal::divide; using metal::abs; using metal::fabs; using metal::floor; using metal::ceil; using metal::clamp;
using metal::saturate; using metal::atan; using metal::atan2; using metal::sinh; using metal::cosh; using metal::round;
using metal::trunc; using metal::fract; using metal::sign; using metal::length;
}  // namespace fast
namespace precise {
using namespace metal::fast;
using metal::erf; using metal::fma; using metal::log1p; using metal::expm1;
}  // namespace precise

template <class T>
struct numeric_limits : std::numeric_limits<T> {};
template <>
struct numeric_limits<_Float16> {
  static constexpr bool is_specialized = true;
  static constexpr _Float16 infinity() { return (_Float16)__builtin_inff(); }
  static constexpr _Float16 quiet_NaN() { return (_Float16)__builtin_nanf(""); }
  static constexpr _Float16 max() { return (_Float16)65504.0f; }
  static constexpr _Float16 lowest() { return (_Float16)-65504.0f; }
  static constexpr _Float16 min() { return (_Float16)6.103515625e-05f; }
  static constexpr _Float16 epsilon() { return (_Float16)0.0009765625f; }
};
template <>
struct numeric_limits<bfloat> {
  static constexpr bool is_specialized = true;
  static bfloat infinity() { return bfloat(__builtin_inff()); }
  static bfloat quiet_NaN() { return bfloat(__builtin_nanf("")); }
  static bfloat max() { return bfloat(3.38953139e38f); }
  static bfloat lowest() { return bfloat(-3.38953139e38f); }
  static bfloat min() { return bfloat(1.17549435e-38f); }
  static bfloat epsilon() { return bfloat(0.0078125f); }
};
#ifndef MAXFLOAT
#define MAXFLOAT 3.402823466e+38F
#endif
#define HALF_MAX ((metal::half)65504.0f)
#define M_PI_F 3.14159265358979323846f
#define M_LN2_F 0.693147180559945309417f
#define M_LOG2E_F 1.44269504088896340736f

// ---------------------------------------------------------------- barriers
enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline constexpr mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(unsigned(a) | unsigned(b)); }
using SL = std::source_location;
inline void threadgroup_barrier(mem_flags = mem_flags::mem_none, SL l = SL::current()) {
  kir_emu::tg_barrier(kir_emu::site_of(l));
}
inline void simdgroup_barrier(mem_flags = mem_flags::mem_none, SL l = SL::current()) {
  kir_emu::simd_barrier(kir_emu::site_of(l));
}

// ---------------------------------------------------------------- SIMD-group functions
// Every op: publish own value, SIMD barrier, read others'. Lanes that returned are inactive.
namespace detail {
template <class T, class F>
inline T xreduce(const kir_emu::Exchange& e, F f, const T& self) {
  T vals[kir_emu::SIMD_WIDTH];
  int n = 0;
  for (uint32_t l = 0; l < kir_emu::SIMD_WIDTH; l++)
    if (e.mask >> l & 1u) vals[n++] = kir_emu::xread<T>(e, l, self);
  for (int w = 1; w < n; w *= 2)  // a fixed tree: every lane gets the same bits
    for (int i = 0; i + w < n; i += 2 * w) vals[i] = f(vals[i], vals[i + w]);
  return vals[0];
}
template <class T, class F>
inline T xprefix(const kir_emu::Exchange& e, F f, const T& self, bool inclusive, T acc) {
  for (uint32_t l = 0; l < e.lane; l++)
    if (e.mask >> l & 1u) acc = f(acc, kir_emu::xread<T>(e, l, self));
  return inclusive ? f(acc, self) : acc;
}
}  // namespace detail
#define KIR_SIMD_RED(name, op)                                                               \
  template <class T>                                                                         \
  inline T name(T x, SL l = SL::current()) {                                                 \
    auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));                                 \
    return detail::xreduce(e, [](const T& a, const T& b) -> T { return op; }, x);            \
  }
KIR_SIMD_RED(simd_sum, a + b)
KIR_SIMD_RED(simd_product, a * b)
KIR_SIMD_RED(simd_max, max(a, b))
KIR_SIMD_RED(simd_min, min(a, b))
KIR_SIMD_RED(simd_and, a & b)
KIR_SIMD_RED(simd_or, a | b)
KIR_SIMD_RED(simd_xor, a ^ b)
#undef KIR_SIMD_RED
template <class T>
inline T simd_prefix_exclusive_sum(T x, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));
  return detail::xprefix(e, [](const T& a, const T& b) -> T { return a + b; }, x, false, T(0));
}
template <class T>
inline T simd_prefix_inclusive_sum(T x, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));
  return detail::xprefix(e, [](const T& a, const T& b) -> T { return a + b; }, x, true, T(0));
}
template <class T>
inline T simd_shuffle(T x, ushort lane, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));
  return kir_emu::xread<T>(e, lane, x);
}
template <class T>
inline T simd_broadcast(T x, ushort lane, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));
  return kir_emu::xread<T>(e, lane, x);
}
template <class T>
inline T simd_shuffle_xor(T x, ushort mask, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));
  return kir_emu::xread<T>(e, (e.lane ^ mask) & 31u, x);
}
template <class T>
inline T simd_shuffle_down(T x, ushort delta, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));
  uint32_t src = e.lane + delta;
  return src < kir_emu::SIMD_WIDTH ? kir_emu::xread<T>(e, src, x) : x;  // upper lanes keep theirs
}
template <class T>
inline T simd_shuffle_up(T x, ushort delta, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));
  return e.lane >= delta ? kir_emu::xread<T>(e, e.lane - delta, x) : x;  // lower lanes keep theirs
}
template <class T>
inline T simd_broadcast_first(T x, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(x, kir_emu::site_of(l));
  return kir_emu::xread<T>(e, (uint32_t)__builtin_ctz(e.mask), x);
}
inline bool simd_all(bool p, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(p, kir_emu::site_of(l));
  for (uint32_t i = 0; i < 32; i++) if ((e.mask >> i & 1u) && !kir_emu::xread<bool>(e, i, true)) return false;
  return true;
}
inline bool simd_any(bool p, SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(p, kir_emu::site_of(l));
  for (uint32_t i = 0; i < 32; i++) if ((e.mask >> i & 1u) && kir_emu::xread<bool>(e, i, false)) return true;
  return false;
}
inline bool simd_is_first(SL l = SL::current()) {
  auto e = kir_emu::simd_exchange(true, kir_emu::site_of(l));
  return (uint32_t)__builtin_ctz(e.mask) == e.lane;
}

// ---------------------------------------------------------------- simdgroup matrices (MSL 6.7)
// Each lane (fiber) keeps a full copy of the fragment: loads read the whole tile, the product
// is computed by every lane alike, a store writes each element from one lane. Every op is a
// SIMD-group round, so a lane that skips one (divergent code, an exited lane) is reported.
template <class T, int Cols, int Rows>
struct simdgroup_matrix {
  T e[Rows][Cols];
  simdgroup_matrix() : e{} {}
  explicit simdgroup_matrix(T diagonal) : e{} {
    for (int i = 0; i < Rows && i < Cols; i++) e[i][i] = diagonal;
  }
};
using simdgroup_float8x8 = simdgroup_matrix<float, 8, 8>;
using simdgroup_half8x8 = simdgroup_matrix<half, 8, 8>;
namespace detail {
inline uint32_t matrix_round(const char* what, SL l) {
  auto e = kir_emu::simd_exchange(true, kir_emu::site_of(l));
  uint32_t n = e.s->nlanes;
  uint32_t full = n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
  if (n != 32 || e.mask != full)
    kir_emu::fail("%s needs all 32 lanes of the SIMD-group at " KIR_SITE, what,
                  KIR_SITE_ARGS(kir_emu::site_of(l)));
  return e.lane;
}
}  // namespace detail
template <class T, int Cols, int Rows>
inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(const T value, SL l = SL::current()) {
  detail::matrix_round("make_filled_simdgroup_matrix", l);
  simdgroup_matrix<T, Cols, Rows> m;
  for (int i = 0; i < Rows; i++)
    for (int j = 0; j < Cols; j++) m.e[i][j] = value;
  return m;
}
template <class T, int Cols, int Rows, class P, class O = int>
inline void simdgroup_load(simdgroup_matrix<T, Cols, Rows>& d, const P* src, ulong elements_per_row = Cols,
                           O matrix_origin = O(0), bool transpose_matrix = false, SL l = SL::current()) {
  (void)matrix_origin;  // kir always passes the tile's first element as src
  detail::matrix_round("simdgroup_load", l);
  for (int i = 0; i < Rows; i++)
    for (int j = 0; j < Cols; j++)
      d.e[i][j] = (T)(transpose_matrix ? src[j * elements_per_row + i] : src[i * elements_per_row + j]);
}
template <class T, int Cols, int Rows, class P, class O = int>
inline void simdgroup_store(const simdgroup_matrix<T, Cols, Rows>& a, P* dst, ulong elements_per_row = Cols,
                            O matrix_origin = O(0), bool transpose_matrix = false, SL l = SL::current()) {
  (void)matrix_origin;
  uint32_t lane = detail::matrix_round("simdgroup_store", l);
  for (int k = (int)lane; k < Rows * Cols; k += 32) {
    int i = k / Cols, j = k % Cols;
    dst[transpose_matrix ? j * elements_per_row + i : i * elements_per_row + j] = (P)a.e[i][j];
  }
  detail::matrix_round("simdgroup_store", l);  // the tile is whole before any lane goes on
}
template <class T, int N, int K, int M>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<T, N, M>& d, const simdgroup_matrix<T, K, M>& a,
                                          const simdgroup_matrix<T, N, K>& b,
                                          const simdgroup_matrix<T, N, M>& c, SL l = SL::current()) {
  detail::matrix_round("simdgroup_multiply_accumulate", l);
  simdgroup_matrix<T, N, M> r;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float acc = (float)c.e[i][j];
      for (int k = 0; k < K; k++) acc = std::fma((float)a.e[i][k], (float)b.e[k][j], acc);
      r.e[i][j] = (T)acc;
    }
  d = r;
}

// ---------------------------------------------------------------- atomics
// One OS thread runs every GPU thread and a fiber only switches at a barrier, so a plain
// read-modify-write is atomic here. atomic<T> has T's layout: `device atomic<float>*` may point
// into a float buffer, as in MLX's atomic_outputs.
enum memory_order { memory_order_relaxed, memory_order_acquire, memory_order_release, memory_order_acq_rel,
                    memory_order_seq_cst };
enum thread_scope { thread_scope_thread, thread_scope_simdgroup, thread_scope_threadgroup, thread_scope_device };
// Metal 3.2's fence: threadgroups run one after another here, so every earlier write is seen.
inline void atomic_thread_fence(mem_flags, memory_order, thread_scope = thread_scope_device) {}
template <class T>
struct atomic {
  T v;
};
// The checked build sees atomics' loads and stores too: they count for bounds and for
// initialisation, never as races.
#ifdef KIR_EMU_CHECK
#define KIR_ATOMIC ::kir_emu::check::AtomicScope kir_atomic_scope_;
#else
#define KIR_ATOMIC
#endif
using atomic_int = atomic<int>;
using atomic_uint = atomic<uint>;
using atomic_bool = atomic<bool>;
using atomic_float = atomic<float>;
template <class T, class U>
inline T atomic_fetch_add_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC T o = p->v; p->v = T(o + (T)v); return o; }
template <class T, class U>
inline T atomic_fetch_sub_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC T o = p->v; p->v = T(o - (T)v); return o; }
template <class T, class U>
inline T atomic_fetch_and_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC T o = p->v; p->v = T(o & (T)v); return o; }
template <class T, class U>
inline T atomic_fetch_or_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC T o = p->v; p->v = T(o | (T)v); return o; }
template <class T, class U>
inline T atomic_fetch_xor_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC T o = p->v; p->v = T(o ^ (T)v); return o; }
template <class T, class U>
inline T atomic_fetch_max_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC T o = p->v; if ((T)v > o) p->v = (T)v; return o; }
template <class T, class U>
inline T atomic_fetch_min_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC T o = p->v; if ((T)v < o) p->v = (T)v; return o; }
template <class T, class U>
inline T atomic_exchange_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC T o = p->v; p->v = (T)v; return o; }
template <class T>
inline T atomic_load_explicit(const atomic<T>* p, memory_order = memory_order_relaxed) { KIR_ATOMIC return p->v; }
template <class T, class U>
inline void atomic_store_explicit(atomic<T>* p, U v, memory_order = memory_order_relaxed) { KIR_ATOMIC p->v = (T)v; }
template <class T, class U>
inline bool atomic_compare_exchange_weak_explicit(atomic<T>* p, T* expected, U desired, memory_order = memory_order_relaxed,
                                                  memory_order = memory_order_relaxed) { KIR_ATOMIC 
  if (p->v == *expected) { p->v = (T)desired; return true; }
  *expected = p->v;
  return false;
}
template <class T, class U>
inline bool atomic_compare_exchange_strong_explicit(atomic<T>* p, T* expected, U desired,
                                                    memory_order m1 = memory_order_relaxed, memory_order m2 = memory_order_relaxed) { KIR_ATOMIC 
  return atomic_compare_exchange_weak_explicit(p, expected, desired, m1, m2);
}

// ---------------------------------------------------------------- MLX utils subset
template <typename IdxT = int64_t>
inline IdxT elem_to_loc(IdxT elem, const int* shape, const int64_t* strides, int ndim) {
  IdxT loc = 0;
  for (int i = ndim - 1; i >= 0 && elem > 0; --i) {
    loc += (elem % shape[i]) * IdxT(strides[i]);
    elem /= shape[i];
  }
  return loc;
}
template <typename IdxT = int64_t>
inline IdxT elem_to_loc(uint3 elem, const int* shape, const int64_t* strides, int ndim) {
  IdxT loc = elem.x * IdxT(strides[ndim - 1]) + elem.y * IdxT(strides[ndim - 2]);
  for (int d = ndim - 3; d >= 0; --d) {
    loc += (elem.z % shape[d]) * IdxT(strides[d]);
    elem.z /= shape[d];
  }
  return loc;
}
template <typename IdxT = int64_t>
inline IdxT elem_to_loc_1(uint elem, int64_t stride) { return elem * IdxT(stride); }
template <typename IdxT = int64_t>
inline IdxT elem_to_loc_2(uint2 elem, const int64_t* strides) {
  return elem.x * IdxT(strides[1]) + elem.y * IdxT(strides[0]);
}
template <typename IdxT = int64_t>
inline IdxT elem_to_loc_3(uint3 elem, const int64_t* strides) {
  return elem.x * IdxT(strides[2]) + elem.y * IdxT(strides[1]) + elem.z * IdxT(strides[0]);
}
inline size_t ceildiv(size_t n, size_t m) { return (n + m - 1) / m; }
// Limits<T>: +-infinity for floats, the type's range for integers (MLX's utils.h)
template <typename U, bool = is_fp_v<U>>
struct Limits {
  static inline const U max = numeric_limits<U>::max();
  static inline const U min = numeric_limits<U>::min();
  static inline const U finite_max = numeric_limits<U>::max();
  static inline const U finite_min = numeric_limits<U>::min();
};
template <typename U>
struct Limits<U, true> {
  static inline const U max = numeric_limits<U>::infinity();
  static inline const U min = U(-(float)numeric_limits<U>::infinity());
  static inline const U finite_max = numeric_limits<U>::max();
  static inline const U finite_min = U(-(float)numeric_limits<U>::max());
};

}  // namespace metal

// ---------------------------------------------------------------- thread attributes
namespace kir_emu::msl {
using metal::uint;
using metal::uint3;
inline uint3 thread_position_in_grid() {
  auto& f = self(); auto& R = *rt();
  return uint3(R.gid[0] * R.tg[0] + f.tid[0], R.gid[1] * R.tg[1] + f.tid[1], R.gid[2] * R.tg[2] + f.tid[2]);
}
inline uint3 thread_position_in_threadgroup() { auto& f = self(); return uint3(f.tid[0], f.tid[1], f.tid[2]); }
inline uint3 threadgroup_position_in_grid() { auto& R = *rt(); return uint3(R.gid[0], R.gid[1], R.gid[2]); }
inline uint3 threads_per_threadgroup() { auto& R = *rt(); return uint3(R.gsize[0], R.gsize[1], R.gsize[2]); }
inline uint3 dispatch_threads_per_threadgroup() { auto& R = *rt(); return uint3(R.tg[0], R.tg[1], R.tg[2]); }
inline uint3 threadgroups_per_grid() { auto& R = *rt(); return uint3(R.ngroups[0], R.ngroups[1], R.ngroups[2]); }
inline uint3 threads_per_grid() { auto& R = *rt(); return uint3(R.gthreads[0], R.gthreads[1], R.gthreads[2]); }
inline uint3 grid_size() { return threads_per_grid(); }
inline uint3 grid_origin() { return uint3(0u, 0u, 0u); }
inline uint thread_index_in_threadgroup() { return self().lin; }
inline uint thread_index_in_simdgroup() { return self().lane; }
inline uint simdgroup_index_in_threadgroup() { return self().sg; }
inline uint simdgroups_per_threadgroup() { return rt()->nsimd; }
inline uint dispatch_simdgroups_per_threadgroup() { auto& R = *rt(); return (R.tg[0] * R.tg[1] * R.tg[2] + 31) / 32; }
inline uint threads_per_simdgroup() { return SIMD_WIDTH; }
inline uint thread_execution_width() { return SIMD_WIDTH; }
inline uint quadgroup_index_in_threadgroup() { return self().lin / 4; }
inline uint thread_index_in_quadgroup() { return self().lin % 4; }
inline uint quadgroups_per_threadgroup() { return (rt()->nthreads + 3) / 4; }
inline uint dispatch_quadgroups_per_threadgroup() { auto& R = *rt(); return (R.tg[0] * R.tg[1] * R.tg[2] + 3) / 4; }
}  // namespace kir_emu::msl

// ---------------------------------------------------------------- address-space keywords
// Defined last so that no system header sees them.
#define device
#define constant
#define thread
#define kernel
#define METAL_FUNC inline
#endif  // KIR_EMU_METAL_H
