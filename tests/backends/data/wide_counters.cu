// Running totals kept in place at three widths: 64-bit counts, 16-bit saturating hit
// counters and f64 sums (CUDA only: Metal has no double).
__global__ void tally(const int* __restrict__ hits, const float* __restrict__ x,
                      long long* counts, unsigned short* seen, double* sums, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        counts[i] += (long long)hits[i] << 33;
        unsigned int s = seen[i] + (hits[i] > 0 ? 1u : 0u);
        seen[i] = (unsigned short)(s > 65535u ? 65535u : s);
        sums[i] += (double)x[i] * 0.5;
    }
}
