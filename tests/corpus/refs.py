"""numpy references for the corpus kernels (``reference = "refs:NAME"`` in their specs).

Each takes the spec's arguments (arrays and scalars; a null argument is None) and sizes,
and returns the outputs the kernel should leave. Computed in float64 where it helps."""

from __future__ import annotations

import math

import numpy as np


def _f64(a):
    return np.asarray(a, dtype=np.float64)


# --------------------------------------------------------------------- llm_train.cu

def gelu_forward(args, sizes):
    x = _f64(args["inp"])
    s = math.sqrt(2.0 / math.pi)
    return {"out": 0.5 * x * (1.0 + np.tanh(s * (x + 0.044715 * x ** 3)))}


def gelu_backward(args, sizes):
    x = _f64(args["inp"])
    s = math.sqrt(2.0 / math.pi)
    arg = s * (x + 0.044715 * x ** 3)
    grad = 0.5 * (1.0 + np.tanh(arg)) + x * 0.5 / np.cosh(arg) ** 2 * s * (
        1.0 + 3.0 * 0.044715 * x * x)
    return {"dinp": grad * _f64(args["dout"])}


def residual_forward(args, sizes):
    return {"out": _f64(args["inp1"]) + _f64(args["inp2"])}


def encoder_forward(args, sizes):
    B, T, C = sizes["B"], sizes["T"], sizes["C"]
    inp = args["inp"].reshape(B, T)
    wte, wpe = args["wte"].reshape(-1, C), args["wpe"].reshape(-1, C)
    return {"out": (wte[inp] + wpe[None, :T]).reshape(args["out"].shape)}


def layernorm_forward(args, sizes):
    N, C = sizes["N"], sizes["C"]
    x = _f64(args["inp"]).reshape(N, C)
    mean = x.mean(axis=1)
    var = ((x - mean[:, None]) ** 2).mean(axis=1)
    rstd = 1.0 / np.sqrt(var + 1e-5)
    out = (x - mean[:, None]) * rstd[:, None] * args["weight"] + args["bias"]
    return {"out": out.reshape(args["out"].shape), "mean": mean, "rstd": rstd}


def softmax_rows(x):
    x = _f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_forward(args, sizes):
    return {"out": softmax_rows(args["inp"].reshape(sizes["N"], sizes["C"])).reshape(
        args["out"].shape)}


def crossentropy_forward(args, sizes):
    B, T, V = sizes["B"], sizes["T"], sizes["V"]
    probs = _f64(args["probs"]).reshape(B * T, V)
    t = args["targets"].reshape(B * T)
    return {"losses": -np.log(probs[np.arange(B * T), t]).reshape(args["losses"].shape)}


def adamw(args, sizes):
    g = _f64(args["grads_memory"])
    m = _f64(args["m_memory"])
    v = _f64(args["v_memory"])
    p = _f64(args["params_memory"])
    b1, b2 = args["beta1"], args["beta2"]
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mh, vh = m / args["beta1_correction"], v / args["beta2_correction"]
    p = p - args["learning_rate"] * (mh / (np.sqrt(vh) + args["eps"])
                                     + args["weight_decay"] * p)
    return {"params_memory": p, "m_memory": m, "v_memory": v}


# ------------------------------------------------------------- elementwise_macros.cu

def relu(args, sizes):
    return {"y": np.maximum(_f64(args["x"]), 0.0)}


def silu(args, sizes):
    x = _f64(args["x"])
    return {"y": x / (1.0 + np.exp(-x))}


def gelu_erf(args, sizes):
    from math import erf

    x = _f64(args["x"])
    return {"y": 0.5 * x * (1.0 + np.vectorize(erf)(x * 0.70710678))}


def add(args, sizes):
    return {"out": _f64(args["a"]) + _f64(args["b"])}


def mul(args, sizes):
    return {"out": _f64(args["a"]) * _f64(args["b"])}


def affine(args, sizes):
    x = _f64(args["x"]).reshape(-1, sizes["COLS"])
    bias = 0.0 if args.get("bias") is None else _f64(args["bias"])
    return {"y": (x * args["scale"] + bias).reshape(args["y"].shape)}


# ------------------------------------------------------------------ gemm_tutorial.cu

def sgemm(args, sizes):
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    A = _f64(args["A"]).reshape(M, K)
    B = _f64(args["B"]).reshape(K, N)
    if "beta" not in args:  # C = A B (C is written in full, never read)
        return {"C": (A @ B).reshape(args["C"].shape)}
    C = _f64(args["C"]).reshape(M, N)
    return {"C": (args["alpha"] * A @ B + args["beta"] * C).reshape(args["C"].shape)}


# -------------------------------------------------------------------- infer_norm.cu

def rms_norm(args, sizes):
    x = _f64(args["input"]).reshape(sizes["T"], sizes["H"])
    if args.get("residual") is not None:
        x = x + _f64(args["residual"]).reshape(x.shape)
    scale = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + args["epsilon"])
    return {"out": (x * scale * _f64(args["weight"])).reshape(args["out"].shape)}


def bias_silu(args, sizes):
    x = _f64(args["x"]).reshape(-1, sizes["COLS"])
    if args.get("bias") is not None:
        x = x + _f64(args["bias"])
    return {"out": (x / (1.0 + np.exp(-x))).reshape(args["out"].shape)}


def silu_and_mul(args, sizes):
    d = sizes["D"]
    x = _f64(args["input"]).reshape(-1, 2 * d)
    a, b = x[:, :d], x[:, d:]
    return {"out": (a / (1.0 + np.exp(-a)) * b).reshape(args["out"].shape)}


def rotary_neox(args, sizes):
    T, H, S, R = sizes["T"], sizes["H"], sizes["HS"], sizes["R"]
    q = _f64(args["query"]).reshape(T, H, S).copy()
    cache = _f64(args["cos_sin_cache"]).reshape(-1, R)[args["positions"]]
    half = R // 2
    cos, sin = cache[:, None, :half], cache[:, None, half:]
    x, y = q[:, :, :half].copy(), q[:, :, half:R].copy()
    q[:, :, :half] = x * cos - y * sin
    q[:, :, half:R] = y * cos + x * sin
    return {"query": q.reshape(args["query"].shape)}


# -------------------------------------------------------------------- reductions.cu

def block_sums(args, sizes):
    x = _f64(args["g_idata"])
    blocks = args["g_odata"].shape[0]
    return {"g_odata": x.reshape(blocks, -1).sum(axis=1)}


def grid_sum(args, sizes):
    return {"g_odata": np.array([_f64(args["g_idata"])[:sizes["N"]].sum()] + [0.0] * (
        args["g_odata"].shape[0] - 1))}


def reduce5_partials(args, sizes):
    x = _f64(args["g_idata"])
    n, bs, g = sizes["N"], sizes["BS"], args["g_odata"].shape[0]
    out = np.zeros(g)
    for b in range(g):
        idx = []
        i = b * bs * 2
        while i < n:
            idx.extend(range(i, min(i + bs * 2, n)))
            i += bs * 2 * g
        out[b] = x[idx].sum()
    return {"g_odata": out}


def total_sum(args, sizes):
    return {"out": _f64(args["out"]) + _f64(args["in"]).sum()}


def row_sumsq(args, sizes):
    x = _f64(args["x"]).reshape(sizes["R"], sizes["COLS"])
    return {"out": (x * x).sum(axis=1)}


def row_max(args, sizes):
    x = _f64(args["x"]).reshape(sizes["R"], sizes["COLS"])
    return {"out": x.max(axis=1)}


def warp_inclusive_scan(args, sizes):
    x = args["in"].astype(np.int64).reshape(-1, 32)
    return {"out": np.cumsum(x, axis=1).reshape(-1).astype(np.int32)}


# ---------------------------------------------------------------------- ssm_scan.cu

def _softplus(x):
    return np.where(x <= 20.0, np.log1p(np.exp(np.minimum(x, 20.0))), x)


def selective_scan(args, sizes):
    B, D, L, N = sizes["B"], sizes["D"], sizes["L"], sizes["N"]
    u = _f64(args["u"]).reshape(B, D, L)
    dt = _f64(args["delta"]).reshape(B, D, L)
    if args["delta_softplus"]:
        dt = _softplus(dt)
    A = _f64(args["A"]).reshape(D, N)
    Bm = _f64(args["Bm"]).reshape(B, N, L)
    Cm = _f64(args["Cm"]).reshape(B, N, L)
    Dv = _f64(args["Dvec"])
    h = np.zeros((B, D, N))
    out = np.zeros((B, D, L))
    for t in range(L):
        dA = np.exp(dt[:, :, t, None] * A[None])
        h = dA * h + dt[:, :, t, None] * Bm[:, None, :, t] * u[:, :, t, None]
        out[:, :, t] = (h * Cm[:, None, :, t]).sum(axis=2) + Dv[None] * u[:, :, t]
    return {"out": out.reshape(args["out"].shape)}


def ssm_state_update(args, sizes):
    B, D, N = sizes["B"], sizes["D"], sizes["N"]
    state = _f64(args["state"]).reshape(B, D, N)
    x = _f64(args["x"]).reshape(B, D)
    dt = _f64(args["dt"]).reshape(B, D)
    if args.get("dt_bias") is not None:
        dt = dt + _f64(args["dt_bias"])
    dt = _softplus(dt)
    A = _f64(args["A"]).reshape(D, N)
    Bv, Cv = _f64(args["Bv"]).reshape(B, N), _f64(args["Cv"]).reshape(B, N)
    state = state * np.exp(A[None] * dt[:, :, None]) + Bv[:, None] * (x * dt)[:, :, None]
    y = (state * Cv[:, None]).sum(axis=2)
    if args.get("D") is not None:
        y = y + x * _f64(args["D"])
    if args.get("z") is not None:
        z = _f64(args["z"]).reshape(B, D)
        y = y * z / (1.0 + np.exp(-z))
    return {"state": state.reshape(args["state"].shape), "out": y.reshape(args["out"].shape)}


def causal_conv1d(args, sizes):
    B, D, L, W = sizes["B"], sizes["D"], sizes["L"], sizes["W"]
    x = _f64(args["x"]).reshape(B, D, L)
    w = _f64(args["weight"]).reshape(D, W)
    out = np.zeros((B, D, L))
    if args.get("bias") is not None:
        out += _f64(args["bias"])[None, :, None]
    for k in range(W):
        shift = W - 1 - k
        shifted = np.zeros_like(x)
        shifted[:, :, shift:] = x[:, :, :L - shift]
        out += w[None, :, k, None] * shifted
    if args["silu_activation"]:
        out = out / (1.0 + np.exp(-out))
    return {"out": out.reshape(args["out"].shape)}


# -------------------------------------------------------------- softmax_variants.cu

def softmax_in_out(args, sizes):
    return {"out": softmax_rows(args["in"].reshape(sizes["R"], sizes["COLS"])).reshape(
        args["out"].shape)}


def log_softmax(args, sizes):
    x = _f64(args["in"]).reshape(sizes["R"], sizes["COLS"])
    m = x.max(axis=1, keepdims=True)
    lse = m + np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    return {"out": (x - lse).reshape(args["out"].shape)}


# -------------------------------------------------------------- attention_decode.cu

def attention_decode(args, sizes):
    H, S, D = sizes["H"], sizes["S"], 64
    q = _f64(args["q"]).reshape(H, D)
    k = _f64(args["k"]).reshape(H, S, D)
    v = _f64(args["v"]).reshape(H, S, D)
    scores = np.einsum("hd,hsd->hs", q, k) * args["scale"]
    p = softmax_rows(scores)
    return {"out": np.einsum("hs,hsd->hd", p, v).reshape(args["out"].shape)}


# ------------------------------------------------------------------------ image.cu

def transpose(args, sizes):
    W, H = sizes["W"], sizes["H"]
    return {"odata": _f64(args["idata"]).reshape(H, W).T.reshape(args["odata"].shape)}


def box_blur(args, sizes):
    W, H = sizes["W"], sizes["H"]
    x = _f64(args["in"]).reshape(H, W)
    padded = np.pad(x, 1)
    ones = np.pad(np.ones_like(x), 1)
    acc = sum(padded[1 + dy:1 + dy + H, 1 + dx:1 + dx + W]
              for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    count = sum(ones[1 + dy:1 + dy + H, 1 + dx:1 + dx + W]
                for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    return {"out": (acc / count).reshape(args["out"].shape)}


def resize_bilinear(args, sizes):
    sw, sh, dw, dh = sizes["SW"], sizes["SH"], sizes["DW"], sizes["DH"]
    src = _f64(args["src"]).reshape(sh, sw)
    ys, xs = np.meshgrid(np.arange(dh), np.arange(dw), indexing="ij")
    # the kernel computes in float32: replay its coordinate arithmetic exactly
    fx = ((xs.astype(np.float32) + np.float32(0.5)) * np.float32(sw) / np.float32(dw)
          - np.float32(0.5)).astype(np.float64)
    fy = ((ys.astype(np.float32) + np.float32(0.5)) * np.float32(sh) / np.float32(dh)
          - np.float32(0.5)).astype(np.float64)
    x0, y0 = np.floor(fx).astype(int), np.floor(fy).astype(int)
    ax, ay = fx - x0, fy - y0

    def tex(x, y):
        return src[np.clip(y, 0, sh - 1), np.clip(x, 0, sw - 1)]

    top = tex(x0, y0) * (1 - ax) + tex(x0 + 1, y0) * ax
    bot = tex(x0, y0 + 1) * (1 - ax) + tex(x0 + 1, y0 + 1) * ax
    return {"dst": (top * (1 - ay) + bot * ay).reshape(args["dst"].shape)}


# --------------------------------------------------------------------- cpp_misc.cu

def argmax_rows(args, sizes):
    x = args["x"].reshape(sizes["R"], sizes["COLS"])
    return {"out": x.argmax(axis=1).astype(np.int32)}


def scale(args, sizes):
    return {"out": _f64(args["in"]) * args["s"]}


def sort_pairs(args, sizes):
    p = args["pairs"].reshape(-1, 2)
    swaps = int((p[:, 0] > p[:, 1]).sum())
    return {"pairs": np.sort(p, axis=1).reshape(args["pairs"].shape),
            "budget": args["budget"] - swaps}


def reduce_rows_sum(args, sizes):
    return {"out": _f64(args["x"]).reshape(sizes["R"], sizes["COLS"]).sum(axis=1)}


def reduce_rows_max(args, sizes):
    return {"out": _f64(args["x"]).reshape(sizes["R"], sizes["COLS"]).max(axis=1)}


def fir3(args, sizes):
    x = _f64(args["x"])
    p = np.pad(x, 1)
    return {"y": 2.0 * (0.25 * p[:-2] + 0.5 * p[1:-1] + 0.25 * p[2:])}


# -------------------------------------------------------------------- histogram.cu

def histogram(args, sizes):
    counts = np.bincount(args["data"] % 64, minlength=64)
    return {"bins": args["bins"] + counts.astype(np.int32)}


def histogram_remove(args, sizes):
    counts = np.bincount(args["data"] % 64, minlength=64)
    return {"bins": args["bins"] - counts.astype(np.int32)}


def histogram_weighted(args, sizes):
    out = np.zeros(64)
    np.add.at(out, args["idx"] & 63, _f64(args["w"]))
    return {"bins": _f64(args["bins"]) + out}


def rgba_to_grey(args, sizes):
    # the kernel computes in float32 and truncates: replay that exactly
    p = args["rgba"].astype(np.float32)
    v = (np.float32(.299) * p[..., 0] + np.float32(.587) * p[..., 1]) \
        + np.float32(.114) * p[..., 2]
    return {"grey": v.astype(np.uint8)}


def mul_pairs(args: dict, sizes: dict) -> dict:
    """``__half2`` products: each pair of halves multiplied lane by lane, rounded to f16."""
    a = np.asarray(args["a"], np.float16)
    b = np.asarray(args["b"], np.float16)
    return {"out": (a * b).astype(np.float16)}


def cub_sum_rows(args, sizes):
    return {"out": _f64(args["in"]).reshape(sizes["R"], sizes["COLS"]).sum(axis=1)}


def cub_row_offsets(args, sizes):
    counts = np.asarray(args["counts"]).reshape(sizes["R"], sizes["COLS"])
    return {"offsets": (np.cumsum(counts, axis=1) - counts).astype(np.int32)}
