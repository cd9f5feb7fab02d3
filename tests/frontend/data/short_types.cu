// 16-bit integer types as checkpoint loaders and packers use them: bfloat16 weights kept as
// raw uint16_t bits widened to float, a short offset, an unsigned short sort key that wraps
// at 16 bits, and a 32-bit value read as two uint16_t halves of a byte buffer.
#include <cstdint>

__global__ void widen_bf16_bits(const uint16_t* __restrict__ raw, const short* __restrict__ offs,
                                const uint8_t* __restrict__ bytes, float* __restrict__ out,
                                unsigned short* __restrict__ keys, int* __restrict__ words,
                                short* __restrict__ halves, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const uint32_t bits = static_cast<uint32_t>(raw[i]) << 16;
    out[i] = __uint_as_float(bits) + static_cast<float>(offs[i]);
    unsigned short key = raw[i] ^ 0x8000u;          // sign flipped: orders like the floats
    key += static_cast<unsigned short>(offs[i]);     // wraps at 16 bits
    keys[i] = key;
    const uint16_t* b16 = reinterpret_cast<const uint16_t*>(bytes);
    words[i] = b16[2 * i] | (b16[2 * i + 1] << 16);
    short h = offs[i];
    h = h * 3 - 7;                                   // computed in int, stored wrapped
    halves[i] = h >> 1;
}
