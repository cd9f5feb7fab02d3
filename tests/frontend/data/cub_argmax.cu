// Argmax and argmin of rows of integer scores (many ties) as samplers write them (written for
// kir's tests): each thread folds its strided items into a cub::KeyValuePair with cub::ArgMax
// called directly, the block reduces the pairs with cub::BlockReduce and cub::ArgMax (ties go
// to the smaller index); each warp's argmin of its first items through cub::WarpReduce and
// cub::ArgMin; and each row's (sum, count) of its positive values, a struct of the file's own
// reduced with a function object.
#include <cub/cub.cuh>

struct SumCount {
  float sum;
  int count;
};

struct AddSumCount {
  __device__ SumCount operator()(const SumCount& a, const SumCount& b) const {
    return {a.sum + b.sum, a.count + b.count};
  }
};

template <int BLOCK>
__global__ void argmax_rows(const int* __restrict__ scores, int* __restrict__ best_ids,
                            float* __restrict__ best_vals, int* __restrict__ warp_min_ids,
                            float* __restrict__ positive_sums, int* __restrict__ positive_counts,
                            int vocab) {
  using Pair = cub::KeyValuePair<int, float>;
  using PairReduce = cub::BlockReduce<Pair, BLOCK>;
  using WarpPairs = cub::WarpReduce<Pair>;
  using CountReduce = cub::BlockReduce<SumCount, BLOCK>;
  __shared__ typename PairReduce::TempStorage pair_storage;
  __shared__ typename WarpPairs::TempStorage warp_storage[BLOCK / 32];
  __shared__ typename CountReduce::TempStorage count_storage;

  const int* row = scores + blockIdx.x * vocab;
  cub::ArgMax arg_max;
  Pair best(-1, -1e30f);
  SumCount positives = {0.0f, 0};
  for (int i = threadIdx.x; i < vocab; i += BLOCK) {
    const float v = static_cast<float>(row[i]);
    best = arg_max(best, Pair(i, v));
    if (v > 0.0f) {
      positives.sum += v;
      positives.count += 1;
    }
  }
  const Pair top = PairReduce(pair_storage).Reduce(best, cub::ArgMax());
  const SumCount total = CountReduce(count_storage).Reduce(positives, AddSumCount());

  Pair first(threadIdx.x, static_cast<float>(row[threadIdx.x]));
  const Pair low = WarpPairs(warp_storage[threadIdx.x / 32]).Reduce(first, cub::ArgMin());
  if (threadIdx.x % 32 == 0) warp_min_ids[blockIdx.x * (BLOCK / 32) + threadIdx.x / 32] = low.key;
  if (threadIdx.x == 0) {
    best_ids[blockIdx.x] = top.key;
    best_vals[blockIdx.x] = top.value;
    positive_sums[blockIdx.x] = total.sum;
    positive_counts[blockIdx.x] = total.count;
  }
}
