// CUDA's integer intrinsics, one output each, grid-stride over n elements: byte permutes and
// bit reversal (hashing, packing), high products (fixed-point, random number generators),
// funnel shifts (rotations), sums of absolute differences, 24-bit products, byte dot products.
#include <cstdint>

__global__ void int_intrinsics(const unsigned* a, const unsigned* b, const int* s, const int* t,
                               const unsigned long long* w, unsigned* perm, unsigned* rev,
                               unsigned long long* rev64, unsigned* hi, int* shi,
                               unsigned long long* hi64, unsigned* rotl, unsigned* rotr,
                               unsigned* clampl, unsigned* clampr, unsigned* sad, int* m24,
                               unsigned* um24, int* dot4, unsigned* udot4, int* dot2, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const unsigned x = a[i], y = b[i];
        perm[i] = __byte_perm(x, y, y & 0x7777u);
        rev[i] = __brev(x);
        rev64[i] = __brevll(w[i]);
        hi[i] = __umulhi(x, y);
        shi[i] = __mulhi(s[i], t[i]);
        hi64[i] = __umul64hi(w[i], w[n - 1 - i]);
        rotl[i] = __funnelshift_l(x, x, y);          // a rotation by y % 32
        rotr[i] = __funnelshift_r(x, y, y >> 27);
        clampl[i] = __funnelshift_lc(x, y, y & 63u);
        clampr[i] = __funnelshift_rc(x, y, (y >> 8) & 63u);
        sad[i] = __sad(s[i], t[i], y & 0xffffu);
        m24[i] = __mul24(s[i], t[i]);
        um24[i] = __umul24(x, y);
        dot4[i] = __dp4a(s[i], t[i], s[i] >> 8);
        udot4[i] = __dp4a(x, y, 7u);
        dot2[i] = __dp2a_lo(s[i], t[i], 3) - __dp2a_hi(t[i], s[i], -5);
    }
}
