// GPT-2 encoder forward (llm.c style): out[b, t, :] = wte[inp[b, t], :] + wpe[t, :], one
// thread per output element; token ids from a random-int helper.
#include <cuda_runtime.h>
#include <stdlib.h>

int* make_random_int(size_t N, int V) {
    int* arr = (int*)malloc(N * sizeof(int));
    for (size_t i = 0; i < N; i++) {
        arr[i] = rand() % V;
    }
    return arr;
}

float* make_random_float(size_t N) {
    float* arr = (float*)malloc(N * sizeof(float));
    for (size_t i = 0; i < N; i++) {
        arr[i] = ((float)rand() / RAND_MAX) * 2.0 - 1.0;
    }
    return arr;
}

__global__ void encoder_forward_kernel2(float* out, const int* inp, const float* wte,
                                        const float* wpe, int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[b * T + t];
        float* out_btc = out + b * T * C + t * C + c;
        const float* wte_ix = wte + ix * C + c;
        const float* wpe_tc = wpe + t * C + c;
        *out_btc = *wte_ix + *wpe_tc;
    }
}

int main() {
    int B = 2, T = 16, C = 32, V = 100;
    int* inp = make_random_int(B * T, V);
    float* wte = make_random_float(V * C);
    float* wpe = make_random_float(T * C);
    float *d_out, *d_wte, *d_wpe;
    int* d_inp;
    cudaMalloc(&d_out, B * T * C * sizeof(float));
    cudaMalloc(&d_inp, B * T * sizeof(int));
    cudaMalloc(&d_wte, V * C * sizeof(float));
    cudaMalloc(&d_wpe, T * C * sizeof(float));
    cudaMemcpy(d_inp, inp, B * T * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemcpy(d_wte, wte, V * C * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_wpe, wpe, T * C * sizeof(float), cudaMemcpyHostToDevice);
    int block_size = 256;
    const int N = B * T * C;
    const int grid_size = (N + block_size - 1) / block_size;
    encoder_forward_kernel2<<<grid_size, block_size>>>(d_out, d_inp, d_wte, d_wpe, B, T, C);
    return 0;
}
