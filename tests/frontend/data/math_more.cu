// Less common math.h and CUDA math functions as simulation, statistics and quantization
// kernels call them: probabilities (normcdff, erfcf), geometry (hypotf, norm3df, rnorm3df,
// rhypotf, cbrtf), periodic signals (sinpif, cospif), decibels (exp10f), hyperbolic angles,
// integer rounding (lrintf, llroundf), exponent scaling (ldexpf), signbit and fdimf.
#include <math.h>

#define SQRT_HALF M_SQRT1_2

__global__ void math_more(const float* __restrict__ x, const float* __restrict__ y,
                          const int* __restrict__ e, float* __restrict__ prob,
                          float* __restrict__ tail, float* __restrict__ geo,
                          float* __restrict__ wave, float* __restrict__ hyper,
                          long long* __restrict__ rounded, float* __restrict__ scaled,
                          int* __restrict__ sign, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float a = x[i], b = y[i];
    prob[i] = normcdff(a * 3.0f);
    tail[i] = erfcf(fabsf(a) * 4.0f) + erfcf(-b);
    geo[i] = hypotf(a, b) + norm3df(a, b, 1.5f) + rnorm3df(a, 2.0f, b) + rhypotf(b, 0.5f)
             + cbrtf(a * 10.0f) + rcbrtf(fabsf(b) + 0.1f);
    wave[i] = sinpif(a * 7.0f) + cospif(b * 3.0f) + exp10f(a) + __exp10f(b) * 0.0f;
    hyper[i] = asinhf(a * 5.0f) + acoshf(fabsf(b) + 1.0f) + atanhf(a * 0.9f);
    rounded[i] = lrintf(a * 1000.0f) + 3 * llroundf(b * 77.0f);
    scaled[i] = ldexpf(a, e[i]) + scalbnf(b, -e[i] / 2);
    sign[i] = signbit(a) * 2 + (fdimf(a, b) > 0.0f) + 4 * (a < (float)(SQRT_HALF * M_LOG2E) - 1.0f);
}
