// expect: 4:11: function pointers
__device__ float sq(float v) { return v * v; }
__global__ void k(float* x) {
    float (*op)(float) = sq;
    x[0] = op(x[0]);
}
