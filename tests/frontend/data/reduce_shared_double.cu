// A block sum in the vendor samples' style: the dynamic shared memory reached through a
// SharedMemory<T> wrapper whose primary template declares it as int (with a double
// specialization beside it), each block summing 2 x blockSize inputs, instantiated for double.
template <class T>
struct SharedMemory {
    __device__ inline operator T*() {
        extern __shared__ int __smem[];
        return (T*)__smem;
    }
};

template <>
struct SharedMemory<double> {
    __device__ inline operator double*() {
        extern __shared__ double __smem_d[];
        return (double*)__smem_d;
    }
};

template <class T, unsigned int blockSize>
__global__ void block_sums(const T* g_idata, T* g_odata, unsigned int n) {
    T* sdata = SharedMemory<T>();
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
    T sum = (i < n) ? g_idata[i] : 0;
    if (i + blockSize < n) sum += g_idata[i + blockSize];
    sdata[tid] = sum;
    __syncthreads();
    for (unsigned int s = blockSize / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] = sum = sum + sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = sum;
}

template __global__ void block_sums<double, 128>(const double*, double*, unsigned int);
