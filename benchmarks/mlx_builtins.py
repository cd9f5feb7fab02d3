"""What the GPU benchmark scripts share: each example's benchmark sizes and MLX's built-in
for its job."""

from __future__ import annotations

import numpy as np

# The sizes of the README's MLX reference table, where an example has a counterpart there.
BENCH_SIZES = {
    "flash_attn": {"B": 1, "H": 16, "N": 1024, "D": 64},
    "softmax": {"rows": 8192, "cols": 8192},
    "layernorm": {"rows": 8192, "cols": 8192},
    "sgemm": {"M": 4096, "N": 4096, "K": 4096},
    "reduce": {"n": 1 << 26},
    "selective_scan": {"B": 1, "L": 2048, "D": 1536, "S": 16},
}


def builtin(name: str, inputs: dict):
    """The MLX built-in doing the example's job, as (label, thunk returning arrays), or None."""
    import mlx.core as mx

    a = {k: mx.array(v) for k, v in inputs.items() if isinstance(v, np.ndarray)}
    if name == "flash_attn":
        scale = float(inputs["softmax_scale"])
        return "mx.fast.scaled_dot_product_attention", \
            lambda: mx.fast.scaled_dot_product_attention(a["Q"], a["K"], a["V"], scale=scale)
    if name == "attention_heads":  # [BH, N, d] buffers q, k, v (lower case)
        scale = float(inputs["scale"])
        qkv = [a[n][None] for n in ("q", "k", "v")]
        return "mx.fast.scaled_dot_product_attention", \
            lambda: mx.fast.scaled_dot_product_attention(*qkv, scale=scale)
    if name in ("decode", "attention_decode"):  # one query a head: q [H, 64], k, v [H, S, 64]
        names = ("q", "k_cache", "v_cache") if name == "decode" else ("q", "k", "v")
        scale = float(inputs["softmax_scale" if name == "decode" else "scale"])
        q, k, v = (a[names[0]][None, :, None, :], a[names[1]][None], a[names[2]][None])
        return "mx.fast.scaled_dot_product_attention (one query)", \
            lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale)
    if name == "softmax":
        return "mx.softmax", lambda: mx.softmax(a["x"], axis=-1)
    if name == "layernorm":
        eps = float(inputs["eps"])
        return "mx.fast.layer_norm", lambda: mx.fast.layer_norm(a["x"], a["gamma"], a["beta"], eps)
    if name == "sgemm":
        return "a @ b", lambda: a["A"] @ a["B"]
    if name == "reduce":
        return "mx.sum", lambda: mx.sum(a["in"])
    # The corpus's kernels written in other styles (tests/corpus), with their own argument names.
    if name == "rms_norm":
        eps = float(inputs["epsilon"])
        return "mx.fast.rms_norm", lambda: mx.fast.rms_norm(a["input"], a["weight"], eps)
    if name == "layernorm_forward":
        return "mx.fast.layer_norm", \
            lambda: mx.fast.layer_norm(a["inp"], a["weight"], a["bias"], 1e-5)
    if name == "layernorm_forward_bf16":  # the same in bf16, as a bf16 kernel computes it
        b16 = {k: v.astype(mx.bfloat16) for k, v in a.items()}
        return "mx.fast.layer_norm (bf16)", \
            lambda: mx.fast.layer_norm(b16["inp"], b16["weight"], b16["bias"], 1e-5)
    if name == "rms_norm_inplace":
        eps = float(inputs["epsilon"])
        return "mx.fast.rms_norm", lambda: mx.fast.rms_norm(a["x"], a["weight"], eps)
    if name == "softmax_src":
        return "mx.softmax", lambda: mx.softmax(a["src"], axis=-1)
    if name == "softmax_forward":
        return "mx.softmax", lambda: mx.softmax(a["inp"], axis=-1)
    if name == "dot":
        return "mx.inner", lambda: mx.inner(a["a"], a["b"])
    if name == "row_sumsq":
        return "mx.sum(x * x, axis=1)", lambda: mx.sum(a["x"] * a["x"], axis=1)
    if name == "sgemm_alpha_beta":
        alpha, beta = float(inputs["alpha"]), float(inputs["beta"])
        return "mx.addmm", lambda: mx.addmm(a["C"], a["A"], a["B"], alpha=alpha, beta=beta)
    # GEMMs in other layouts (tests/rules/data).
    if name == "linear":
        return "mx.addmm (inp @ weight.T + bias)", \
            lambda: mx.addmm(a["bias"], a["inp"], a["weight"].T)
    if name == "bmm":
        return "a @ b (batched)", lambda: a["A"] @ a["B"]
    if name == "colmajor":
        # Stored by columns: C's array [N][M] is B's [N][K] times A's [K][M].
        return "b @ a", lambda: a["B"] @ a["A"]
    if name == "struct_matmul":  # matrices as structs (tests/frontend/data)
        return "a @ b", lambda: a["A_elements"] @ a["B_elements"]
    return None
