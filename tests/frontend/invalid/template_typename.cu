// expect: 3:19: template type parameter 'T'
template <typename T>
__global__ void k(T* x) {
    x[0] = 0;
}
