// expect: 3:19: kernel parameter 'p' of type struct Params not supported
struct Params { float scale; int n; };
__global__ void k(const Params* p, float* x) {
    x[0] = p->scale;
}
