// expect: 4:5: inline assembly
__global__ void k(float* x) {
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
}
