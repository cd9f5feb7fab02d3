// Vectorized elementwise kernel in the style of deep-learning frameworks' CUDA code: an
// AlignedVector<T, N> struct template read and written over the buffers through Load/Store
// helpers that take a pointer to the local vector.
template <typename T, int Size>
struct alignas(sizeof(T) * Size) AlignedVector {
  T val[Size];
  __host__ __device__ inline const T& operator[](int i) const { return val[i]; }
  __host__ __device__ inline T& operator[](int i) { return val[i]; }
};
template <typename T, int Size>
__device__ __forceinline__ void Load(const T* addr, AlignedVector<T, Size>* vec) {
  const AlignedVector<T, Size>* addr_vec = reinterpret_cast<const AlignedVector<T, Size>*>(addr);
  *vec = *addr_vec;
}
template <typename T, int Size>
__device__ __forceinline__ void Store(const AlignedVector<T, Size>& vec, T* addr) {
  AlignedVector<T, Size>* addr_vec = reinterpret_cast<AlignedVector<T, Size>*>(addr);
  *addr_vec = vec;
}
template <typename T, int VecSize>
__global__ void scale_bias(const T* x, const T* bias, T* y, T alpha, int n, int cols) {
  using LoadT = AlignedVector<T, VecSize>;
  int idx = (blockIdx.x * blockDim.x + threadIdx.x) * VecSize;
  int stride = gridDim.x * blockDim.x * VecSize;
  for (; idx < n; idx += stride) {
    LoadT xv, bv, out;
    Load<T, VecSize>(x + idx, &xv);
    Load<T, VecSize>(bias + idx % cols, &bv);
#pragma unroll
    for (int k = 0; k < VecSize; ++k) out[k] = alpha * xv[k] + bv[k];
    Store<T, VecSize>(out, y + idx);
  }
}
