// Bitwise atomics as flag and parity kernels use them: atomicOr setting a lane's bit in a
// bucket's mask, atomicAnd clearing bits and a flag when an element fails a test, atomicXor
// folding values into parities (each order-independent, so every target agrees).
__global__ void set_flags(const int* x, unsigned* mask, int* parity, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i];
    atomicOr(&mask[v & 3], 1u << (i % 32));
    atomicXor(&parity[i % 4], v);
}

__global__ void clear_flags(const int* x, int* mask, int* all_ok, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i];
    atomicAnd(&mask[v & 3], (int)~(1u << (i % 32)));
    atomicAnd(&all_ok[0], v > -40 ? ~0 : 0);
}
