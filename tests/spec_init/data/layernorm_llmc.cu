// LayerNorm forward, one thread per row (llm.c dev/cuda style): mean and rstd are saved for
// the backward pass. N = B * T rows of C channels.
#include <cuda_runtime.h>
#include <stdlib.h>

#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))

float* make_random_float(size_t N) {
    float* arr = (float*)malloc(N * sizeof(float));
    for (size_t i = 0; i < N; i++) {
        arr[i] = ((float)rand() / RAND_MAX) * 2.0 - 1.0;
    }
    return arr;
}

__global__ void layernorm_forward_kernel1(float* out, float* mean, float* rstd,
                                          const float* inp, const float* weight,
                                          const float* bias, int N, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    float eps = 1e-5f;
    if (idx < N) {
        const float* x = inp + idx * C;
        float m = 0.0f;
        for (int i = 0; i < C; i++) {
            m += x[i];
        }
        m = m / C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float xshift = x[i] - m;
            v += xshift * xshift;
        }
        v = v / C;
        float s = 1.0f / sqrtf(v + eps);
        float* out_idx = out + idx * C;
        for (int i = 0; i < C; i++) {
            float n = (s * (x[i] - m));
            out_idx[i] = n * weight[i] + bias[i];
        }
        mean[idx] = m;
        rstd[idx] = s;
    }
}

int main() {
    int B = 2;
    int T = 24;
    int C = 48;
    float* inp = make_random_float(B * T * C);
    float* weight = make_random_float(C);
    float* bias = make_random_float(C);

    float *d_out, *d_mean, *d_rstd, *d_inp, *d_weight, *d_bias;
    cudaMalloc(&d_out, B * T * C * sizeof(float));
    cudaMalloc(&d_mean, B * T * sizeof(float));
    cudaMalloc(&d_rstd, B * T * sizeof(float));
    cudaMalloc(&d_inp, B * T * C * sizeof(float));
    cudaMalloc(&d_weight, C * sizeof(float));
    cudaMalloc(&d_bias, C * sizeof(float));
    cudaMemcpy(d_inp, inp, B * T * C * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_weight, weight, C * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_bias, bias, C * sizeof(float), cudaMemcpyHostToDevice);

    const int N = B * T;
    const int block_size = 64;
    const int grid_size = CEIL_DIV(N, block_size);
    layernorm_forward_kernel1<<<grid_size, block_size>>>(d_out, d_mean, d_rstd, d_inp,
                                                         d_weight, d_bias, N, C);
    return 0;
}
