"""numpy references for the wave-3b probe kernels."""

import numpy as np

f32 = np.float32
u32 = np.uint32


def _f(a):
    return np.asarray(a, dtype=np.float64)


# ---------------- samples_a ----------------
def conv_columns(args, sizes):
    x = _f(args["d_Src"])
    k = _f(args["c_Kernel"])
    H, W = x.shape
    R = 8
    xp = np.pad(x, ((R, R), (0, 0)))
    out = np.zeros_like(x)
    for j in range(-R, R + 1):
        out += k[R - j] * xp[R + j : R + j + H, :]
    return {"d_Dst": out.astype(f32)}


def histogram256(args, sizes):
    data = args["d_Data"].astype(np.uint64)
    n = int(args["dataCount"])
    G = args["d_PartialHistograms"].shape[0]
    threads = 192
    out = np.zeros((G, 256), dtype=np.uint32)
    pos = np.arange(n)
    blk = (pos // threads) % G
    for b in range(G):
        words = data[:n][blk == b]
        for s in (0, 8, 16, 24):
            out[b] += np.bincount(((words >> s) & 0xFF).astype(np.int64), minlength=256).astype(u32)
    return {"d_PartialHistograms": out}


def merge_histogram(args, sizes):
    p = args["d_PartialHistograms"].astype(np.uint64)
    cnt = int(args["histogramCount"])
    return {"d_Histogram": p[:cnt].sum(axis=0).astype(u32)}


def _odd_even_network(keys, vals, length, asc):
    keys = keys.copy()
    vals = vals.copy()
    nthreads = keys.shape[-1] // 2
    t = np.arange(nthreads)
    size = 2
    while size <= length:
        stride = size // 2
        offset = t & (stride - 1)
        first = True
        while stride > 0:
            pos = 2 * t - (t & (stride - 1))
            if first:
                a, b, active = pos, pos + stride, np.ones_like(t, dtype=bool)
            else:
                a, b, active = pos - stride, pos, offset >= stride
            a, b = a[active], b[active]
            ka, kb = keys[:, a], keys[:, b]
            swap = (ka > kb) == asc
            na = np.where(swap, kb, ka)
            nb = np.where(swap, ka, kb)
            va, vb = vals[:, a], vals[:, b]
            keys[:, a], keys[:, b] = na, nb
            vals[:, a], vals[:, b] = np.where(swap, vb, va), np.where(swap, va, vb)
            stride >>= 1
            first = False
        size <<= 1
    return keys, vals


def odd_even_sort(args, sizes):
    L = 1024
    k = args["d_SrcKey"].reshape(-1, L)
    v = args["d_SrcVal"].reshape(-1, L)
    asc = bool(int(args["dir"]))
    length = int(args["arrayLength"])
    keys, vals = _odd_even_network(k, v, length, asc)
    if length == L:
        ref = np.sort(k, axis=1)
        assert np.array_equal(keys, ref if asc else ref[:, ::-1])
    return {"d_DstKey": keys.reshape(-1), "d_DstVal": vals.reshape(-1)}


def merge_sort_shared(args, sizes):
    L = 512
    k = args["d_SrcKey"].reshape(-1, L)
    v = args["d_SrcVal"].reshape(-1, L)
    length = int(args["arrayLength"])
    ko, vo = k.copy(), v.copy()
    for r in range(k.shape[0]):
        for s in range(0, L, length):
            order = np.argsort(k[r, s : s + length], kind="stable")
            ko[r, s : s + length] = k[r, s : s + length][order]
            vo[r, s : s + length] = v[r, s : s + length][order]
    return {"d_DstKey": ko.reshape(-1), "d_DstVal": vo.reshape(-1)}


def _hadamard(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def fwt_batch1(args, sizes):
    log2N = int(args["log2N"])
    N = 1 << log2N
    x = _f(args["d_Input"]).reshape(-1, N)
    return {"d_Output": (x @ _hadamard(N).T).reshape(-1).astype(f32)}


def fwt_batch2(args, sizes):
    stride = int(args["stride"])
    x = _f(args["d_Input"])
    B = x.shape[0]
    x = x.reshape(B, -1, 4, stride)  # i0 = ((pos - lo) << 2) + lo: groups of 4*stride
    D0, D1, D2, D3 = x[:, :, 0], x[:, :, 1], x[:, :, 2], x[:, :, 3]
    E0, E2 = D0 + D2, D0 - D2
    E1, E3 = D1 + D3, D1 - D3
    out = np.stack([E0 + E1, E0 - E1, E2 + E3, E2 - E3], axis=2)
    return {"d_Output": out.reshape(B, -1).astype(f32)}


def shfl_scan(args, sizes):
    d = args["data"].astype(np.int64)
    T = int(sizes["T"])
    d = d.reshape(-1, T)
    s = np.cumsum(d, axis=1)
    out = {"data": s.reshape(-1).astype(np.int32)}
    if args.get("partial_sums") is not None:
        out["partial_sums"] = s[:, -1].astype(np.int32)
    return out


# ---------------- samples_b ----------------
def _cnd(d):
    A1, A2, A3, A4, A5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
    K = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    c = (
        0.39894228040143267794
        * np.exp(-0.5 * d * d)
        * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))))
    )
    return np.where(d > 0, 1.0 - c, c)


def black_scholes(args, sizes):
    S = _f(args["d_StockPrice"])
    X = _f(args["d_OptionStrike"])
    T = _f(args["d_OptionYears"])
    R, V = float(args["Riskfree"]), float(args["Volatility"])
    sqrtT = np.sqrt(T)
    d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    c1, c2 = _cnd(d1), _cnd(d2)
    e = np.exp(-R * T)
    call = S * c1 - X * e * c2
    put = X * e * (1.0 - c2) - S * (1.0 - c1)
    return {"d_CallResult": call.astype(f32), "d_PutResult": put.astype(f32)}


def binomial(args, sizes):
    o = _f(args["d_OptionData"])
    N = 256
    out = np.zeros(o.shape[0])
    for k, (S, X, T, R, V) in enumerate(o):
        dt = T / N
        vDt = V * np.sqrt(dt)
        rDt = R * dt
        If, Df = np.exp(rDt), np.exp(-rDt)
        u, d = np.exp(vDt), np.exp(-vDt)
        pu = (If - d) / (u - d)
        pd = 1.0 - pu
        call = np.maximum(S * np.exp(vDt * (2.0 * np.arange(N + 1) - N)) - X, 0.0)
        for i in range(N, 0, -1):
            call[:i] = pu * Df * call[1 : i + 1] + pd * Df * call[:i]
        out[k] = call[0]
    return {"d_CallValue": out.astype(f32)}


def monte_carlo(args, sizes):
    S = _f(args["d_S"])
    X = _f(args["d_X"])
    mu, vs = float(args["MuByT"]), float(args["VBySqrtT"])
    pathN = int(args["pathN"])
    seed = np.uint64(int(args["seed"]))
    BLOCK = 128
    M = 0xFFFFFFFF
    nopt = S.shape[0]
    opt = np.arange(nopt, dtype=np.uint64)[:, None]
    tid = np.arange(BLOCK, dtype=np.uint64)[None, :]
    state = (
        seed
        ^ ((opt * np.uint64(0x9E3779B9)) & np.uint64(M))
        ^ ((tid * np.uint64(0x85EBCA6B)) & np.uint64(M))
    )
    state = np.where(state == 0, np.uint64(0x2545F491), state)

    def draw(st):
        x = st
        x = (x ^ (x << np.uint64(13))) & np.uint64(M)
        x = x ^ (x >> np.uint64(17))
        x = (x ^ (x << np.uint64(5))) & np.uint64(M)
        return x, ((x >> np.uint64(8)) + np.uint64(1)).astype(np.float64) / 16777216.0

    total = np.zeros((nopt, BLOCK))
    half = pathN // 2
    it = 0
    while it * BLOCK < half:
        active = (np.arange(BLOCK) + it * BLOCK < half)[None, :]
        state, u1 = draw(state)
        state, u2 = draw(state)
        r = np.sqrt(-2.0 * np.log(u1))
        a = 2.0 * np.pi * u2
        v1 = np.maximum(S[:, None] * np.exp(mu + vs * r * np.cos(a)) - X[:, None], 0.0)
        v2 = np.maximum(S[:, None] * np.exp(mu + vs * r * np.sin(a)) - X[:, None], 0.0)
        total += np.where(active, v1 + v2, 0.0)
        # threads past the end stop drawing: keep their state (it is not used again)
        it += 1
    return {"d_CallValue": (total.sum(axis=1) / pathN).astype(f32)}


def _dct_matrix():
    return np.array(
        [
            [
                (np.sqrt(1 / 8) if k == 0 else np.sqrt(2 / 8))
                * np.cos((2 * n + 1) * k * np.pi / 16)
                for n in range(8)
            ]
            for k in range(8)
        ]
    )


def dct8x8(args, sizes):
    x = _f(args["src"])
    H, W = x.shape
    D = _dct_matrix()
    b = x.reshape(H // 8, 8, W // 8, 8).transpose(0, 2, 1, 3)
    y = D @ b @ D.T
    return {"dst": y.transpose(0, 2, 1, 3).reshape(H, W).astype(f32)}


def reduce_single_pass(args, sizes):
    x = _f(args["g_idata"])
    n = int(args["n"])
    G = args["g_odata"].shape[0]
    bs = 128
    i = np.arange(n)
    blk = (i // (2 * bs)) % G
    part = np.array([x[:n][blk == b].sum() for b in range(G)])
    out = part.copy()
    if G > 1:
        out[0] = part.sum()
    return {"g_odata": out.astype(f32)}


def simple_templates(args, sizes):
    x = args["g_idata"]
    return {"g_odata": (x.astype(np.int64) * x.shape[0]).astype(x.dtype)}


def quasirandom(args, sizes):
    table = args["c_Table"].astype(np.uint64)
    seed = int(args["seed"])
    N = int(args["N"])
    data = (np.arange(N, dtype=np.uint64) + np.uint64(seed)) & np.uint64(0xFFFFFFFF)
    out = np.zeros((3, N), dtype=f32)
    for d in range(3):
        res = np.zeros(N, dtype=np.uint64)
        for bit in range(31):
            on = ((data >> np.uint64(bit)) & np.uint64(1)).astype(bool)
            res = np.where(on, res ^ table[d, bit], res)
        out[d] = (res + np.uint64(1)).astype(f32) * f32(1.0 / 2147483648.0)
    return {"d_Output": out.reshape(args["d_Output"].shape)}


def _moro(x):
    x = x.astype(np.float64)
    neg = x >= 2.0**31
    x = np.where(neg, 4294967295.0 - x, x)
    x1 = 1.0 / 4294967295.0
    p1 = x * x1 + x1 / 2
    p2 = p1 - 0.5
    a = [2.50662823884, -18.61500062529, 41.39119773534, -25.44106049637]
    b = [-8.4735109309, 23.08336743743, -21.06224101826, 3.13082909833]
    c = [
        0.337475482272615,
        0.976169019091719,
        0.160797971491821,
        2.76438810333863e-02,
        3.8405729373609e-03,
        3.951896511919e-04,
        3.21767881768e-05,
        2.888167364e-07,
        3.960315187e-07,
    ]
    z = p2 * p2
    body = (
        p2
        * (((a[3] * z + a[2]) * z + a[1]) * z + a[0])
        / ((((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0)
    )
    with np.errstate(all="ignore"):
        t = np.log(-np.log(p1))
    tail = c[8]
    for ci in c[7::-1]:
        tail = ci + t * tail
    tail = -tail
    z = np.where(p2 > -0.42, body, tail)
    return np.where(neg, -z, z)


def inverse_cnd(args, sizes):
    N = int(args["pathN"])
    if args.get("d_Input") is not None:
        x = args["d_Input"].astype(np.uint64)
    else:
        dist = 0xFFFFFFFF // (N + 1)
        x = ((np.arange(N, dtype=np.uint64) + np.uint64(1)) * np.uint64(dist)) & np.uint64(
            0xFFFFFFFF
        )
    return {"d_Output": _moro(x).astype(f32)}


def count_positive(args, sizes):
    n = int(args["n"])
    return {"nres": np.array([(args["src"][:n] > 0).sum()], dtype=np.int32)}


# ---------------- wmma_gemm ----------------
def simple_wmma(args, sizes):
    a = _f(args["a"])
    M, K = a.shape
    b = _f(args["b"]).reshape(-1, K)  # column-major K x N: row n holds column n
    c = _f(args["c"])
    d = float(args["alpha"]) * (a @ b.T) + float(args["beta"]) * c
    return {"d": d.astype(f32)}


def wmma_tf32(args, sizes):
    return {"C": (_f(args["A"]) @ _f(args["B"])).astype(f32)}


def wmma_bias_relu(args, sizes):
    y = _f(args["A"]) @ _f(args["B"]) + _f(args["bias"])[None, :]
    return {"C": np.maximum(y, 0.0).astype(f32)}


# ---------------- gemm_tiles ----------------
def sgemm_abc(args, sizes):
    M, N, K = int(args["M"]), int(args["N"]), int(args["K"])
    A = _f(args["A"]).reshape(M, K)
    B = _f(args["B"]).reshape(K, N)
    C = _f(args["C"]).reshape(M, N)
    out = float(args["alpha"]) * (A @ B) + float(args["beta"]) * C
    return {"C": out.reshape(args["C"].shape).astype(f32)}


def sgemm_plain(args, sizes):
    M, N, K = int(args["M"]), int(args["N"]), int(args["K"])
    A = _f(args["A"]).reshape(M, K)
    B = _f(args["B"]).reshape(K, N)
    return {"C": (A @ B).reshape(args["C"].shape).astype(f32)}


def sgemm_batched(args, sizes):
    A, B = _f(args["A"]), _f(args["B"])
    return {"C": np.einsum("bmk,bkn->bmn", A, B).astype(f32)}


def matmul_async(args, sizes):
    return {"C": (_f(args["A"]) @ _f(args["B"])).astype(f32)}


def sgemv(args, sizes):
    return {"y": (_f(args["A"]) @ _f(args["x"])).astype(f32)}


# ---------------- stencils ----------------
def stencil7_25d(args, sizes):
    x = _f(args["in"])
    out = _f(args["out"]).copy()
    c0, c1 = float(args["c0"]), float(args["c1"])
    c = x[1:-1, 1:-1, 1:-1]
    nb = (
        x[:-2, 1:-1, 1:-1]
        + x[2:, 1:-1, 1:-1]
        + x[1:-1, :-2, 1:-1]
        + x[1:-1, 2:, 1:-1]
        + x[1:-1, 1:-1, :-2]
        + x[1:-1, 1:-1, 2:]
    )
    out[1:-1, 1:-1, 1:-1] = c0 * c + c1 * nb
    return {"out": out.astype(f32)}


def fdtd3d(args, sizes):
    R = 4
    x = _f(args["input"])
    out = _f(args["output"]).copy()
    st = _f(args["stencil"])
    Z, Y, X = x.shape
    sl = (slice(R, Z - R), slice(R, Y - R), slice(R, X - R))
    v = st[0] * x[sl]
    for i in range(1, R + 1):
        v = v + st[i] * (
            x[R + i : Z - R + i, R : Y - R, R : X - R]
            + x[R - i : Z - R - i, R : Y - R, R : X - R]
            + x[R : Z - R, R + i : Y - R + i, R : X - R]
            + x[R : Z - R, R - i : Y - R - i, R : X - R]
            + x[R : Z - R, R : Y - R, R + i : X - R + i]
            + x[R : Z - R, R : Y - R, R - i : X - R - i]
        )
    out[sl] = v
    return {"output": out.astype(f32)}


def jacobi5(args, sizes):
    u = _f(args["u"])
    f = _f(args["f"])
    h2 = float(args["h2"])
    new = u.copy()
    new[1:-1, 1:-1] = 0.25 * (
        u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1] + h2 * f[1:-1, 1:-1]
    )
    res = _f(args["residual"]) + ((new - u) ** 2).sum()
    return {"unew": new.astype(f32), "residual": res.astype(f32)}


# ---------------- llmc_v2 ----------------
def _bf16(x):
    """Round to bfloat16 (nearest even), kept in float32."""
    b = np.asarray(x, dtype=f32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return (b & 0xFFFFFFFF).astype(np.uint32).view(f32)


def encoder_forward(args, sizes):
    wte, wpe = _f(args["wte"]), _f(args["wpe"])
    inp = args["inp"].astype(np.int64)
    B, T = inp.shape
    out = wte[inp] + wpe[None, :T]
    return {"out": _bf16(out.astype(f32)).reshape(args["out"].shape)}


def encoder_backward(args, sizes):
    dwte, dwpe = _f(args["dwte"]).copy(), _f(args["dwpe"]).copy()
    inp = args["inp"].astype(np.int64)
    dout = _f(args["dout"])
    B, T = inp.shape
    np.add.at(dwte, inp.reshape(-1), dout.reshape(B * T, -1))
    dwpe[:T] += dout.sum(axis=0)
    return {"dwte": dwte.astype(f32), "dwpe": dwpe.astype(f32)}


def residual_forward(args, sizes):
    return {"out": _bf16((_f(args["inp1"]) + _f(args["inp2"])).astype(f32))}


def gelu_backward(args, sizes):
    x = _f(args["inp"])
    dout = _f(args["d_in_out"])
    s = np.sqrt(2.0 / np.pi)
    a = s * (x + 0.044715 * x**3)
    th = np.tanh(a)
    sech = 1.0 / np.cosh(a) ** 2
    g = 0.5 * (1.0 + th) + x * 0.5 * sech * s * (1.0 + 3.0 * 0.044715 * x * x)
    return {"d_in_out": _bf16((g * dout).astype(f32))}


def fused_residual(args, sizes):
    N, C = int(args["N"]), int(args["C"])
    res = _bf16((_f(args["inp1"]) + _f(args["inp2"])).astype(f32)).astype(np.float64)
    res = res.reshape(N, C)
    m = res.mean(axis=1)
    v = ((res - m[:, None]) ** 2).mean(axis=1)
    s = 1.0 / np.sqrt(v + 1e-5)
    normed = (res - m[:, None]) * s[:, None] * _f(args["weight"])[None] + _f(args["bias"])[None]
    return {
        "residual": res.reshape(args["residual"].shape).astype(f32),
        "normed": _bf16(normed.astype(f32)).reshape(args["normed"].shape),
        "mean": m.astype(f32),
        "rstd": s.astype(f32),
    }


def global_norm_squared(args, sizes):
    d = _f(args["data"])
    return {"out": (_f(args["out"]) + (d * d).sum()).astype(f32)}


def _squirrel5(pos, seed):
    M = np.uint64(0xFFFFFFFF)
    b = pos.astype(np.uint64) & M
    b = (b * np.uint64(0xD2A80A3F)) & M
    b = (b + np.uint64(seed)) & M
    b ^= b >> np.uint64(9)
    b = (b + np.uint64(0xA884F197)) & M
    b ^= b >> np.uint64(11)
    b = (b * np.uint64(0x6C736F4B)) & M
    b ^= b >> np.uint64(13)
    b = (b + np.uint64(0xB79F3ABB)) & M
    b ^= b >> np.uint64(15)
    b = (b * np.uint64(0x1B56C4F5)) & M
    b ^= b >> np.uint64(17)
    return b


def _fma32(a, b, c):
    return (
        np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)
    ).astype(f32)


def adamw(args, sizes):
    n = int(args["num_parameters"])
    bs = int(sizes["BS"])
    lr, b1, b2 = f32(args["learning_rate"]), f32(args["beta1"]), f32(args["beta2"])
    c1, c2 = f32(args["beta1_correction"]), f32(args["beta2_correction"])
    eps, wd, gs = f32(args["eps"]), f32(args["weight_decay"]), f32(args["grad_scale"])
    seed = int(args["seed"])
    g = gs * args["grads_memory"].astype(f32)
    m0, v0 = args["m_memory"].astype(f32), args["v_memory"].astype(f32)
    m = _fma32(b1, m0, _fma32(-b1, g, g))
    v = _fma32(b2, v0, _fma32(-b2, g * g, g * g))
    mh, vh = m / c1, v / c2
    master = args["master_params_memory"]
    old = master.astype(f32) if master is not None else args["params_memory"].astype(f32)
    param = (old - (lr * (mh / (np.sqrt(vh) + eps) + wd * old))).astype(f32)
    idx = np.arange(n)
    tid, bid = idx % bs, idx // bs
    pos = (tid + 198491317 * (bid * bs)) & 0xFFFFFFFF
    thr = _squirrel5(np.asarray(pos, dtype=np.uint64), seed) & np.uint64(0xFFFF)
    bits = param.view(np.uint32).astype(np.uint64)
    low = bits & np.uint64(0xFFFF)
    bits = np.where(low > thr, bits | np.uint64(0xFFFF), bits & np.uint64(0xFFFF0000))
    p32 = bits.astype(np.uint32).view(f32)
    out = {"params_memory": _bf16(p32), "m_memory": m, "v_memory": v}
    if master is not None:
        out["master_params_memory"] = param
    return out


def softmax_fwd5(args, sizes):
    x = _f(args["inp"])
    Nn, T = int(args["N"]), int(args["T"])
    x = x.reshape(Nn, T, T) * float(args["inv_temperature"])
    mask = np.tril(np.ones((T, T), dtype=bool))
    z = np.where(mask, x, -np.inf)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    z = z / z.sum(axis=-1, keepdims=True)
    out = np.where(mask, z, _f(args["out"]).reshape(Nn, T, T))
    return {"out": out.reshape(args["out"].shape).astype(f32)}


def permute_backward(args, sizes):
    dq, dk, dv = _f(args["dq"]), _f(args["dk"]), _f(args["dv"])
    x = np.stack([dq, dk, dv], axis=1)  # B, 3, NH, N, d
    return {"dinp": x.transpose(0, 3, 1, 2, 4).astype(f32)}


def repkv(args, sizes):
    B, N, NH, rf, HD = (int(args[k]) for k in ("B", "N", "NH", "replicate_factor", "HD"))
    kv = NH // rf
    x = _f(args["gqa_qkv"]).reshape(B, N, NH + 2 * kv, HD)
    q = x[:, :, :NH]
    k = np.repeat(x[:, :, NH : NH + kv], rf, axis=2)
    v = np.repeat(x[:, :, NH + kv :], rf, axis=2)
    out = np.stack([q, k, v], axis=2)
    return {"replicated_qkv": out.reshape(args["replicated_qkv"].shape).astype(f32)}


# ---------------- samples_c ----------------
def integrate_particles(args, sizes):
    pos = args["posArray"].astype(f32).copy()
    vel = args["velArray"].astype(f32).copy()
    dt = f32(args["deltaTime"])
    g = np.broadcast_to(
        np.asarray(args["params_gravity"], dtype=f32), (3,)
    )  # a float3 given one value
    cp = np.broadcast_to(np.asarray(args["params_colliderPos"], dtype=f32), (3,))
    cr = f32(args["params_colliderRadius"])
    damp, r = f32(args["params_globalDamping"]), f32(args["params_particleRadius"])
    bd = f32(args["params_boundaryDamping"])
    p, v = pos[:, :3].astype(np.float64), vel[:, :3].astype(np.float64)
    v = (v + g * dt) * damp
    p = p + v * dt
    rel = p - cp
    dist = np.sqrt((rel * rel).sum(1))
    hit = dist < cr + r
    nrm = rel / dist[:, None]
    v = np.where(hit[:, None], v - 2.0 * (v * nrm).sum(1)[:, None] * nrm, v)
    for ax in (0, 1, 2):
        hi = p[:, ax] > 1.0 - r
        p[:, ax] = np.where(hi, 1.0 - r, p[:, ax])
        v[:, ax] = np.where(hi, v[:, ax] * bd, v[:, ax])
        lo = p[:, ax] < -1.0 + r
        p[:, ax] = np.where(lo, -1.0 + r, p[:, ax])
        v[:, ax] = np.where(lo, v[:, ax] * bd, v[:, ax])
    pos[:, :3], vel[:, :3] = p, v
    return {"posArray": pos, "velArray": vel}


def fft_radix2(args, sizes):
    d = _f(args["data"])
    z = d[..., 0] + 1j * d[..., 1]
    F = np.fft.fft(z, axis=-1)
    return {"data": np.stack([F.real, F.imag], -1).astype(f32)}


def scan_rows(args, sizes):
    return {"out": np.cumsum(_f(args["in"]), axis=1).astype(f32)}


# ---------------- numerics ----------------
def softmax_rows(args, sizes):
    x = _f(args["x"])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": (e / e.sum(axis=1, keepdims=True)).astype(f32)}


def layernorm_rows(args, sizes):
    x = _f(args["x"])
    mu = x.mean(axis=1)
    var = np.maximum((x * x).mean(axis=1) - mu * mu, 0.0)
    rstd = 1.0 / np.sqrt(var + float(args["eps"]))
    y = (x - mu[:, None]) * rstd[:, None] * _f(args["gamma"])[None] + _f(args["beta"])[None]
    return {"y": y.astype(f32), "mean_out": mu.astype(f32)}


def ddot(args, sizes):
    return {"result": np.asarray(args["result"], np.float64) + np.dot(args["x"], args["y"])}


def colmax(args, sizes):
    return {"colmax": np.maximum(args["colmax"], args["a"].max(axis=0)).astype(f32)}


def hdot_half2(args, sizes):
    a = args["a"].astype(np.float16).astype(np.float64)
    b = args["b"].astype(np.float16).astype(np.float64)
    R = a.shape[0]
    n2 = a.shape[1] // 2
    T = int(sizes["T"])
    a = a.reshape(R, n2, 2)
    b = b.reshape(n2, 2)
    acc = np.zeros((R, T, 2))
    for i0 in range(0, n2, T):
        t = np.arange(T)
        live = (i0 + t) < n2
        idx = np.minimum(i0 + t, n2 - 1)
        # fma with one rounding to half: the product of two halves is exact in double
        nxt = (a[:, idx] * b[idx][None] + acc).astype(np.float16).astype(np.float64)
        acc = np.where(live[None, :, None], nxt, acc)
    v = acc.astype(f32).sum(axis=2)
    return {"out": v.sum(axis=1).astype(f32)}


def _murmur3_32(data, seed):
    M = 0xFFFFFFFF
    c1, c2 = 0xCC9E2D51, 0x1B873593

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & M

    h = seed
    n = len(data) // 4
    for b in range(n):
        k = int.from_bytes(bytes(data[4 * b : 4 * b + 4]), "little")
        k = rotl((k * c1) & M, 15) * c2 & M
        h = rotl(h ^ k, 13)
        h = (h * 5 + 0xE6546B64) & M
    tail = data[4 * n :]
    k = 0
    if len(tail) >= 3:
        k ^= int(tail[2]) << 16
    if len(tail) >= 2:
        k ^= int(tail[1]) << 8
    if len(tail) >= 1:
        k ^= int(tail[0])
        k = rotl((k * c1) & M, 15) * c2 & M
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M
    h ^= h >> 16
    return h


def murmur3(args, sizes):
    keys, lens = args["keys"], args["lens"]
    n, seed = int(args["n"]), int(args["seed"])
    out = [_murmur3_32(list(keys[i, : lens[i]]), seed) for i in range(n)]
    return {"hashes": np.array(out, dtype=np.uint32)}
