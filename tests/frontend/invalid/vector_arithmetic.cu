// expect: 4:12: no built-in vector arithmetic
__global__ void k(float4* x) {
    float4 a = x[0];
    x[1] = a + a;
}
