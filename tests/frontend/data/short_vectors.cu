// 16-bit integer vectors (short2, ushort4, make_short2, make_ushort4): int16 pairs read as
// one vector, swapped and widened into an unsigned quad, their difference stored.
__global__ void pairs(const short2* __restrict__ x, ushort4* __restrict__ y,
                      short* __restrict__ z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    short2 a = x[i];
    y[i] = make_ushort4(a.x, a.y, 7, 9);
    short2 c = make_short2(a.y, a.x);
    z[i] = c.x - c.y;
}
