// A linear layer's first CUDA version, one output element per thread: out = inp @ weight^T +
// bias with the weight stored [OC][C]. The output channel runs along x (consecutive threads,
// consecutive channels), the row along y; the bias is added after the dot product.
//
// Launch: grid (ceil(OC / 32), ceil(BT / 8)), block (32, 8).
#include <cuda_runtime.h>

__global__ void linear_forward_naive(float* out, const float* inp, const float* weight,
                                     const float* bias, int BT, int C, int OC) {
    int oc = blockIdx.x * blockDim.x + threadIdx.x;
    int bt = blockIdx.y * blockDim.y + threadIdx.y;
    if (bt < BT && oc < OC) {
        float val = 0.0f;
        for (int c = 0; c < C; c++) {
            val += inp[bt * C + c] * weight[oc * C + c];
        }
        out[bt * OC + oc] = val + bias[oc];
    }
}
