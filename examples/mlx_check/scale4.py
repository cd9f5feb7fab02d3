"""A hand-written MLX kernel with a ragged-edge bug: each thread scales four elements, and
the bounds check guards only the first of them. At sizes that are multiples of four it is
right; at any other size the last thread reads and writes past the end of the arrays.

    kir check examples/mlx_check/scale4.py:scale4 --reference scale4_ref --shapes 4096 1000
"""

import mlx.core as mx

kernel = mx.fast.metal_kernel(
    name="scale4",
    input_names=["x", "alpha"],
    output_names=["out"],
    source="""
        uint n = x_shape[0];
        uint i = thread_position_in_grid.x * 4;
        if (i >= n) return;
        for (uint k = 0; k < 4; k++) {
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
