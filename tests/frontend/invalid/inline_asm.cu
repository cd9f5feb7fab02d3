// expect: 4:5: inline assembly
__global__ void k(float* x) {
    unsigned slot;
    asm("mov.u32 %0, %%smid;" : "=r"(slot));
}
