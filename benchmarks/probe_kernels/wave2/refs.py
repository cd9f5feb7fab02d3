"""numpy references for the corpus3 kernels."""

import numpy as np

f32 = np.float32


def _f(a):
    return np.asarray(a, dtype=np.float64)


# ---------------- aten_style ----------------
def upsample_nearest(args, sizes):
    x = args["idata"]
    H1, W1, H2, W2 = (int(args[k]) for k in ("height1", "width1", "height2", "width2"))
    hs, ws = f32(args["height_scale"]), f32(args["width_scale"])
    hi = np.minimum(np.floor(np.arange(H2, dtype=f32) * hs).astype(np.int64), H1 - 1)
    wi = np.minimum(np.floor(np.arange(W2, dtype=f32) * ws).astype(np.int64), W1 - 1)
    if H1 == H2:
        hi = np.arange(H2)
    if W1 == W2:
        wi = np.arange(W2)
    return {"odata": x[:, hi][:, :, wi]}


def _src_index(scale, dst, align):
    if align:
        return scale * dst
    s = scale * (dst + 0.5) - 0.5
    return np.maximum(s, 0.0)


def upsample_bilinear(args, sizes):
    x = _f(args["idata"])
    NC = int(args["batchsize"]) * int(args["channels"])
    H1, W1, H2, W2 = (int(args[k]) for k in ("height1", "width1", "height2", "width2"))
    x = x.reshape(NC, H1, W1)
    al = bool(args["align_corners"])
    h1r = _src_index(float(args["rheight"]), np.arange(H2), al)
    w1r = _src_index(float(args["rwidth"]), np.arange(W2), al)
    h1 = h1r.astype(np.int64)
    w1 = w1r.astype(np.int64)
    h1p = (h1 < H1 - 1).astype(np.int64)
    w1p = (w1 < W1 - 1).astype(np.int64)
    hl = (h1r - h1)[:, None]
    wl = (w1r - w1)[None, :]
    H, W = h1[:, None], w1[None, :]
    Hp, Wp = (h1 + h1p)[:, None], (w1 + w1p)[None, :]
    out = (1 - hl) * ((1 - wl) * x[:, H, W] + wl * x[:, H, Wp]) + hl * (
        (1 - wl) * x[:, Hp, W] + wl * x[:, Hp, Wp]
    )
    return {"odata": out.reshape(args["odata"].shape).astype(f32)}


def embedding_backward(args, sizes):
    gw = _f(args["grad_weight"]).copy()
    idx = args["indices"].astype(np.int64)
    g = _f(args["grad"])
    pad = int(args["padding_idx"])
    for r, i in enumerate(idx):
        if i != pad:
            gw[i] += g[r]
    return {"grad_weight": gw.astype(f32)}


# ---------------- ft_style ----------------
def add_bias_residual(args, sizes):
    out = _f(args["input"]) + _f(args["residual1"]) + _f(args["bias"])[None]
    if args.get("residual2") is not None:
        out = out + _f(args["residual2"])
    return {"output": out.astype(f32)}


def _gelu_tanh(x):
    return x * 0.5 * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def add_bias_gelu(args, sizes):
    n = int(args["n"])
    out = _f(args["out"]).reshape(-1, n)
    return {"out": _gelu_tanh(out + _f(args["bias"])[None]).reshape(args["out"].shape).astype(f32)}


def add_bias_gelu_half2(args, sizes):
    h = np.float16
    out = args["out"].astype(h)
    bias = args["bias"].astype(h)
    n = int(args["n"])  # half2 columns
    o = out.reshape(-1, n, 2)
    val = (o + bias.reshape(1, n, 2)).astype(h)
    p3 = (val * (val * val).astype(h)).astype(h)
    t = 0.5 * (
        1.0 + np.tanh(0.7978845608028654 * (val.astype(f32) + f32(0.044715) * p3.astype(f32)))
    )
    res = (val * t.astype(f32).astype(h)).astype(h)
    return {"out": res.reshape(args["out"].shape)}


def general_layer_norm(args, sizes):
    x = _f(args["input"])
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + float(args["layernorm_eps"])) * _f(args["gamma"])
    if args.get("beta") is not None:
        y = y + _f(args["beta"])
    return {"output": y.astype(f32)}


def ft_softmax(args, sizes):
    B, H, S = int(args["batch_size"]), int(args["head_num"]), int(args["seq_len"])
    qk = _f(args["qk_buf_"]).reshape(B, H, S, S)
    m = _f(args["attr_mask"]).reshape(B, 1, S, S)
    t = qk * float(args["scalar"]) + (1.0 - m) * -10000.0
    e = np.exp(t - t.max(-1, keepdims=True))
    y = e / (e.sum(-1, keepdims=True) + 1e-6)
    return {"qk_buf_": y.reshape(args["qk_buf_"].shape).astype(f32)}


def ft_transpose(args, sizes):
    B, S, H, D = (int(args[k]) for k in ("batch_size", "seq_len", "head_num", "size_per_head"))
    src = args["src"].reshape(B, H, S, D)
    return {"dst": np.ascontiguousarray(src.transpose(0, 2, 1, 3)).reshape(args["dst"].shape)}


# ---------------- ggml_style ----------------
def _q4_0(vx):
    b = vx.reshape(-1, 18)
    d = b[:, :2].copy().view(np.float16).astype(f32)  # (nb, 1)
    qs = b[:, 2:].astype(np.int32)
    lo = (qs & 15) - 8
    hi = (qs >> 4) - 8
    vals = np.concatenate([lo, hi], axis=1).astype(f32) * d
    return vals.reshape(-1)


def _q8_0(vx):
    b = vx.reshape(-1, 34)
    d = b[:, :2].copy().view(np.float16).astype(f32)
    qs = b[:, 2:].copy().view(np.int8).astype(f32)
    return (qs * d).reshape(-1)


def dequantize_q4_0(args, sizes):
    return {"y": _q4_0(args["vx"]).astype(f32)}


def dmmv_q4_0(args, sizes):
    ncols, nrows = int(args["ncols"]), int(args["nrows"])
    W = _f(_q4_0(args["vx"])).reshape(nrows, ncols)
    return {"dst": (W @ _f(args["y"])).astype(f32)}


def rms_norm_f32(args, sizes):
    x = _f(args["x"])
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + float(args["eps"]))
    return {"dst": (x * r).astype(f32)}


def get_rows_q8_0(args, sizes):
    ne00 = int(args["ne00"])
    W = _q8_0(args["src0"]).reshape(-1, ne00)
    return {"dst": W[args["src1"].astype(np.int64)].astype(f32)}


# ---------------- im2col ----------------
def _conv_geom(a):
    return (
        int(a["kernel_h"]),
        int(a["kernel_w"]),
        int(a["pad_h"]),
        int(a["pad_w"]),
        int(a["stride_h"]),
        int(a["stride_w"]),
        int(a["dilation_h"]),
        int(a["dilation_w"]),
        int(a["height_col"]),
        int(a["width_col"]),
    )


def im2col(args, sizes):
    H, W = int(args["height"]), int(args["width"])
    kh, kw, ph, pw, sh, sw, dh, dw, Hc, Wc = _conv_geom(args)
    C = sizes["C"]
    im = args["data_im"].reshape(C, H, W)
    col = np.zeros((C, kh, kw, Hc, Wc), f32)
    for c in range(C):
        for i in range(kh):
            for j in range(kw):
                for y in range(Hc):
                    for x in range(Wc):
                        hy = y * sh - ph + i * dh
                        wx = x * sw - pw + j * dw
                        if 0 <= hy < H and 0 <= wx < W:
                            col[c, i, j, y, x] = im[c, hy, wx]
    return {"data_col": col.reshape(args["data_col"].shape)}


def col2im(args, sizes):
    H, W, C = int(args["height"]), int(args["width"]), int(args["channels"])
    kh, kw, ph, pw, sh, sw, dh, dw, Hc, Wc = _conv_geom(args)
    col = _f(args["data_col"]).reshape(C, kh, kw, Hc, Wc)
    im = np.zeros((C, H + 2 * ph, W + 2 * pw))
    for i in range(kh):
        for j in range(kw):
            for y in range(Hc):
                for x in range(Wc):
                    im[:, y * sh + i * dh, x * sw + j * dw] += col[:, i, j, y, x]
    return {"data_im": im[:, ph : ph + H, pw : pw + W].reshape(args["data_im"].shape).astype(f32)}


def maxpool_fwd(args, sizes):
    N, C, H, W = (int(args[k]) for k in ("num", "channels", "height", "width"))
    PH, PW = int(args["pooled_height"]), int(args["pooled_width"])
    kh, kw, sh, sw, ph, pw = (
        int(args[k]) for k in ("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w")
    )
    x = args["bottom_data"].reshape(N, C, H * W)
    top = np.zeros((N, C, PH, PW), f32)
    mask = np.zeros((N, C, PH, PW), np.int32)
    for a in range(PH):
        for b in range(PW):
            hs, ws = a * sh - ph, b * sw - pw
            he, we = min(hs + kh, H), min(ws + kw, W)
            hs, ws = max(hs, 0), max(ws, 0)
            idx = np.array([h * W + w for h in range(hs, he) for w in range(ws, we)])
            v = x[:, :, idx]
            k = v.argmax(-1)
            top[:, :, a, b] = v.max(-1)
            mask[:, :, a, b] = idx[k]
    return {
        "top_data": top.reshape(args["top_data"].shape),
        "mask": mask.reshape(args["mask"].shape),
    }


def maxpool_bwd(args, sizes):
    N, C, H, W = (int(args[k]) for k in ("num", "channels", "height", "width"))
    PH, PW = int(args["pooled_height"]), int(args["pooled_width"])
    td = _f(args["top_diff"]).reshape(N * C, PH * PW)
    m = args["mask"].reshape(N * C, PH * PW)
    kh, kw, sh, sw, ph, pw = (
        int(args[k]) for k in ("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w")
    )
    out = np.zeros((N * C, H * W))
    for h in range(H):
        for w in range(W):
            phs = 0 if h + ph < kh else (h + ph - kh) // sh + 1
            phe = min((h + ph) // sh + 1, PH)
            pws = 0 if w + pw < kw else (w + pw - kw) // sw + 1
            pwe = min((w + pw) // sw + 1, PW)
            for a in range(phs, phe):
                for b in range(pws, pwe):
                    sel = m[:, a * PW + b] == h * W + w
                    out[sel, h * W + w] += td[sel, a * PW + b]
    return {"bottom_diff": out.reshape(args["bottom_diff"].shape).astype(f32)}


def lrn_fill_scale(args, sizes):
    N, C, H, W = (int(args[k]) for k in ("num", "channels", "height", "width"))
    size = int(args["size"])
    x = _f(args["in"]).reshape(N, C, H, W)
    pre = (size - 1) // 2
    post = size - pre - 1
    sq = x * x
    out = np.zeros_like(x)
    for c in range(C):
        lo, hi = max(c - pre, 0), min(c + post, C - 1)
        out[:, c] = float(args["k"]) + sq[:, lo : hi + 1].sum(1) * float(args["alpha_over_size"])
    return {"scale": out.reshape(args["scale"].shape).astype(f32)}


# ---------------- scan_radix ----------------
def prescan(args, sizes):
    n = int(args["n"])
    x = _f(args["g_idata"]).reshape(-1, n)
    ex = np.cumsum(x, 1) - x
    return {"g_odata": ex.reshape(-1).astype(f32), "sums": x.sum(1).astype(f32)}


def uniform_add(args, sizes):
    n = int(args["n"])
    g = _f(args["g_data"]).reshape(-1, n) + _f(args["incr"])[:, None]
    return {"g_data": g.reshape(-1).astype(f32)}


def radix_histogram(args, sizes):
    keys = args["keys"].astype(np.uint64)
    G = sizes["G"]
    n = keys.size
    per = (n + G - 1) // G
    d = ((keys >> int(args["shift"])) & 15).astype(np.int64)
    h = np.zeros((16, G), np.uint32)
    for b in range(G):
        seg = d[b * per : min((b + 1) * per, n)]
        h[:, b] = np.bincount(seg, minlength=16)
    return {"hist": h.reshape(-1)}


def warp_split(args, sizes):
    k = args["keys"].reshape(-1, 32)
    bit = (k >> np.uint32(args["bit"])) & 1
    out = np.concatenate(
        [
            np.concatenate([r[b == 0], r[b == 1]])[None]  # each warp's keys split by the bit
            for r, b in zip(k, bit)
        ]
    )
    return {"out": out.reshape(-1)}


def compact_positive(args, sizes):
    x = args["in"][: int(args["n"])]
    v = x[x > 0]
    out = args["out"].copy()
    out[: v.size] = v
    return {"out": out, "count": np.array([v.size], np.int32)}


# ---------------- sparse_graph ----------------
def spmv_scalar(args, sizes):
    n = int(args["num_rows"])
    p, j, a, x = args["ptr"], args["indices"], _f(args["data"]), _f(args["x"])
    y = _f(args["y"]).copy()
    for r in range(n):
        s, e = p[r], p[r + 1]
        if e > s:
            y[r] += (a[s:e] * x[j[s:e]]).sum()
    return {"y": y.astype(f32)}


def spmv_vector(args, sizes):
    n = int(args["num_rows"])
    p, j, a, x = args["Ap"], args["Aj"], _f(args["Ax"]), _f(args["x"])
    y = np.zeros(n)
    for r in range(n):
        s, e = p[r], p[r + 1]
        if e > s:
            y[r] = (a[s:e] * x[j[s:e]]).sum()
    return {"y": y.astype(f32)}


def spmv_ell(args, sizes):
    idx = args["indices"]
    a = _f(args["data"])
    x = _f(args["x"])
    xs = np.where(idx >= 0, x[np.maximum(idx, 0)], 0.0)
    return {"y": (a * xs).sum(0).astype(f32)}


def pagerank(args, sizes):
    n = int(args["n"])
    off, src, deg, rank = args["in_offsets"], args["in_src"], args["out_degree"], _f(args["rank"])
    d = float(args["damping"])
    out = np.zeros(n)
    for v in range(n):
        s = 0.0
        for e in range(off[v], off[v + 1]):
            u = src[e]
            s += rank[u] / max(int(deg[u]), 1)
        out[v] = (1 - d) / n + d * s
    return {"new_rank": out.astype(f32)}


# ---------------- stencil ----------------
def conv2d(args, sizes):
    x = _f(args["in"])
    m = _f(args["d_Mask"]).reshape(5, 5)
    H, W = x.shape
    xp = np.pad(x, 2)
    out = np.zeros_like(x)
    for i in range(5):
        for j in range(5):
            out += m[i, j] * xp[i : i + H, j : j + W]
    return {"out": out.astype(f32)}


def conv_rows(args, sizes):
    x = _f(args["d_Src"])
    k = _f(args["c_Kernel"])
    H, W = x.shape
    R = 4
    xp = np.pad(x, ((0, 0), (R, R)))
    out = np.zeros_like(x)
    for j in range(-R, R + 1):
        out += k[R - j] * xp[:, R + j : R + j + W]
    return {"d_Dst": out.astype(f32)}


def stencil7(args, sizes):
    x = _f(args["in"])
    c0, c1 = float(args["c0"]), float(args["c1"])
    out = _f(args["out"]).copy()
    c = x[1:-1, 1:-1, 1:-1]
    nb = (
        x[1:-1, 1:-1, :-2]
        + x[1:-1, 1:-1, 2:]
        + x[1:-1, :-2, 1:-1]
        + x[1:-1, 2:, 1:-1]
        + x[:-2, 1:-1, 1:-1]
        + x[2:, 1:-1, 1:-1]
    )
    out[1:-1, 1:-1, 1:-1] = c0 * c + c1 * nb
    return {"out": out.astype(f32)}


def sobel(args, sizes):
    s = args["src"].astype(np.int64)
    p = np.pad(s, 1, mode="edge")
    H, W = s.shape
    P = lambda dy, dx: p[1 + dy : 1 + dy + H, 1 + dx : 1 + dx + W]
    gx = -P(-1, -1) - 2 * P(0, -1) - P(1, -1) + P(-1, 1) + 2 * P(0, 1) + P(1, 1)
    gy = -P(-1, -1) - 2 * P(-1, 0) - P(-1, 1) + P(1, -1) + 2 * P(1, 0) + P(1, 1)
    mag = np.sqrt((gx * gx + gy * gy).astype(f32))
    return {"dst": np.minimum(255, np.rint(mag).astype(np.int64)).astype(np.uint8)}


def box3_rgba(args, sizes):
    s = args["src"].astype(f32)
    H, W = s.shape[:2]
    p = np.pad(s, ((1, 1), (1, 1), (0, 0)), mode="edge")
    acc = np.zeros_like(s)
    for dy in range(3):
        for dx in range(3):
            acc = (acc + p[dy : dy + H, dx : dx + W]).astype(f32)
    inv = f32(1.0) / f32(9.0)
    return {"dst": (acc * inv + f32(0.5)).astype(f32).astype(np.uint8)}


# ---------------- by_example ----------------
def dot_partials(args, sizes):
    N = int(args["N"])
    a, b = _f(args["a"]), _f(args["b"])
    G, T = sizes["G"], 256
    i = np.arange(N)
    blk = (i % (G * T)) // T
    c = np.array([(a[blk == g] * b[blk == g]).sum() for g in range(G)])
    return {"c": c.astype(f32)}


def julia(args, sizes):
    DIM = 64
    out = np.zeros((DIM, DIM, 4), np.uint8)
    cr, ci = f32(-0.8), f32(0.156)
    for y in range(DIM):
        for x in range(DIM):
            jx = f32(f32(1.5) * f32(DIM // 2 - x)) / f32(DIM // 2)
            jy = f32(f32(1.5) * f32(DIM // 2 - y)) / f32(DIM // 2)
            ar, ai = jx, jy
            v = 1
            for _ in range(200):
                nr = f32(ar * ar) - f32(ai * ai)
                ni = f32(ai * ar) + f32(ar * ai)
                ar, ai = f32(nr + cr), f32(ni + ci)
                if f32(ar * ar) + f32(ai * ai) > 1000:
                    v = 0
                    break
            out[y, x] = (255 * v, 0, 0, 255)
    return {"ptr": out.reshape(-1)}


def nbody(args, sizes):
    X = _f(args["devX"]).reshape(-1, 4)
    r = X[None, :, :3] - X[:, None, :3]
    d2 = (r**2).sum(-1) + 0.01
    s = X[None, :, 3] / np.sqrt(d2**3)
    acc = (r * s[..., None]).sum(1)
    out = np.zeros_like(X)
    out[:, :3] = acc
    return {"devA": out.reshape(args["devA"].shape).astype(f32)}


def saxpy(args, sizes):
    return {"y": (f32(args["a"]) * args["x"] + args["y"]).astype(f32)}


# ---------------- warp_misc ----------------
def reduce_sum(args, sizes):
    return {"g_odata": np.array([_f(args["g_idata"]).sum() + float(args["g_odata"][0])], f32)}


def l2_normalize(args, sizes):
    x = _f(args["x"]).reshape(int(args["rows"]), -1)
    ss = (x * x).sum(-1, keepdims=True)
    return {
        "y": (x / np.sqrt(np.maximum(ss, float(args["eps"])))).reshape(args["y"].shape).astype(f32)
    }


def scale_add_half2(args, sizes):
    a, b = args["a"].astype(f32), args["b"].astype(f32)
    return {"out": (f32(args["alpha"]) * a + b).astype(np.float16)}


def softmax_rows(args, sizes):
    x = _f(args["in"])
    e = np.exp(x - x.max(-1, keepdims=True))
    return {"out": (e / e.sum(-1, keepdims=True)).astype(args["out"].dtype)}
