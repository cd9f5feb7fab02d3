"""Kernel wrappers with the custom-kernel mistakes MLX users make most, each beside a correct
version; ``kir check`` must find every planted bug (at the line marked BUG) and pass the rest.
"""

import mlx.core as mx

DOUBLE = """
    uint i = thread_position_in_grid.x;
    if (i >= x_shape[0]) return;
    out[i] = 2.0f * x[i];
"""
DOUBLE_NO_BOUNDS = """
    uint i = thread_position_in_grid.x;
    out[i] = 2.0f * x[i];  // BUG: no bounds check, and the grid is rounded up to 256
"""


def _double_kernel(name, source):
    return mx.fast.metal_kernel(name=name, input_names=["x"], output_names=["out"],
                                source=source)


double_kernel = _double_kernel("double", DOUBLE)
double_unchecked_kernel = _double_kernel("double_unchecked", DOUBLE_NO_BOUNDS)


def double(x):
    return double_kernel(inputs=[x], grid=(x.size, 1, 1), threadgroup=(256, 1, 1),
                         output_shapes=[x.shape], output_dtypes=[x.dtype])[0]


def double_grid_in_groups(x):
    groups = (x.size + 255) // 256
    return double_kernel(inputs=[x], grid=(groups, 1, 1),  # BUG: grid counts threads in MLX
                         threadgroup=(256, 1, 1), output_shapes=[x.shape],
                         output_dtypes=[x.dtype])[0]


def double_no_bounds(x):
    threads = (x.size + 255) // 256 * 256
    return double_unchecked_kernel(inputs=[x], grid=(threads, 1, 1), threadgroup=(256, 1, 1),
                                   output_shapes=[x.shape], output_dtypes=[x.dtype])[0]


def double_big_group(x):
    return double_kernel(inputs=[x], grid=(x.size, 1, 1),
                         threadgroup=(2048, 1, 1),  # BUG: over 1024 threads
                         output_shapes=[x.shape], output_dtypes=[x.dtype])[0]


def double_ref(x):
    return 2 * x


ROW_SUM = """
    threadgroup float tile[256];
    uint row = threadgroup_position_in_grid.y;
    uint t = thread_position_in_threadgroup.x;
    uint n = x_shape[1];
    float acc = 0.0f;
    for (uint j = t; j < n; j += 256) acc += x[row * n + j];
    tile[t] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = 128; s > 0; s >>= 1) {
        if (t < s) tile[t] += tile[t + s];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (t == 0) out[row] = tile[0];
"""
ROW_SUM_ACCUMULATES = ROW_SUM.replace(
    "if (t == 0) out[row] = tile[0];",
    "if (t == 0) out[row] += tile[0];  // BUG: out is not initialised")
ROW_SUM_DIVERGENT = ROW_SUM.replace(
    """    tile[t] = acc;
    threadgroup_barrier(mem_flags::mem_threadgroup);""",
    """    if (t < n) {
        tile[t] = acc;
        threadgroup_barrier(mem_flags::mem_threadgroup);  // BUG: inside divergent code
    } else {
        tile[t] = 0.0f;
    }""")
ROW_SUM_BIG_TILE = ROW_SUM.replace(
    "threadgroup float tile[256];",
    "threadgroup float tile[16384];  // BUG: 64 KiB of threadgroup memory")


def _row_sum(name, source):
    kernel = mx.fast.metal_kernel(name=name, input_names=["x"], output_names=["out"],
                                  source=source)

    def row_sum(x):
        rows = x.shape[0]
        return kernel(inputs=[x], grid=(256, rows, 1), threadgroup=(256, 1, 1),
                      output_shapes=[(rows,)], output_dtypes=[x.dtype])[0]
    return row_sum


row_sum = _row_sum("row_sum", ROW_SUM)
row_sum_accumulates = _row_sum("row_sum_accumulates", ROW_SUM_ACCUMULATES)
row_sum_divergent = _row_sum("row_sum_divergent", ROW_SUM_DIVERGENT)
row_sum_big_tile = _row_sum("row_sum_big_tile", ROW_SUM_BIG_TILE)


def row_sum_ref(x):
    return mx.sum(x, axis=1, stream=mx.cpu)
