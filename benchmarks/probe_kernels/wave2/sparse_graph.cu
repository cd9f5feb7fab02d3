// Sparse and graph kernels (written for this probe): CSR SpMV scalar / vector (warp per row),
// ELL SpMV, BFS frontier expansion with atomics, PageRank pull step, and a
// level-synchronous BFS "top-down" step over a status array.
#include <cuda_runtime.h>
#include <cstdint>

typedef int IndexType;
typedef float ValueType;

// CSR SpMV, one thread per row (Bell & Garland "scalar" kernel)
__global__ void spmv_csr_scalar_kernel(const IndexType num_rows, const IndexType* ptr,
                                       const IndexType* indices, const ValueType* data,
                                       const ValueType* x, ValueType* y) {
  const IndexType row = blockDim.x * blockIdx.x + threadIdx.x;
  if (row < num_rows) {
    ValueType dot = 0;
    const IndexType row_start = ptr[row];
    const IndexType row_end = ptr[row + 1];
    for (IndexType jj = row_start; jj < row_end; jj++) dot += data[jj] * x[indices[jj]];
    y[row] += dot;
  }
}

// CSR SpMV "vector" kernel: one warp per row, shuffle reduction, grid-stride over warps
template <unsigned int THREADS_PER_VECTOR>
__global__ void spmv_csr_vector_kernel(const int num_rows, const int* __restrict__ Ap,
                                       const int* __restrict__ Aj, const float* __restrict__ Ax,
                                       const float* __restrict__ x, float* __restrict__ y) {
  const int thread_id = blockDim.x * blockIdx.x + threadIdx.x;
  const int thread_lane = threadIdx.x & (THREADS_PER_VECTOR - 1);
  const int vector_id = thread_id / THREADS_PER_VECTOR;
  const int num_vectors = (gridDim.x * blockDim.x) / THREADS_PER_VECTOR;

  for (int row = vector_id; row < num_rows; row += num_vectors) {
    const int row_start = __ldg(&Ap[row]);
    const int row_end = __ldg(&Ap[row + 1]);
    float sum = 0.0f;
    for (int jj = row_start + thread_lane; jj < row_end; jj += THREADS_PER_VECTOR)
      sum += __ldg(&Ax[jj]) * __ldg(&x[__ldg(&Aj[jj])]);
#pragma unroll
    for (int offset = THREADS_PER_VECTOR / 2; offset > 0; offset /= 2)
      sum += __shfl_down_sync(0xffffffff, sum, offset, THREADS_PER_VECTOR);
    if (thread_lane == 0) y[row] = sum;
  }
}

// ELLPACK SpMV, column-major storage, -1 padding
__global__ void spmv_ell_kernel(const int num_rows, const int num_cols_per_row,
                                const int* __restrict__ indices, const float* __restrict__ data,
                                const float* __restrict__ x, float* __restrict__ y) {
  int row = blockDim.x * blockIdx.x + threadIdx.x;
  if (row < num_rows) {
    float dot = 0;
    for (int n = 0; n < num_cols_per_row; n++) {
      int col = indices[num_rows * n + row];
      float val = data[num_rows * n + row];
      if (col >= 0) dot += val * x[col];
    }
    y[row] = dot;
  }
}

// BFS frontier expansion: each thread takes one vertex of the current frontier, visits its
// neighbours, claims unvisited ones with atomicCAS on the distance and appends them to the
// next frontier through an atomic counter.
__global__ void bfs_expand_frontier(const int* __restrict__ row_offsets,
                                    const int* __restrict__ col_indices,
                                    const int* __restrict__ frontier, const int frontier_size,
                                    int* __restrict__ next_frontier, int* next_size,
                                    int* distances, const int level) {
  unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= (unsigned)frontier_size) return;
  const int v = frontier[tid];
  for (int e = row_offsets[v]; e < row_offsets[v + 1]; ++e) {
    const int u = col_indices[e];
    if (atomicCAS(&distances[u], -1, level + 1) == -1) {
      const int pos = atomicAdd(next_size, 1);
      next_frontier[pos] = u;
    }
  }
}

// Rodinia-style BFS step over masks (no atomics, benign write races of equal values)
__global__ void bfs_mask_step(const int* __restrict__ starting, const int* __restrict__ no_of_edges,
                              const int* __restrict__ edges, bool* graph_mask,
                              bool* updating_mask, const bool* graph_visited, int* cost,
                              int no_of_nodes) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < no_of_nodes && graph_mask[tid]) {
    graph_mask[tid] = false;
    for (int i = starting[tid]; i < (no_of_edges[tid] + starting[tid]); i++) {
      int id = edges[i];
      if (!graph_visited[id]) {
        cost[id] = cost[tid] + 1;
        updating_mask[id] = true;
      }
    }
  }
}

// PageRank pull step over the transposed graph (in-edges in CSR), grid-stride, size_t indices
__global__ void pagerank_pull(const int* __restrict__ in_offsets, const int* __restrict__ in_src,
                              const int* __restrict__ out_degree, const float* __restrict__ rank,
                              float* __restrict__ new_rank, size_t n, float damping) {
  for (size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x; v < n;
       v += (size_t)blockDim.x * gridDim.x) {
    float s = 0.0f;
    for (int e = in_offsets[v]; e < in_offsets[v + 1]; ++e) {
      const int u = in_src[e];
      s += __fdividef(rank[u], (float)max(out_degree[u], 1));
    }
    new_rank[v] = (1.0f - damping) / (float)n + damping * s;
  }
}
