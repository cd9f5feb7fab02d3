// Particle update in the style of CUDA's vendor samples: float3 arithmetic through a
// helper_math.h-like set of free operators, and a complex type with member operators.
#include <cuda_runtime.h>

inline __host__ __device__ float3 operator+(float3 a, float3 b) {
    return make_float3(a.x + b.x, a.y + b.y, a.z + b.z);
}
inline __host__ __device__ float3 operator-(float3 a, float3 b) {
    return make_float3(a.x - b.x, a.y - b.y, a.z - b.z);
}
inline __host__ __device__ float3 operator-(float3 a) { return make_float3(-a.x, -a.y, -a.z); }
inline __host__ __device__ float3 operator*(float3 a, float s) {
    return make_float3(a.x * s, a.y * s, a.z * s);
}
inline __host__ __device__ float3 operator*(float s, float3 a) { return a * s; }
inline __host__ __device__ void operator+=(float3& a, float3 b) {
    a.x += b.x; a.y += b.y; a.z += b.z;
}
inline __host__ __device__ float dot(float3 a, float3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }

struct Cplx {
    float re, im;
    __device__ Cplx operator*(const Cplx& o) const { return {re * o.re - im * o.im, re * o.im + im * o.re}; }
    __device__ Cplx operator+(const Cplx& o) const { return {re + o.re, im + o.im}; }
    __device__ float norm2() const { return re * re + im * im; }
};

// One thread per particle: a spring pulls it to the origin; velocity damped; a phase turns.
__global__ void integrate(float3* __restrict__ pos, float3* __restrict__ vel,
                          float2* __restrict__ phase, float* __restrict__ energy,
                          float dt, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float3 p = pos[i];
    float3 v = vel[i];
    float3 force = -(k * p) - v * 0.1f;
    v += force * dt;
    p = p + dt * v;
    pos[i] = p;
    vel[i] = v;
    Cplx z{phase[i].x, phase[i].y};
    Cplx turn{0.8f, 0.6f};
    z = z * turn + Cplx{dt, dt};
    phase[i] = make_float2(z.re, z.im);
    energy[i] = 0.5f * dot(v, v) + 0.5f * k * dot(p, p) + z.norm2();
}
