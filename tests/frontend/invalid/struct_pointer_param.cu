// expect: 3:19: kernel parameter 'p': an array of struct Params, whose members are not all of one scalar type
struct Params { float scale; int n; };
__global__ void k(const Params* p, float* x) {
    x[0] = p->scale;
}
