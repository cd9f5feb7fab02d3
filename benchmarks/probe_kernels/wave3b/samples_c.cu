// CUDA-samples-style kernels, third batch: particles' integrate step with helper_math.h-style
// float3 operators and a __constant__ SimParams struct, simpleTexture's rotation through a
// texture object, a radix-2 FFT in shared memory on cuFloatComplex (bit reversal with __brev,
// twiddles from sincospif), and a Hillis-Steele scan that swaps two shared-memory pointers.
#include <cuda_runtime.h>
#include <cuComplex.h>

// ------------------------------------------------------------------------------------------
// helper_math.h-style operators
inline __host__ __device__ float3 make_float3(float4 a) { return make_float3(a.x, a.y, a.z); }
inline __host__ __device__ float4 make_float4(float3 a, float w) { return make_float4(a.x, a.y, a.z, w); }
inline __host__ __device__ float3 operator+(float3 a, float3 b) { return make_float3(a.x + b.x, a.y + b.y, a.z + b.z); }
inline __host__ __device__ void operator+=(float3 &a, float3 b) { a.x += b.x; a.y += b.y; a.z += b.z; }
inline __host__ __device__ float3 operator-(float3 a, float3 b) { return make_float3(a.x - b.x, a.y - b.y, a.z - b.z); }
inline __host__ __device__ void operator-=(float3 &a, float3 b) { a.x -= b.x; a.y -= b.y; a.z -= b.z; }
inline __host__ __device__ float3 operator*(float3 a, float b) { return make_float3(a.x * b, a.y * b, a.z * b); }
inline __host__ __device__ float3 operator*(float b, float3 a) { return make_float3(b * a.x, b * a.y, b * a.z); }
inline __host__ __device__ void operator*=(float3 &a, float b) { a.x *= b; a.y *= b; a.z *= b; }
inline __host__ __device__ float3 operator/(float3 a, float b) { return make_float3(a.x / b, a.y / b, a.z / b); }
inline __host__ __device__ float dot(float3 a, float3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline __host__ __device__ float length(float3 v) { return sqrtf(dot(v, v)); }

struct SimParams {
    float3 colliderPos;
    float colliderRadius;
    float3 gravity;
    float globalDamping;
    float particleRadius;
    float boundaryDamping;
};

__constant__ SimParams params;

__global__ void integrateSystemD(float4 *posArray, float4 *velArray, float deltaTime,
                                 unsigned int numParticles) {
    unsigned int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= numParticles) return;

    volatile float4 posData = posArray[index];
    volatile float4 velData = velArray[index];
    float3 pos = make_float3(posData.x, posData.y, posData.z);
    float3 vel = make_float3(velData.x, velData.y, velData.z);

    vel += params.gravity * deltaTime;
    vel *= params.globalDamping;

    // new position = old position + velocity * deltaTime
    pos += vel * deltaTime;

    // bounce off the collider sphere
    float3 relPos = pos - params.colliderPos;
    float dist = length(relPos);
    if (dist < params.colliderRadius + params.particleRadius) {
        float3 norm = relPos / dist;
        vel -= 2.0f * dot(vel, norm) * norm;
    }

    // set this to zero to disable collisions with cube sides
    if (pos.x > 1.0f - params.particleRadius) {
        pos.x = 1.0f - params.particleRadius;
        vel.x *= params.boundaryDamping;
    }
    if (pos.x < -1.0f + params.particleRadius) {
        pos.x = -1.0f + params.particleRadius;
        vel.x *= params.boundaryDamping;
    }
    if (pos.y > 1.0f - params.particleRadius) {
        pos.y = 1.0f - params.particleRadius;
        vel.y *= params.boundaryDamping;
    }
    if (pos.z > 1.0f - params.particleRadius) {
        pos.z = 1.0f - params.particleRadius;
        vel.z *= params.boundaryDamping;
    }
    if (pos.z < -1.0f + params.particleRadius) {
        pos.z = -1.0f + params.particleRadius;
        vel.z *= params.boundaryDamping;
    }
    if (pos.y < -1.0f + params.particleRadius) {
        pos.y = -1.0f + params.particleRadius;
        vel.y *= params.boundaryDamping;
    }

    // store new position and velocity
    posArray[index] = make_float4(pos, posData.w);
    velArray[index] = make_float4(vel, velData.w);
}

// ------------------------------------------------------------------------------------------
// simpleTexture: rotate an image by theta, sampling a normalized-coordinate texture
__global__ void transformKernel(float *outputData, int width, int height, float theta,
                                cudaTextureObject_t tex) {
    // calculate normalized texture coordinates
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;

    float u = (float)x - (float)width / 2;
    float v = (float)y - (float)height / 2;
    float tu = u * cosf(theta) - v * sinf(theta);
    float tv = v * cosf(theta) + u * sinf(theta);

    tu /= (float)width;
    tv /= (float)height;

    // read from texture and write to global memory
    outputData[y * width + x] = tex2D<float>(tex, tu + 0.5f, tv + 0.5f);
}

// ------------------------------------------------------------------------------------------
// radix-2 decimation-in-time FFT of one 2^logN signal per block, in shared memory
__global__ void fft_radix2_shared(cuFloatComplex *data, int logN) {
    extern __shared__ cuFloatComplex s_fft[];
    const int N = 1 << logN;
    cuFloatComplex *x = data + (size_t)blockIdx.x * N;

    // bit-reversed load
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        unsigned int r = __brev((unsigned int)i) >> (32 - logN);
        s_fft[r] = x[i];
    }
    __syncthreads();

    for (int len = 2; len <= N; len <<= 1) {
        const int half = len >> 1;
        for (int k = threadIdx.x; k < N / 2; k += blockDim.x) {
            const int grp = k / half;
            const int j = k - grp * half;
            const int i0 = grp * len + j;
            const int i1 = i0 + half;
            float sn, cs;
            sincospif(-2.0f * (float)j / (float)len, &sn, &cs);
            const cuFloatComplex w = make_cuFloatComplex(cs, sn);
            const cuFloatComplex a = s_fft[i0];
            const cuFloatComplex b = cuCmulf(w, s_fft[i1]);
            s_fft[i0] = cuCaddf(a, b);
            s_fft[i1] = cuCsubf(a, b);
        }
        __syncthreads();
    }

    for (int i = threadIdx.x; i < N; i += blockDim.x) x[i] = s_fft[i];
}

// ------------------------------------------------------------------------------------------
// Hillis-Steele inclusive scan of one row per block (blockDim.x == row length), ping-pong
// between two shared buffers by swapping pointers
#define SCAN_MAX 1024
__global__ void scan_hillis_steele(float *__restrict__ out, const float *__restrict__ in, int n) {
    __shared__ float bufA[SCAN_MAX];
    __shared__ float bufB[SCAN_MAX];
    float *src = bufA;
    float *dst = bufB;
    const int t = threadIdx.x;
    const float *row_in = in + (size_t)blockIdx.x * n;

    src[t] = (t < n) ? row_in[t] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        float v = src[t];
        if (t >= offset) v += src[t - offset];
        dst[t] = v;
        __syncthreads();
        float *tmp = src;
        src = dst;
        dst = tmp;
    }
    if (t < n) out[(size_t)blockIdx.x * n + t] = src[t];
}
