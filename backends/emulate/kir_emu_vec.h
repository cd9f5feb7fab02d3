// kir_emu_vec.h -- short vector types (float4, uint3, half2 ...) for the Metal and CUDA shims.
// Members .x .y .z .w (and .r .g .b .a) plus operator[]; element-wise arithmetic; a scalar
// broadcasts. Swizzles (.xy) are not modelled. 3-vectors are padded to 4 elements, as in Metal,
// unless the includer defines KIR_EMU_VEC3_ALIGN (CUDA's float3 is three floats, aligned to 4).
#ifndef KIR_EMU_VEC_H
#define KIR_EMU_VEC_H
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kir_emu {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<std::remove_cv_t<T>, _Float16>;
template <class T>
inline constexpr bool is_scalar_v = std::is_arithmetic_v<std::remove_cv_t<T>> || is_half_v<T>;

// Union of an array and named members (GNU anonymous-struct extension; GCC and Clang document
// type punning through unions).
template <class T, int N>
struct vstore;
template <class T>
struct alignas(2 * sizeof(T)) vstore<T, 2> {
  union { T v_[2]; struct { T x, y; }; struct { T r, g; }; };
};
#ifndef KIR_EMU_VEC3_ALIGN
#define KIR_EMU_VEC3_ALIGN(T) alignas(4 * sizeof(T))
#endif
template <class T>
struct KIR_EMU_VEC3_ALIGN(T) vstore<T, 3> {
  union { T v_[3]; struct { T x, y, z; }; struct { T r, g, b; }; };
};
template <class T>
struct alignas(4 * sizeof(T)) vstore<T, 4> {
  union { T v_[4]; struct { T x, y, z, w; }; struct { T r, g, b, a; }; };
};

template <class T, int N>
struct vec;
template <class T>
struct is_vec : std::false_type {};
template <class T, int N>
struct is_vec<vec<T, N>> : std::true_type {};
template <class A>
constexpr int ncomp() {
  if constexpr (is_vec<A>::value) return sizeof(A::v_) / sizeof(A::v_[0]);
  else return 1;
}

template <class T, int N>
struct vec : vstore<T, N> {
  using value_type = T;
  vec() = default;  // trivial: uninitialised like GPU registers, no static-init guards
  template <class S, std::enable_if_t<is_scalar_v<S>, int> = 0>
  constexpr vec(S s) {
    for (int i = 0; i < N; i++) this->v_[i] = (T)s;
  }
  template <class A0, class A1, class... A,
            std::enable_if_t<(ncomp<A0>() + ncomp<A1>() + (0 + ... + ncomp<A>())) == N, int> = 0>
  constexpr vec(A0 a0, A1 a1, A... a) {  // float4(a,b,c,d), float4(float2, float2), float4(float3, w)
    int k = 0;
    put(k, a0);
    put(k, a1);
    (put(k, a), ...);
  }
  template <class U, std::enable_if_t<!std::is_same_v<U, T>, int> = 0>
  explicit constexpr vec(const vec<U, N>& o) {
    for (int i = 0; i < N; i++) this->v_[i] = (T)o.v_[i];
  }
  constexpr T& operator[](int i) { return this->v_[i]; }
  constexpr const T& operator[](int i) const { return this->v_[i]; }

 private:
  template <class A>
  constexpr void put(int& k, const A& a) {
    if constexpr (is_vec<A>::value) {
      for (int i = 0; i < ncomp<A>(); i++) this->v_[k++] = (T)a.v_[i];
    } else {
      this->v_[k++] = (T)a;
    }
  }
};

#define KIR_VBIN(op)                                                                         \
  template <class T, int N>                                                                  \
  constexpr vec<T, N> operator op(const vec<T, N>& a, const vec<T, N>& b) {                  \
    vec<T, N> r;                                                                             \
    for (int i = 0; i < N; i++) r.v_[i] = a.v_[i] op b.v_[i];                                \
    return r;                                                                                \
  }                                                                                          \
  template <class T, int N, class S, std::enable_if_t<is_scalar_v<S>, int> = 0>             \
  constexpr vec<T, N> operator op(const vec<T, N>& a, S b) {                                 \
    vec<T, N> r;                                                                             \
    for (int i = 0; i < N; i++) r.v_[i] = a.v_[i] op (T)b;                                   \
    return r;                                                                                \
  }                                                                                          \
  template <class T, int N, class S, std::enable_if_t<is_scalar_v<S>, int> = 0>             \
  constexpr vec<T, N> operator op(S a, const vec<T, N>& b) {                                 \
    vec<T, N> r;                                                                             \
    for (int i = 0; i < N; i++) r.v_[i] = (T)a op b.v_[i];                                   \
    return r;                                                                                \
  }                                                                                          \
  template <class T, int N, class U>                                                         \
  constexpr vec<T, N>& operator op##=(vec<T, N>& a, const U& b) {                            \
    a = a op b;                                                                              \
    return a;                                                                                \
  }
KIR_VBIN(+)
KIR_VBIN(-)
KIR_VBIN(*)
KIR_VBIN(/)
KIR_VBIN(%)
KIR_VBIN(&)
KIR_VBIN(|)
KIR_VBIN(^)
KIR_VBIN(<<)
KIR_VBIN(>>)
#undef KIR_VBIN

#define KIR_VCMP(op)                                                                         \
  template <class T, int N>                                                                  \
  constexpr vec<bool, N> operator op(const vec<T, N>& a, const vec<T, N>& b) {               \
    vec<bool, N> r;                                                                          \
    for (int i = 0; i < N; i++) r.v_[i] = a.v_[i] op b.v_[i];                                \
    return r;                                                                                \
  }                                                                                          \
  template <class T, int N, class S, std::enable_if_t<is_scalar_v<S>, int> = 0>             \
  constexpr vec<bool, N> operator op(const vec<T, N>& a, S b) {                              \
    vec<bool, N> r;                                                                          \
    for (int i = 0; i < N; i++) r.v_[i] = a.v_[i] op (T)b;                                   \
    return r;                                                                                \
  }
KIR_VCMP(<)
KIR_VCMP(>)
KIR_VCMP(<=)
KIR_VCMP(>=)
KIR_VCMP(==)
KIR_VCMP(!=)
#undef KIR_VCMP

template <class T, int N>
constexpr vec<T, N> operator-(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; i++) r.v_[i] = -a.v_[i];
  return r;
}
template <class T, int N>
constexpr vec<T, N> operator+(const vec<T, N>& a) { return a; }
template <class T, int N>
constexpr vec<T, N> operator~(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; i++) r.v_[i] = ~a.v_[i];
  return r;
}
template <int N>
constexpr vec<bool, N> operator!(const vec<bool, N>& a) {
  vec<bool, N> r;
  for (int i = 0; i < N; i++) r.v_[i] = !a.v_[i];
  return r;
}
template <int N>
constexpr bool all(const vec<bool, N>& a) {
  for (int i = 0; i < N; i++) if (!a.v_[i]) return false;
  return true;
}
template <int N>
constexpr bool any(const vec<bool, N>& a) {
  for (int i = 0; i < N; i++) if (a.v_[i]) return true;
  return false;
}
constexpr bool all(bool b) { return b; }
constexpr bool any(bool b) { return b; }

}  // namespace kir_emu
#endif  // KIR_EMU_VEC_H
