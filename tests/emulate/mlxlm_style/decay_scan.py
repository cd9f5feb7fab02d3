"""A module written as mlx-lm writes its kernels (mlx_lm/models/gated_delta.py, ssm.py): the
kernel is built at import and is None without Metal; callers fall back to MLX ops.

h[b, d] = g[b, t] * h[b, d] + k[b, t, d] * v[b, t];  y[b, t] = sum_d h[b, d] * q[b, t, d]
"""

from __future__ import annotations

import mlx.core as mx


def _make_decay_scan_kernel():
    if not mx.metal.is_available():
        return None
    source = """
        auto b = thread_position_in_grid.z;
        auto lane = thread_position_in_threadgroup.x;
        constexpr int n_per_t = Dk / 32;

        auto q_ = q + b * T * Dk;
        auto k_ = k + b * T * Dk;
        auto g_ = g + b * T;
        auto v_ = v + b * T;
        y += b * T;

        float state[n_per_t];
        for (int i = 0; i < n_per_t; ++i) {
          state[i] = static_cast<float>(state_in[b * Dk + n_per_t * lane + i]);
        }
        for (int t = 0; t < T; ++t) {
          float out = 0.0f;
          for (int i = 0; i < n_per_t; ++i) {
            auto s_idx = n_per_t * lane + i;
            state[i] = state[i] * g_[t] + k_[s_idx] * v_[t];
            out += state[i] * q_[s_idx];
          }
          out = simd_sum(out);
          if (thread_index_in_simdgroup == 0) {
            y[t] = static_cast<InT>(out);
          }
          q_ += Dk;
          k_ += Dk;
        }
        for (int i = 0; i < n_per_t; ++i) {
          state_out[b * Dk + n_per_t * lane + i] = static_cast<InT>(state[i]);
        }
    """
    return mx.fast.metal_kernel(
        name="decay_scan",
        input_names=["q", "k", "v", "g", "state_in", "T"],
        output_names=["y", "state_out"],
        source=source,
    )


_decay_scan_kernel = _make_decay_scan_kernel()


def decay_scan_ops(q, k, v, g, state):
    """The same recurrence in MLX ops, one step at a time."""
    ys = []
    for t in range(q.shape[1]):
        state = state * g[:, t, None] + k[:, t] * v[:, t, None]
        ys.append((state * q[:, t]).sum(axis=-1))
    return mx.stack(ys, axis=1), state


def decay_scan_kernel(q, k, v, g, state):
    B, T, Dk = q.shape
    return _decay_scan_kernel(
        inputs=[q, k, v, g, state, T],
        template=[("InT", q.dtype), ("Dk", Dk)],
        grid=(32, 1, B),
        threadgroup=(32, 1, 1),
        output_shapes=[(B, T), (B, Dk)],
        output_dtypes=[q.dtype, q.dtype],
    )


def decay_scan(q, k, v, g, state, use_kernel=True):
    if not use_kernel or not mx.metal.is_available() or q.shape[-1] % 32 != 0:
        return decay_scan_ops(q, k, v, g, state)
    return decay_scan_kernel(q, k, v, g, state)
