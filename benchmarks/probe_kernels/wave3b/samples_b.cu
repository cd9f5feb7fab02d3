// CUDA-samples-style kernels, second batch: BlackScholes (float2 pairs, polynomial normal CDF,
// __expf/__logf/__fdividef), binomialOptions (one option per block, shared exchange of the
// lattice edge), a MonteCarlo option pricer with a per-thread xorshift RNG and Box-Muller,
// dct8x8's shared-memory 2D DCT through a pointer-stepping butterfly, threadFenceReduction's
// single-pass sum with a retirement counter and atomicInc, simpleTemplates' SharedMemory<T>
// specializations, quasirandomGenerator's __constant__ direction table and MoroInvCND, and
// two warp-aggregated stream compactions (cg::coalesced_threads and an explicit ballot).
#include <cuda_runtime.h>
#include <math_constants.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define MUL(a, b) __umul24(a, b)

// ------------------------------------------------------------------------------------------
// BlackScholes
__device__ inline float cndGPU(float d) {
    const float A1 = 0.31938153f;
    const float A2 = -0.356563782f;
    const float A3 = 1.781477937f;
    const float A4 = -1.821255978f;
    const float A5 = 1.330274429f;
    const float RSQRT2PI = 0.39894228040143267793994605993438f;

    float K = __fdividef(1.0f, (1.0f + 0.2316419f * fabsf(d)));
    float cnd = RSQRT2PI * __expf(-0.5f * d * d) *
                (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))));
    if (d > 0) cnd = 1.0f - cnd;
    return cnd;
}

__device__ inline void BlackScholesBodyGPU(float &CallResult, float &PutResult, float S, float X,
                                           float T, float R, float V) {
    float sqrtT, expRT;
    float d1, d2, CNDD1, CNDD2;

    sqrtT = __fdividef(1.0F, rsqrtf(T));
    d1 = __fdividef(__logf(S / X) + (R + 0.5f * V * V) * T, V * sqrtT);
    d2 = d1 - V * sqrtT;

    CNDD1 = cndGPU(d1);
    CNDD2 = cndGPU(d2);

    // Calculate Call and Put simultaneously
    expRT = __expf(-R * T);
    CallResult = S * CNDD1 - X * expRT * CNDD2;
    PutResult = X * expRT * (1.0f - CNDD2) - S * (1.0f - CNDD1);
}

__launch_bounds__(128) __global__
    void BlackScholesGPU(float2 *__restrict d_CallResult, float2 *__restrict d_PutResult,
                         float2 *__restrict d_StockPrice, float2 *__restrict d_OptionStrike,
                         float2 *__restrict d_OptionYears, float Riskfree, float Volatility,
                         int optN) {
    const int opt = blockDim.x * blockIdx.x + threadIdx.x;
    // Calculating 2 options per thread to increase ILP
    if (opt < (optN / 2)) {
        float callResult1, callResult2;
        float putResult1, putResult2;
        BlackScholesBodyGPU(callResult1, putResult1, d_StockPrice[opt].x, d_OptionStrike[opt].x,
                            d_OptionYears[opt].x, Riskfree, Volatility);
        BlackScholesBodyGPU(callResult2, putResult2, d_StockPrice[opt].y, d_OptionStrike[opt].y,
                            d_OptionYears[opt].y, Riskfree, Volatility);
        d_CallResult[opt] = make_float2(callResult1, callResult2);
        d_PutResult[opt] = make_float2(putResult1, putResult2);
    }
}

// ------------------------------------------------------------------------------------------
// binomialOptions: one option per block; each thread keeps ELEMS_PER_THREAD lattice nodes in
// registers and trades its first node with its left neighbour through shared memory
#define NUM_STEPS 256
#define THREADBLOCK_SIZE 64
#define ELEMS_PER_THREAD (NUM_STEPS / THREADBLOCK_SIZE)

typedef struct {
    float S;
    float X;
    float T;
    float R;
    float V;
} TOptionData;

__device__ inline float expiryCallValue(float S, float X, float vDt, int i) {
    float d = S * __expf(vDt * (2.0f * i - NUM_STEPS)) - X;
    return (d > 0.0F) ? d : 0.0F;
}

__global__ void binomialOptionsKernel(const TOptionData *__restrict__ d_OptionData,
                                      float *__restrict__ d_CallValue) {
    __shared__ float call_exchange[THREADBLOCK_SIZE + 1];

    const int tid = threadIdx.x;
    const TOptionData opt = d_OptionData[blockIdx.x];
    const float dt = opt.T / (float)NUM_STEPS;
    const float vDt = opt.V * sqrtf(dt);
    const float rDt = opt.R * dt;
    const float If = __expf(rDt);
    const float Df = __expf(-rDt);
    const float u = __expf(vDt);
    const float d = __expf(-vDt);
    const float pu = (If - d) / (u - d);
    const float pd = 1.0f - pu;
    const float puByDf = pu * Df;
    const float pdByDf = pd * Df;

    float call[ELEMS_PER_THREAD + 1];
#pragma unroll
    for (int i = 0; i < ELEMS_PER_THREAD; ++i)
        call[i] = expiryCallValue(opt.S, opt.X, vDt, tid * ELEMS_PER_THREAD + i);

    if (tid == 0) call_exchange[THREADBLOCK_SIZE] = expiryCallValue(opt.S, opt.X, vDt, NUM_STEPS);

    int final_it = max(0, tid * ELEMS_PER_THREAD - 1);

#pragma unroll 16
    for (int i = NUM_STEPS; i > 0; --i) {
        call_exchange[tid] = call[0];
        __syncthreads();
        call[ELEMS_PER_THREAD] = call_exchange[tid + 1];
        __syncthreads();

        if (i > final_it) {
#pragma unroll
            for (int j = 0; j < ELEMS_PER_THREAD; ++j)
                call[j] = puByDf * call[j + 1] + pdByDf * call[j];
        }
    }

    if (tid == 0) {
        d_CallValue[blockIdx.x] = call[0];
    }
}

// ------------------------------------------------------------------------------------------
// MonteCarlo: European call per block, xorshift32 per thread, Box-Muller pairs
__device__ __forceinline__ unsigned int xorshift32(unsigned int &state) {
    unsigned int x = state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    state = x;
    return x;
}

// uniform in (0, 1]: never 0, so the log below stays finite
__device__ __forceinline__ float uniform01(unsigned int &state) {
    return ((xorshift32(state) >> 8) + 1) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ float endCallValue(float S, float X, float r, float MuByT,
                                              float VBySqrtT) {
    float callValue = S * __expf(MuByT + VBySqrtT * r) - X;
    return (callValue > 0.0F) ? callValue : 0.0F;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    MonteCarloOneBlockPerOption(float *__restrict__ d_CallValue, const float *__restrict__ d_S,
                                const float *__restrict__ d_X, float MuByT, float VBySqrtT,
                                int pathN, unsigned int seed) {
    const int opt = blockIdx.x;
    const int tid = threadIdx.x;
    unsigned int state = seed ^ (opt * 0x9E3779B9u) ^ (tid * 0x85EBCA6Bu);
    if (state == 0) state = 0x2545F491u;

    const float S = d_S[opt];
    const float X = d_X[opt];
    float sum = 0.0f;
    for (int i = tid; i < pathN / 2; i += BLOCK) {
        float u1 = uniform01(state);
        float u2 = uniform01(state);
        float r = sqrtf(-2.0f * __logf(u1));
        float s, c;
        __sincosf(2.0f * CUDART_PI_F * u2, &s, &c);
        sum += endCallValue(S, X, r * c, MuByT, VBySqrtT);
        sum += endCallValue(S, X, r * s, MuByT, VBySqrtT);
    }

    __shared__ float s_sum[BLOCK];
    s_sum[tid] = sum;
    __syncthreads();
#pragma unroll
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride) s_sum[tid] += s_sum[tid + stride];
        __syncthreads();
    }
    if (tid == 0) d_CallValue[opt] = s_sum[0] / (float)pathN;
}

template __global__ void MonteCarloOneBlockPerOption<128>(float *, const float *, const float *,
                                                          float, float, int, unsigned int);

// ------------------------------------------------------------------------------------------
// dct8x8: 2D DCT of 8x8 blocks, rows then columns, in place in shared memory
#define BLOCK_SIZE 8
#define KER2_BLOCK_WIDTH 32
#define KER2_BLOCK_HEIGHT 16
#define KER2_SMEMBLOCK_STRIDE (KER2_BLOCK_WIDTH + 1)

#define C_a 1.387039845322148f  //!< a = (2^0.5) * cos(    pi / 16);
#define C_b 1.306562964876377f  //!< b = (2^0.5) * cos(    pi /  8);
#define C_c 1.175875602419359f  //!< c = (2^0.5) * cos(3 * pi / 16);
#define C_d 0.785694958387102f  //!< d = (2^0.5) * cos(5 * pi / 16);
#define C_e 0.541196100146197f  //!< e = (2^0.5) * cos(3 * pi /  8);
#define C_f 0.275899379282943f  //!< f = (2^0.5) * cos(7 * pi / 16);
#define C_norm 0.3535533905932737f  // 1 / (8^0.5)

__device__ void CUDAsubroutineInplaceDCTvector(float *Vect0, int Step) {
    float *Vect1 = Vect0 + Step;
    float *Vect2 = Vect1 + Step;
    float *Vect3 = Vect2 + Step;
    float *Vect4 = Vect3 + Step;
    float *Vect5 = Vect4 + Step;
    float *Vect6 = Vect5 + Step;
    float *Vect7 = Vect6 + Step;

    float X07P = (*Vect0) + (*Vect7);
    float X16P = (*Vect1) + (*Vect6);
    float X25P = (*Vect2) + (*Vect5);
    float X34P = (*Vect3) + (*Vect4);

    float X07M = (*Vect0) - (*Vect7);
    float X61M = (*Vect6) - (*Vect1);
    float X25M = (*Vect2) - (*Vect5);
    float X43M = (*Vect4) - (*Vect3);

    float X07P34PP = X07P + X34P;
    float X07P34PM = X07P - X34P;
    float X16P25PP = X16P + X25P;
    float X16P25PM = X16P - X25P;

    (*Vect0) = C_norm * (X07P34PP + X16P25PP);
    (*Vect2) = C_norm * (C_b * X07P34PM + C_e * X16P25PM);
    (*Vect4) = C_norm * (X07P34PP - X16P25PP);
    (*Vect6) = C_norm * (C_e * X07P34PM - C_b * X16P25PM);

    (*Vect1) = C_norm * (C_a * X07M - C_c * X61M + C_d * X25M - C_f * X43M);
    (*Vect3) = C_norm * (C_c * X07M + C_f * X61M - C_a * X25M + C_d * X43M);
    (*Vect5) = C_norm * (C_d * X07M + C_a * X61M + C_f * X25M - C_c * X43M);
    (*Vect7) = C_norm * (C_f * X07M + C_d * X61M + C_c * X25M + C_a * X43M);
}

__global__ void CUDAkernel2DCT(float *dst, float *src, int ImgStride) {
    __shared__ float block[KER2_BLOCK_HEIGHT * KER2_SMEMBLOCK_STRIDE];

    int OffsThreadInRow = threadIdx.y * BLOCK_SIZE + threadIdx.x;
    int OffsThreadInCol = threadIdx.z * BLOCK_SIZE;
    src += (blockIdx.y * KER2_BLOCK_HEIGHT + OffsThreadInCol) * ImgStride +
           blockIdx.x * KER2_BLOCK_WIDTH + OffsThreadInRow;
    dst += (blockIdx.y * KER2_BLOCK_HEIGHT + OffsThreadInCol) * ImgStride +
           blockIdx.x * KER2_BLOCK_WIDTH + OffsThreadInRow;
    float *bl_ptr = block + OffsThreadInCol * KER2_SMEMBLOCK_STRIDE + OffsThreadInRow;

#pragma unroll
    for (unsigned int i = 0; i < BLOCK_SIZE; i++) bl_ptr[i * KER2_SMEMBLOCK_STRIDE] = src[i * ImgStride];

    __syncthreads();
    // process rows
    CUDAsubroutineInplaceDCTvector(
        block + (OffsThreadInCol + threadIdx.x) * KER2_SMEMBLOCK_STRIDE + OffsThreadInRow -
            threadIdx.x,
        1);
    __syncthreads();
    // process columns
    CUDAsubroutineInplaceDCTvector(bl_ptr, KER2_SMEMBLOCK_STRIDE);
    __syncthreads();

    for (unsigned int i = 0; i < BLOCK_SIZE; i++) dst[i * ImgStride] = bl_ptr[i * KER2_SMEMBLOCK_STRIDE];
}

// ------------------------------------------------------------------------------------------
// threadFenceReduction: each block writes its partial, the last block to retire sums them
__device__ unsigned int retirementCount = 0;

template <unsigned int blockSize>
__device__ void reduceBlock(volatile float *sdata, float mySum, const unsigned int tid,
                            cg::thread_block cta) {
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    sdata[tid] = mySum;
    cg::sync(tile32);

    const int VEC = 32;
    const int vid = tid & (VEC - 1);

    float beta = mySum;
    float temp;

    for (int i = VEC / 2; i > 0; i >>= 1) {
        if (vid < i) {
            temp = sdata[tid + i];
            beta += temp;
            sdata[tid] = beta;
        }
        cg::sync(tile32);
    }
    cg::sync(cta);

    if (cta.thread_rank() == 0) {
        beta = 0;
        for (int i = 0; i < blockSize; i += VEC) {
            beta += sdata[i];
        }
        sdata[0] = beta;
    }
    cg::sync(cta);
}

template <unsigned int blockSize, bool nIsPow2>
__device__ void reduceBlocks(const float *g_idata, float *g_odata, unsigned int n,
                             cg::thread_block cta) {
    extern __shared__ float sdata[];

    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
    unsigned int gridSize = blockSize * 2 * gridDim.x;
    float mySum = 0;

    while (i < n) {
        mySum += g_idata[i];
        // ensure we don't read out of bounds -- this is optimized away for powerOf2 sized arrays
        if (nIsPow2 || i + blockSize < n) mySum += g_idata[i + blockSize];
        i += gridSize;
    }

    reduceBlock<blockSize>(sdata, mySum, tid, cta);
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

template <unsigned int blockSize, bool nIsPow2>
__global__ void reduceSinglePass(const float *g_idata, float *g_odata, unsigned int n) {
    cg::thread_block cta = cg::this_thread_block();
    reduceBlocks<blockSize, nIsPow2>(g_idata, g_odata, n, cta);

    if (gridDim.x > 1) {
        const unsigned int tid = threadIdx.x;
        __shared__ bool amLast;
        extern float __shared__ smem[];

        // wait until all outstanding memory instructions in this thread are finished
        __threadfence();

        // Thread 0 takes a ticket
        if (tid == 0) {
            unsigned int ticket = atomicInc(&retirementCount, gridDim.x);
            // If the ticket ID is equal to the number of blocks, we are the last block!
            amLast = (ticket == gridDim.x - 1);
        }
        cg::sync(cta);

        // The last block sums the results of all other blocks
        if (amLast) {
            int i = tid;
            float mySum = 0;
            while (i < gridDim.x) {
                mySum += g_odata[i];
                i += blockSize;
            }
            reduceBlock<blockSize>(smem, mySum, tid, cta);
            if (tid == 0) {
                g_odata[0] = smem[0];
                // reset retirement count so that next run succeeds
                retirementCount = 0;
            }
        }
    }
}

template __global__ void reduceSinglePass<128, false>(const float *, float *, unsigned int);

// ------------------------------------------------------------------------------------------
// simpleTemplates: a SharedMemory<T> with one specialization per type
template <typename T>
struct SharedMemory {
    // Ensure that we won't compile any un-specialized types
    __device__ T *getPointer() {
        extern __device__ void error(void);
        error();
        return NULL;
    }
};

template <>
struct SharedMemory<int> {
    __device__ int *getPointer() {
        extern __shared__ int s_int[];
        return s_int;
    }
};

template <>
struct SharedMemory<float> {
    __device__ float *getPointer() {
        extern __shared__ float s_float[];
        return s_float;
    }
};

template <class T>
__global__ void testKernel(T *g_idata, T *g_odata) {
    // Shared mem size is determined by the host app at run time
    SharedMemory<T> smem;
    T *sdata = smem.getPointer();

    const unsigned int tid = threadIdx.x;
    const unsigned int num_threads = blockDim.x;

    sdata[tid] = g_idata[tid];
    __syncthreads();

    sdata[tid] = (T)num_threads * sdata[tid];
    __syncthreads();

    g_odata[tid] = sdata[tid];
}

template __global__ void testKernel<int>(int *, int *);

// ------------------------------------------------------------------------------------------
// quasirandomGenerator: Niederreiter sequence from a __constant__ direction table, and the
// Moro inverse of the normal CDF
#define QRNG_DIMENSIONS 3
#define QRNG_RESOLUTION 31
#define INT_SCALE (1.0f / (float)0x80000001U)

static __constant__ unsigned int c_Table[QRNG_DIMENSIONS][QRNG_RESOLUTION];

static __global__ void quasirandomGeneratorKernel(float *d_Output, unsigned int seed,
                                                  unsigned int N) {
    unsigned int *dimBase = &c_Table[threadIdx.y][0];
    unsigned int tid = MUL(blockDim.x, blockIdx.x) + threadIdx.x;
    unsigned int threadN = MUL(blockDim.x, gridDim.x);

    for (unsigned int pos = tid; pos < N; pos += threadN) {
        unsigned int result = 0;
        unsigned int data = seed + pos;

        for (int bit = 0; bit < QRNG_RESOLUTION; bit++, data >>= 1)
            if (data & 1) {
                result ^= dimBase[bit];
            }

        d_Output[MUL(threadIdx.y, N) + pos] = (float)(result + 1) * INT_SCALE;
    }
}

__device__ inline float MoroInvCNDgpu(unsigned int x) {
    const float a1 = 2.50662823884f;
    const float a2 = -18.61500062529f;
    const float a3 = 41.39119773534f;
    const float a4 = -25.44106049637f;
    const float b1 = -8.4735109309f;
    const float b2 = 23.08336743743f;
    const float b3 = -21.06224101826f;
    const float b4 = 3.13082909833f;
    const float c1 = 0.337475482272615f;
    const float c2 = 0.976169019091719f;
    const float c3 = 0.160797971491821f;
    const float c4 = 2.76438810333863E-02f;
    const float c5 = 3.8405729373609E-03f;
    const float c6 = 3.951896511919E-04f;
    const float c7 = 3.21767881768E-05f;
    const float c8 = 2.888167364E-07f;
    const float c9 = 3.960315187E-07f;

    float z;
    bool negate = false;

    // Restrict the input to the bottom half of its domain, reflect at the end
    if (x >= 0x80000000UL) {
        x = 0xffffffffUL - x;
        negate = true;
    }

    // Convert to floating point in (0,0.5]
    const float x1 = 1.0f / static_cast<float>(0xffffffffUL);
    const float x2 = x1 / 2.0f;
    float p1 = x * x1 + x2;
    // Convert to floating point in (-0.5,0]
    float p2 = p1 - 0.5f;

    // Main body of the bell curve for |p| < 0.42
    if (p2 > -0.42f) {
        z = p2 * p2;
        z = p2 * (((a4 * z + a3) * z + a2) * z + a1) / ((((b4 * z + b3) * z + b2) * z + b1) * z + 1.0f);
    }
    // Special case (Chebychev) for tail
    else {
        z = __logf(-__logf(p1));
        z = -(c1 + z * (c2 + z * (c3 + z * (c4 + z * (c5 + z * (c6 + z * (c7 + z * (c8 + z * c9))))))));
    }

    return negate ? -z : z;
}

static __global__ void inverseCNDKernel(float *d_Output, unsigned int *d_Input, unsigned int pathN) {
    unsigned int distance = ((unsigned int)-1) / (pathN + 1);
    unsigned int tid = MUL(blockDim.x, blockIdx.x) + threadIdx.x;
    unsigned int threadN = MUL(blockDim.x, gridDim.x);

    // Transform input number sequence if it's supplied
    if (d_Input) {
        for (unsigned int pos = tid; pos < pathN; pos += threadN) {
            unsigned int d = d_Input[pos];
            d_Output[pos] = (float)MoroInvCNDgpu(d);
        }
    }
    // Else generate input uniformly placed samples on the fly and write to destination
    else {
        for (unsigned int pos = tid; pos < pathN; pos += threadN) {
            unsigned int d = (pos + 1) * distance;
            d_Output[pos] = (float)MoroInvCNDgpu(d);
        }
    }
}

// ------------------------------------------------------------------------------------------
// warp-aggregated atomics: the stream compaction of the "CUDA Pro Tip" post, two spellings
__device__ int atomicAggInc(int *counter) {
    cg::coalesced_group active = cg::coalesced_threads();
    int res;
    if (active.thread_rank() == 0) res = atomicAdd(counter, active.size());
    res = active.shfl(res, 0);
    return res + active.thread_rank();
}

__global__ void filter_arr(int *dst, int *nres, const int *src, int n) {
    for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < n; i += gridDim.x * blockDim.x) {
        if (src[i] > 0) dst[atomicAggInc(nres)] = src[i];
    }
}

#define FULL_MASK 0xffffffffu
__global__ void compact_warp_agg(int *__restrict__ dst, int *__restrict__ nres,
                                 const int *__restrict__ src, int n) {
    const int lane = threadIdx.x & 31;
    for (int base_i = blockIdx.x * blockDim.x; base_i < n; base_i += gridDim.x * blockDim.x) {
        int i = base_i + threadIdx.x;
        int v = (i < n) ? src[i] : 0;
        bool pred = v > 0;
        unsigned int mask = __ballot_sync(FULL_MASK, pred);
        if (mask == 0) continue;
        int leader = __ffs(mask) - 1;
        int base;
        if (lane == leader) base = atomicAdd(nres, __popc(mask));
        base = __shfl_sync(FULL_MASK, base, leader);
        if (pred) dst[base + __popc(mask & ((1u << lane) - 1))] = v;
    }
}
