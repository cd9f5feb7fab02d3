// Block-wide votes (__syncthreads_count / _or / _and), as early-exit and compaction loops use them.
__global__ void votes(const float* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  int c = __syncthreads_count(v > 0.0f);
  int o = __syncthreads_or(v > 1.5f);
  int a = __syncthreads_and(v > -10.0f);
  for (int k = 0; k < 2; ++k) c += __syncthreads_count(v > 0.5f * k);
  if (threadIdx.x == 0) { out[3 * blockIdx.x] = c; out[3 * blockIdx.x + 1] = o; out[3 * blockIdx.x + 2] = a; }
}
