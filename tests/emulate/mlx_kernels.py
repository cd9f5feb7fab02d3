"""Metal kernels written as MLX's documentation and mlx-lm write them, with MLX-op references.

Each ``make_*`` takes the ``metal_kernel`` factory to build with (MLX's own, kir's emulated one,
or whatever ``mx.fast.metal_kernel`` resolves to), so the same text runs everywhere.
"""

from __future__ import annotations

import mlx.core as mx

# ---------------------------------------------------------------- MLX docs: exp, strided
EXP_STRIDED = """
    uint elem = thread_position_in_grid.x;
    // Utils from `mlx/backend/metal/kernels/utils.h` are automatically included
    uint loc = elem_to_loc(elem, inp_shape, inp_strides, inp_ndim);
    T tmp = inp[loc];
    // Output arrays are always row contiguous
    out[elem] = metal::exp(tmp);
"""


def make_exp_strided(factory):
    kernel = factory(name="myexp_strided", input_names=["inp"], output_names=["out"],
                     source=EXP_STRIDED, ensure_row_contiguous=False)

    def exp_elementwise(a):
        return kernel(inputs=[a], template=[("T", mx.float32)], grid=(a.size, 1, 1),
                      threadgroup=(256, 1, 1), output_shapes=[a.shape],
                      output_dtypes=[a.dtype])[0]
    return exp_elementwise


# ---------------------------------------------------------------- row sum: SIMD-group ops
ROW_SUM = """
    // One threadgroup per row: each thread sums a strided slice, simd_sum reduces a
    // SIMD-group, threadgroup memory reduces the SIMD-groups.
    threadgroup float partial[32];
    uint row = threadgroup_position_in_grid.y;
    uint t = thread_position_in_threadgroup.x;
    uint n = x_shape[1];
    float acc = 0.0f;
    for (uint j = t; j < n; j += threads_per_threadgroup.x) {
        acc += static_cast<float>(x[row * n + j]);
    }
    acc = simd_sum(acc);
    if (thread_index_in_simdgroup == 0) {
        partial[simdgroup_index_in_threadgroup] = acc;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (simdgroup_index_in_threadgroup == 0) {
        float v = thread_index_in_simdgroup < simdgroups_per_threadgroup
                      ? partial[thread_index_in_simdgroup] : 0.0f;
        v = simd_sum(v);
        if (thread_index_in_simdgroup == 0) {
            out[row] = static_cast<T>(v);
        }
    }
"""


def make_row_sum(factory, threads=256):
    kernel = factory(name="row_sum", input_names=["x"], output_names=["out"], source=ROW_SUM)

    def row_sum(x):
        rows = x.shape[0]
        return kernel(inputs=[x], template=[("T", x.dtype)], grid=(threads, rows, 1),
                      threadgroup=(threads, 1, 1), output_shapes=[(rows,)],
                      output_dtypes=[x.dtype])[0]
    return row_sum


# ---------------------------------------------------------------- inclusive scan per row
SCAN = """
    // cumsum of each row of N_PER_ROW elements: one threadgroup per row, each thread owns a
    // contiguous chunk; SIMD prefix sums, then a prefix over the SIMD-group totals.
    threadgroup float totals[32];
    uint row = threadgroup_position_in_grid.y;
    uint t = thread_position_in_threadgroup.x;
    uint lanes = threads_per_threadgroup.x;
    uint n = x_shape[1];
    uint chunk = (n + lanes - 1) / lanes;
    uint start = min(t * chunk, n);
    uint stop = min(start + chunk, n);
    float local = 0.0f;
    for (uint j = start; j < stop; j++) local += x[row * n + j];
    float before = simd_prefix_exclusive_sum(local);
    if (thread_index_in_simdgroup == threads_per_simdgroup - 1) {
        totals[simdgroup_index_in_threadgroup] = before + local;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = 0; s < simdgroup_index_in_threadgroup; s++) before += totals[s];
    float running = before;
    for (uint j = start; j < stop; j++) {
        running += x[row * n + j];
        out[row * n + j] = running;
    }
"""


def make_scan(factory, threads=128):
    kernel = factory(name="row_cumsum", input_names=["x"], output_names=["out"], source=SCAN)

    def cumsum_rows(x):
        rows = x.shape[0]
        return kernel(inputs=[x], grid=(threads, rows, 1), threadgroup=(threads, 1, 1),
                      output_shapes=[x.shape], output_dtypes=[x.dtype])[0]
    return cumsum_rows


# ---------------------------------------------------------------- templates (mlx-lm style)
AXPBY = """
    // y = alpha * x + beta * y, in T, with the sizes as template ints (mlx-lm passes shapes
    // as template arguments) and a bool template flag.
    uint i = thread_position_in_grid.x;
    if (i >= N) return;
    float v = alpha * static_cast<float>(x[i]) + beta * static_cast<float>(y[i]);
    out[i] = static_cast<T>(RELU ? metal::max(v, 0.0f) : v);
"""


def make_axpby(factory):
    kernel = factory(name="axpby", input_names=["x", "y", "alpha", "beta"],
                     output_names=["out"], source=AXPBY)

    def axpby(x, y, alpha, beta, relu=False):
        return kernel(inputs=[x, y, alpha, beta],
                      template=[("T", x.dtype), ("N", x.size), ("RELU", relu)],
                      grid=(x.size, 1, 1), threadgroup=(256, 1, 1),
                      output_shapes=[x.shape], output_dtypes=[x.dtype])[0]
    return axpby


# ---------------------------------------------------------------- atomics: a histogram
HISTOGRAM = """
    uint i = thread_position_in_grid.x;
    if (i >= values_shape[0]) return;
    int bin = clamp(int(values[i] * float(BINS)), 0, BINS - 1);
    atomic_fetch_add_explicit(&counts[bin], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&sums[bin], values[i], memory_order_relaxed);
"""


def make_histogram(factory, bins=16):
    kernel = factory(name="histogram", input_names=["values"], output_names=["counts", "sums"],
                     source=HISTOGRAM, atomic_outputs=True)

    def histogram(values):
        return kernel(inputs=[values], template=[("BINS", bins)], grid=(values.size, 1, 1),
                      threadgroup=(128, 1, 1), output_shapes=[(bins,), (bins,)],
                      output_dtypes=[mx.int32, mx.float32], init_value=0)
    return histogram
