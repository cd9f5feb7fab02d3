// Macro-generated kernel families, one instance per dtype (as kernel libraries write them):
// the float instances lower; the others are refused one by one, each with its reason.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define ID(x) (x)
#define TO_F32(x) ((float)(x))

#define UNARY_OP(NAME, T, TO_F, FROM_F, EXPR)                                         \
    extern "C" __global__ void NAME(const T* __restrict__ x, T* __restrict__ y,        \
                                    const int n) {                                     \
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;                     \
             i += blockDim.x * gridDim.x) {                                            \
            float v = TO_F(x[i]);                                                      \
            y[i] = FROM_F(EXPR);                                                       \
        }                                                                              \
    }

#define RELU(v) fmaxf(v, 0.0f)
#define SILU(v) ((v) / (1.0f + expf(-(v))))
#define GELU_ERF(v) (0.5f * (v) * (1.0f + erff((v) * 0.70710678f)))

UNARY_OP(relu_f32, float, ID, ID, RELU(v))
UNARY_OP(relu_f16, __half, __half2float, __float2half, RELU(v))
UNARY_OP(relu_bf16, __nv_bfloat16, __bfloat162float, __float2bfloat16, RELU(v))
UNARY_OP(relu_u8, uint8_t, TO_F32, (uint8_t), RELU(v))
UNARY_OP(silu_f32, float, ID, ID, SILU(v))
UNARY_OP(silu_f16, __half, __half2float, __float2half, SILU(v))
UNARY_OP(gelu_erf_f32, float, ID, ID, GELU_ERF(v))
UNARY_OP(gelu_erf_f64, double, ID, ID, GELU_ERF(v))

#define BINARY_OP(NAME, T, OP)                                                         \
    extern "C" __global__ void NAME(const T* a, const T* b, T* out, int n) {           \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                 \
        if (i < n) out[i] = a[i] OP b[i];                                              \
    }

BINARY_OP(add_f32, float, +)
BINARY_OP(mul_f32, float, *)
BINARY_OP(add_i32, int, +)
BINARY_OP(add_i8, int8_t, +)
BINARY_OP(mul_h2, __half2, *)

// Affine with optional bias, typed by a template and instantiated by a macro per dtype.
template <typename T>
__device__ void affine_impl(const T* x, const T* bias, T* y, float scale, int n, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float b = bias ? static_cast<float>(bias[i % cols]) : 0.0f;
    y[i] = static_cast<T>(static_cast<float>(x[i]) * scale + b);
}

#define AFFINE(NAME, T)                                                                \
    extern "C" __global__ void NAME(const T* x, const T* bias, T* y, float scale,      \
                                    int n, int cols) {                                 \
        affine_impl<T>(x, bias, y, scale, n, cols);                                    \
    }

AFFINE(affine_f32, float)
AFFINE(affine_f16, __half)
AFFINE(affine_u8, unsigned char)
