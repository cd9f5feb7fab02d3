// Shared-memory double buffers swapped by pointer: a 1-D three-point smoothing run for a
// number of sweeps over one row a block, then written back.
#define ROW 128

__global__ void smooth_rows(const float* __restrict__ x, float* __restrict__ y, int sweeps) {
    __shared__ float ping[ROW];
    __shared__ float pong[ROW];
    float* cur = ping;
    float* nxt = pong;
    const int t = threadIdx.x;
    const float* row = x + blockIdx.x * ROW;
    cur[t] = row[t];
    __syncthreads();
    for (int s = 0; s < sweeps; ++s) {
        const float left = t > 0 ? cur[t - 1] : cur[t];
        const float right = t < ROW - 1 ? cur[t + 1] : cur[t];
        nxt[t] = 0.25f * left + 0.5f * cur[t] + 0.25f * right;
        __syncthreads();
        float* was = cur;
        cur = nxt;
        nxt = was;
    }
    y[blockIdx.x * ROW + t] = cur[t];
}
