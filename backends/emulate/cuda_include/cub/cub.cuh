// CUB's block and warp reductions and scans for the emulator's build of an original file, as
// CUB defines them and no faster: BlockReduce puts each counted thread's value in the
// storage, and after a barrier every thread folds them in thread order (then a barrier, so
// the storage may be reused at once); WarpReduce folds its logical warp's counted lanes in
// lane order through shuffles. Every thread gets the result (CUB defines it in thread or
// lane 0). BlockScan and WarpScan gather every value the same ways. kir's own lowering of
// the same calls is frontends/cuda/lower_cub.py and lower_cub_scan.py.
#pragma once
#include <functional>

namespace cub {
struct Sum {
  template <class T> T operator()(const T& a, const T& b) const { return a + b; }
};
struct Max {
  template <class T> T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
struct Min {
  template <class T> T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};

template <class K, class V>
struct KeyValuePair {
  typedef K Key;
  typedef V Value;
  K key;
  V value;
  __device__ KeyValuePair() {}
  __device__ KeyValuePair(const K& k, const V& v) : key(k), value(v) {}
};
// the pair with the larger (smaller) value; on a tie, the smaller key
struct ArgMax {
  template <class K, class V>
  KeyValuePair<K, V> operator()(const KeyValuePair<K, V>& a, const KeyValuePair<K, V>& b) const {
    return (b.value > a.value || (a.value == b.value && b.key < a.key)) ? b : a;
  }
};
struct ArgMin {
  template <class K, class V>
  KeyValuePair<K, V> operator()(const KeyValuePair<K, V>& a, const KeyValuePair<K, V>& b) const {
    return (b.value < a.value || (a.value == b.value && b.key < a.key)) ? b : a;
  }
};

enum BlockReduceAlgorithm {
  BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY,
  BLOCK_REDUCE_RAKING,
  BLOCK_REDUCE_WARP_REDUCTIONS,
};

// The reduction methods of BlockReduce and WarpReduce over `Self::fold(value, op, valid,
// site)`, which folds the first `valid` participants' values (all `kCount` by default).
template <class Self, class T, int kCount>
struct ReduceMethods {
  template <class Op>
  __device__ T Reduce(T value, Op op, int valid, KirSL l = KirSL::current()) {
    return static_cast<Self*>(this)->fold(value, op, valid, l);
  }
  template <class Op>
  __device__ T Reduce(T value, Op op, KirSL l = KirSL::current()) {
    return Reduce(value, op, kCount, l);
  }
  __device__ T Sum(T value, int valid, KirSL l = KirSL::current()) {
    return Reduce(value, cub::Sum(), valid, l);
  }
  __device__ T Sum(T value, KirSL l = KirSL::current()) {
    return Reduce(value, cub::Sum(), kCount, l);
  }
};

template <class T, int BLOCK_DIM_X,
          BlockReduceAlgorithm ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockReduce
    : public ReduceMethods<BlockReduce<T, BLOCK_DIM_X, ALGORITHM, BLOCK_DIM_Y, BLOCK_DIM_Z>, T,
                           BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z> {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;

 public:
  struct TempStorage {
    T items[kThreads];
  };
  __device__ explicit BlockReduce(TempStorage& storage) : storage_(storage) {}

  template <class Op>
  T fold(T value, Op op, int valid, KirSL l) {
    unsigned me = kir_emu::self().lin;
    if (kir_emu::rt()->nthreads > (unsigned)kThreads)
      kir_emu::fail("cub::BlockReduce sized for %d threads runs in a block of %u", kThreads,
                    kir_emu::rt()->nthreads);
    if ((int)me < valid) storage_.items[me] = value;
    __syncthreads(l);
    T total = storage_.items[0];
    for (int k = 1; k < valid && k < kThreads; ++k) total = op(total, storage_.items[k]);
    __syncthreads(l);
    return total;
  }

 private:
  TempStorage& storage_;
};

template <class T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpReduce
    : public ReduceMethods<WarpReduce<T, LOGICAL_WARP_THREADS>, T, LOGICAL_WARP_THREADS> {
 public:
  struct TempStorage {
    T items[LOGICAL_WARP_THREADS];
  };
  __device__ explicit WarpReduce(TempStorage&) {}

  template <class Op>
  T fold(T value, Op op, int valid, KirSL l) {
    T total = __shfl_sync(0xffffffffu, value, 0, LOGICAL_WARP_THREADS, l);
    for (int k = 1; k < valid && k < LOGICAL_WARP_THREADS; ++k)
      total = op(total, __shfl_sync(0xffffffffu, value, k, LOGICAL_WARP_THREADS, l));
    return total;
  }
};

// Scans: each thread's result is its predecessors' values (and its own, inclusive) folded in
// order, seeded by the initial value (0 for the sums); the aggregate is everyone's.
enum BlockScanAlgorithm { BLOCK_SCAN_RAKING, BLOCK_SCAN_RAKING_MEMOIZE, BLOCK_SCAN_WARP_SCANS };

namespace kir_scan {
template <class T, class Op>
T fold(const T* items, int count, Op op, bool seeded, T seed) {
  T acc = seed;
  for (int k = 0; k < count; ++k) {
    acc = seeded ? op(acc, items[k]) : items[k];
    seeded = true;
  }
  return acc;
}
}  // namespace kir_scan

// The scan methods of BlockScan and WarpScan over `Self::gather`, which fills `items` with
// every participant's value and says which one is the caller.
template <class Self, class T>
struct ScanMethods {
  template <class Op>
  void scan(T in, T& out, Op op, bool inclusive, bool seeded, T seed, T* aggregate, KirSL l) {
    T items[1024];
    int count = 0;
    int me = static_cast<Self*>(this)->gather(in, items, count, l);
    T result = kir_scan::fold(items, inclusive ? me + 1 : me, op, seeded, seed);
    if (!inclusive && !seeded && me == 0) result = in;  // CUB leaves it undefined
    if (aggregate) *aggregate = kir_scan::fold(items, count, op, false, seed);
    out = result;
  }
  void ExclusiveSum(T in, T& out, KirSL l = KirSL::current()) {
    scan(in, out, cub::Sum(), false, true, T(0), nullptr, l);
  }
  void ExclusiveSum(T in, T& out, T& aggregate, KirSL l = KirSL::current()) {
    scan(in, out, cub::Sum(), false, true, T(0), &aggregate, l);
  }
  void InclusiveSum(T in, T& out, KirSL l = KirSL::current()) {
    scan(in, out, cub::Sum(), true, false, T(0), nullptr, l);
  }
  void InclusiveSum(T in, T& out, T& aggregate, KirSL l = KirSL::current()) {
    scan(in, out, cub::Sum(), true, false, T(0), &aggregate, l);
  }
  template <class Op>
  void ExclusiveScan(T in, T& out, T initial, Op op, KirSL l = KirSL::current()) {
    scan(in, out, op, false, true, initial, nullptr, l);
  }
  template <class Op>
  void ExclusiveScan(T in, T& out, T initial, Op op, T& aggregate,
                     KirSL l = KirSL::current()) {
    scan(in, out, op, false, true, initial, &aggregate, l);
  }
  template <class Op>
  void InclusiveScan(T in, T& out, Op op, KirSL l = KirSL::current()) {
    scan(in, out, op, true, false, T(0), nullptr, l);
  }
  template <class Op>
  void InclusiveScan(T in, T& out, Op op, T& aggregate, KirSL l = KirSL::current()) {
    scan(in, out, op, true, false, T(0), &aggregate, l);
  }
};

template <class T, int BLOCK_DIM_X, BlockScanAlgorithm ALGORITHM = BLOCK_SCAN_RAKING,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockScan
    : public ScanMethods<BlockScan<T, BLOCK_DIM_X, ALGORITHM, BLOCK_DIM_Y, BLOCK_DIM_Z>, T> {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;

 public:
  struct TempStorage {
    T items[kThreads];
  };
  __device__ explicit BlockScan(TempStorage& storage) : storage_(storage) {}

  int gather(T in, T* items, int& count, KirSL l) {
    unsigned me = kir_emu::self().lin;
    if (kir_emu::rt()->nthreads != (unsigned)kThreads)
      kir_emu::fail("cub::BlockScan sized for %d threads runs in a block of %u", kThreads,
                    kir_emu::rt()->nthreads);
    storage_.items[me] = in;
    __syncthreads(l);
    for (int k = 0; k < kThreads; ++k) items[k] = storage_.items[k];
    __syncthreads(l);
    count = kThreads;
    return (int)me;
  }

 private:
  TempStorage& storage_;
};

template <class T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpScan : public ScanMethods<WarpScan<T, LOGICAL_WARP_THREADS>, T> {
 public:
  struct TempStorage {
    T items[LOGICAL_WARP_THREADS];
  };
  __device__ explicit WarpScan(TempStorage&) {}

  int gather(T in, T* items, int& count, KirSL l) {
    for (int k = 0; k < LOGICAL_WARP_THREADS; ++k)
      items[k] = __shfl_sync(0xffffffffu, in, k, LOGICAL_WARP_THREADS, l);
    count = LOGICAL_WARP_THREADS;
    return (int)(kir_emu::self().lin % LOGICAL_WARP_THREADS);
  }
};
}  // namespace cub

// libcu++'s function objects CUDA 13's CUB takes in place of cub::Max and cub::Min
// (cuda::std::plus is std::plus: the emulator's `cuda::std` is the host's std)
namespace cuda {
template <class T = void>
struct maximum {
  template <class U> U operator()(const U& a, const U& b) const { return a < b ? b : a; }
};
template <class T = void>
struct minimum {
  template <class U> U operator()(const U& a, const U& b) const { return b < a ? b : a; }
};
}  // namespace cuda
