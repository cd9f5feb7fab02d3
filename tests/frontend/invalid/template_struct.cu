// expect: 4:5: template type 'Vec2' not supported
template <typename T> struct Vec2 { T x; T y; };
__global__ void k(float* out) {
    Vec2<float> v;
    out[0] = v.x;
}
