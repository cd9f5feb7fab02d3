// PyTorch's device-side names for the emulator's build of an original file that includes
// ATen's or torch's headers (which the emulator does not have): the half types and the
// accumulation types ATen defines for CUDA, as frontends/cuda/torch_types.py reads them.
#pragma once
#include <cstdint>
#include <type_traits>

namespace c10 {
using Half = __half;
using BFloat16 = __nv_bfloat16;
}  // namespace c10

namespace at {
using c10::BFloat16;
using c10::Half;
namespace kir_detail {
template <class T, bool on_cuda>
struct acc {
  using type = std::conditional_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int64_t, T>;
};
template <bool on_cuda> struct acc<__half, on_cuda> { using type = float; };
template <bool on_cuda> struct acc<__nv_bfloat16, on_cuda> { using type = float; };
template <> struct acc<float, false> { using type = double; };
template <class T> struct opmath { using type = T; };
template <> struct opmath<__half> { using type = float; };
template <> struct opmath<__nv_bfloat16> { using type = float; };
}  // namespace kir_detail
template <class T, bool on_cuda>
using acc_type = typename kir_detail::acc<T, on_cuda>::type;
template <class T>
using opmath_type = typename kir_detail::opmath<T>::type;
}  // namespace at
