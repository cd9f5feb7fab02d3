// expect: 4:10: dynamic parallelism
__global__ void child(float* x);
__global__ void k(float* x) {
    child<<<1, 1>>>(x);
}
