// Row max and sum of squares through function objects: templated data-free structs with a
// call operator, passed by value to a templated warp reduction, called as Op()(a, b) and op(x).
template <typename T>
struct MaxOp {
  __device__ __forceinline__ T operator()(const T& a, const T& b) const { return a > b ? a : b; }
};
template <typename T>
struct SumOp {
  __device__ __forceinline__ T operator()(const T& a, const T& b) const { return a + b; }
};
struct Square {
  __device__ float operator()(float x) const { return x * x; }
};

template <typename Op, typename T>
__device__ __forceinline__ T warp_all_reduce(T val, Op op) {
#pragma unroll
  for (int mask = 16; mask > 0; mask /= 2) val = op(val, __shfl_xor_sync(0xffffffff, val, mask));
  return val;
}

__global__ void row_stats(const float* __restrict__ x, float* __restrict__ mx, float* __restrict__ ss, int cols) {
  const int row = blockIdx.x;
  float m = -INFINITY, s = 0.0f;
  Square sq;
  for (int c = threadIdx.x; c < cols; c += 32) {
    float v = x[row * cols + c];
    m = MaxOp<float>()(m, v);
    s += sq(v);
  }
  m = warp_all_reduce(m, MaxOp<float>());
  s = warp_all_reduce(s, SumOp<float>());
  if (threadIdx.x == 0) { mx[row] = m; ss[row] = s; }
}

// an element-wise map taking its function object by value, as a kernel parameter
template <typename Op>
__global__ void map_elements(const float* __restrict__ x, float* __restrict__ y, int n, Op op) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = op(x[i]);
}
