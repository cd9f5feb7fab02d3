// C = alpha * A + beta * C, four elements per thread through float4.
__global__ void axpby4(const float* A, float* C, float alpha, float beta, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 a = reinterpret_cast<const float4*>(A)[i];
        float4 c = reinterpret_cast<float4*>(C)[i];
        c.x = alpha * a.x + beta * c.x;
        c.y = alpha * a.y + beta * c.y;
        c.z = alpha * a.z + beta * c.z;
        c.w = alpha * a.w + beta * c.w;
        reinterpret_cast<float4*>(C)[i] = c;
    }
}
