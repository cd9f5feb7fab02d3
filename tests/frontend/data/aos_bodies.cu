// An n-body style integration step over an array of structs, as physics samples write it:
// the kernel takes `const Body*` and `Body*` (members all floats: scalars, an array and a
// float3), reads whole structs and single members, and writes whole structs back.
#include <cuda_runtime.h>

struct Body {
    float mass;
    float vel[3];
    float age;
    float3 pos;   // last, at float 5: a 3-vector access must not touch the next Body
};

__device__ inline float kinetic(const Body& b) {
    return 0.5f * b.mass * (b.vel[0] * b.vel[0] + b.vel[1] * b.vel[1] + b.vel[2] * b.vel[2]);
}

__global__ void advance_bodies(const Body* __restrict__ bodies, Body* __restrict__ next,
                               float* __restrict__ energy, int n, float dt) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        Body b = bodies[i];
        b.pos.x += b.vel[0] * dt;
        b.pos.y += b.vel[1] * dt;
        b.pos.z += b.vel[2] * dt;
        b.vel[2] -= 9.81f * dt;
        b.age += dt;
        next[i] = b;
        energy[i] = kinetic(bodies[i]) + bodies[i].mass * 9.81f * b.pos.z;
    }
}
