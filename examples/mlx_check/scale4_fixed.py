"""scale4.py with its ragged-edge bug fixed: every one of a thread's four elements is
bounds-checked.

    kir check examples/mlx_check/scale4_fixed.py:scale4 --reference scale4_ref --shapes 4096 1000
"""

import mlx.core as mx

kernel = mx.fast.metal_kernel(
    name="scale4_fixed",
    input_names=["x", "alpha"],
    output_names=["out"],
    source="""
        uint n = x_shape[0];
        uint i = thread_position_in_grid.x * 4;
        if (i >= n) return;
        for (uint k = 0; k < 4 && i + k < n; k++) {
            out[i + k] = alpha * x[i + k];
        }
    """,
)


def scale4(x, alpha=2.5):
    """alpha * x for a 1-D float32 array, four elements per thread."""
    threads = (x.size + 3) // 4
    return kernel(inputs=[x, alpha], grid=(threads, 1, 1), threadgroup=(256, 1, 1),
                  output_shapes=[x.shape], output_dtypes=[x.dtype])[0]


def scale4_ref(x, alpha=2.5):
    return alpha * x
