// expect: 3:17: reinterpreting a f32 buffer as i32
__global__ void k(float* x) {
    int* bits = reinterpret_cast<int*>(x);
}
