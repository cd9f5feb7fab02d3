// LLM-training style: one thread per row, no warp cooperation.
__global__ void softmax_thread_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; c++) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; c++) s += expf(xr[c] - m);
    for (int c = 0; c < cols; c++) y[row * cols + c] = expf(xr[c] - m) / s;
}
