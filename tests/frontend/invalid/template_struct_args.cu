// expect: 4:5: struct template 'Vec2' needs its template arguments
template <typename T> struct Vec2 { T x; T y; };
__global__ void k(float* out) {
    Vec2 v;
    out[0] = v.x;
}
