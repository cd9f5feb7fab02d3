// Warp votes: each lane stores its warp's ballot of x > 0, any(x > 0.9) and all(x > -0.9).
__global__ void votes(const float* x, unsigned int* ballot, int* any, int* all) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    unsigned int b = __ballot_sync(0xffffffff, v > 0.0f);
    int a = __any_sync(0xffffffff, v > 0.9f);
    int l = __all_sync(0xffffffff, v > -0.9f);
    ballot[i] = b;
    any[i] = a;
    all[i] = l;
}
