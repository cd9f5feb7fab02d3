// A linear layer as LLM training code writes it: out = inp @ weight^T + bias, the weight
// stored [OC][C] (one row per output channel), so the product reads both operands along C.
//
// Launch: grid (ceil(OC / 16), ceil(BT / 16)), block (16, 16). Each block stages a 16 x 16 tile
// of the input rows and one of the weight rows (the rows of this block's output channels) per
// step of 16 along C; the inner product reads the weight tile by [output channel][c].
#include <cuda_runtime.h>

#define TILE 16

__global__ void linear_forward_tiled(float* out, const float* inp, const float* weight,
                                     const float* bias, int BT, int C, int OC) {
    __shared__ float tile_in[TILE][TILE];
    __shared__ float tile_w[TILE][TILE];
    int bt = blockIdx.y * TILE + threadIdx.y;
    int oc = blockIdx.x * TILE + threadIdx.x;
    int w_row = blockIdx.x * TILE + threadIdx.y;  // the weight row this thread stages
    float val = 0.0f;
    for (int c0 = 0; c0 < C; c0 += TILE) {
        tile_in[threadIdx.y][threadIdx.x] =
            (bt < BT && c0 + threadIdx.x < C) ? inp[bt * C + c0 + threadIdx.x] : 0.0f;
        tile_w[threadIdx.y][threadIdx.x] =
            (w_row < OC && c0 + threadIdx.x < C) ? weight[w_row * C + c0 + threadIdx.x] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) {
            val += tile_in[threadIdx.y][k] * tile_w[threadIdx.x][k];
        }
        __syncthreads();
    }
    if (bt < BT && oc < OC) {
        out[bt * OC + oc] = val + bias[oc];
    }
}
