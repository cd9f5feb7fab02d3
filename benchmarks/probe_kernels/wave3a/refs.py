"""numpy references for the wave 3a probe kernels (inference-engine styles)."""

import numpy as np

f32 = np.float32


def _f(a):
    return np.asarray(a, dtype=np.float64)


def _bf16(x):
    """Round to bfloat16 (nearest even), kept in f32 as kir holds bf16."""
    x = np.asarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def _f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


# ---------------- moe_routing ----------------
def topk_gating_softmax(args, sizes):
    x = _f(args["input"])
    k = int(args["k"])
    R, E = x.shape
    p = np.exp(x - x.max(1, keepdims=True))
    p = p / p.sum(1, keepdims=True)
    order = np.argsort(-p, axis=1, kind="stable")[:, :k]
    out = np.take_along_axis(p, order, 1)
    s, e = int(args["start_expert"]), int(args["end_expert"])
    idx = np.where((order >= s) & (order < e), order - s, E)
    src = np.tile(np.arange(R, dtype=np.int32)[None, :], (k, 1))
    return {"output": out.astype(f32), "indices": idx.astype(np.int32), "source_rows": src}


def _align(ids, E, bs, sorted_len, eid_len):
    counts = np.bincount(ids, minlength=E)
    padded = -(-counts // bs) * bs
    cums = np.concatenate([[0], np.cumsum(padded)])
    sorted_ids = np.full(max(sorted_len, int(cums[-1])), len(ids), np.int32)
    expert_ids = np.full(eid_len, -1, np.int32)
    for e in range(E):
        toks = np.nonzero(ids == e)[0]
        sorted_ids[cums[e] : cums[e] + len(toks)] = toks
        expert_ids[cums[e] // bs : cums[e + 1] // bs] = e
    return cums.astype(np.int32), sorted_ids[:sorted_len], expert_ids


def moe_align_block_size(args, sizes):
    ids = args["topk_ids"].astype(np.int64)
    E, bs = int(args["num_experts"]), int(args["block_size"])
    cums, sorted_ids, expert_ids = _align(
        ids, E, bs, args["sorted_token_ids"].size, args["expert_ids"].size
    )
    return {
        "sorted_token_ids": sorted_ids,
        "expert_ids": expert_ids,
        "total_tokens_post_pad": np.array([cums[-1]], np.int32),
    }


def moe_expert_offsets(args, sizes):
    ids = args["topk_ids"].astype(np.int64)
    E, bs = int(args["num_experts"]), int(args["block_size"])
    cums, _, expert_ids = _align(ids, E, bs, 1, args["expert_ids"].size)
    return {
        "expert_offsets": cums,
        "expert_ids": expert_ids,
        "total_tokens_post_pad": np.array([cums[-1]], np.int32),
    }


def expand_input_rows(args, sizes):
    x = args["unpermuted_input"]
    src = args["expanded_dest_row_to_expanded_source_row"].astype(np.int64)
    return {"permuted_output": x[src % int(args["num_rows"])]}


def finalize_moe_routing(args, sizes):
    ex = _f(args["expanded_permuted_rows"])
    R, K = args["scales"].shape
    dest = args["expanded_source_row_to_expanded_dest_row"].astype(np.int64)
    eidx = args["expert_for_source_row"].astype(np.int64)
    out = np.zeros((R, ex.shape[1]))
    for r in range(R):
        for k in range(K):
            out[r] += float(args["scales"][r, k]) * (
                ex[dest[r + k * R]] + _f(args["bias"])[eidx[r, k]]
            )
    return {"reduced_unpermuted_output": out.astype(f32)}


def moe_sum(args, sizes):
    x = np.asarray(args["input"], np.float32)
    acc = np.zeros_like(x[:, 0])
    for k in range(x.shape[1]):
        acc = _bf16(acc + x[:, k])
    return {"out": acc}


# ---------------- quant ----------------
def int8_azp_quant(args, sizes):
    x = np.asarray(args["input"], f32)
    mx, mn = x.max(1), x.min(1)
    s = ((mx - mn) / f32(255.0)).astype(f32)
    z = np.rint(f32(-128.0) - mn / s).astype(np.int32)
    inv = (f32(1.0) / s).astype(f32)
    q = np.rint(x * inv[:, None]).astype(np.int64) + z[:, None]
    return {"out": np.clip(q, -128, 127).astype(np.int8), "scale": s, "azp": z}


def segmented_max(args, sizes):
    return {"scale": np.array([np.abs(args["input"]).max() / f32(448.0)], f32)}


def scaled_fp8_quant(args, sizes):
    import ml_dtypes

    x = np.asarray(args["input"], f32)
    inv = f32(1.0) / f32(args["scale"][0])
    r = np.clip(x * inv, -448.0, 448.0).astype(f32)
    return {"out": r.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)}


def per_token_group_quant(args, sizes):
    G = int(args["group_size"])
    x = np.asarray(args["input"], f32).reshape(-1, G)
    amax = np.maximum(np.abs(x).max(1), f32(args["eps"]))
    ys = (amax / f32(args["max_8bit"])).astype(f32)
    q = np.rint(np.clip(x / ys[:, None], -128.0, 127.0)).astype(np.int8)
    return {"output_q": q.reshape(args["output_q"].shape), "output_s": ys}


def dequant_int8_gemm_out(args, sizes):
    acc = np.asarray(args["acc"], f32)
    r = acc * np.asarray(args["a_scale"], f32)[:, None] * np.asarray(args["w_scale"], f32)[None]
    return {"out": _f16(_f16(r) + np.asarray(args["bias"], f32)[None])}


def static_int8_quant(args, sizes):
    x = np.asarray(args["input"], f32)
    inv = f32(1.0) / f32(args["scale_ptr"][0])
    return {"out": np.clip(np.rint(x * inv), -128, 127).astype(np.int8)}


# ---------------- norm_rope ----------------
def fused_add_rms_norm_vec(args, sizes):
    x = np.asarray(args["input"], f32)
    r = _f16(x + np.asarray(args["residual"], f32))
    H = r.shape[1]
    var = (r.astype(np.float64) ** 2).sum(1)
    s = (1.0 / np.sqrt(var / H + float(args["epsilon"]))).astype(f32)
    out = _f16(_f16(r * s[:, None]) * np.asarray(args["weight"], f32)[None])
    return {"input": out, "residual": r}


def rms_norm_bf16(args, sizes):
    x = np.asarray(args["input"], f32)
    H = x.shape[1]
    s = (1.0 / np.sqrt((x.astype(np.float64) ** 2).sum(1) / H + float(args["epsilon"]))).astype(f32)
    return {"out": _bf16(_bf16(x * s[:, None]) * np.asarray(args["weight"], f32)[None])}


def gemma_rms_norm(args, sizes):
    x = _f(args["input"])
    D = x.shape[1]
    s = 1.0 / np.sqrt((x**2).sum(1) / D + float(args["eps"]))
    return {"out": (x * s[:, None] * (1.0 + _f(args["weight"]))[None]).astype(f32)}


def fused_qk_norm(args, sizes):
    eps = float(args["eps"])
    out = {}
    for name, wn in (("q", "q_weight"), ("k", "k_weight")):
        x = np.asarray(args[name], f32).astype(np.float64)
        HD = x.shape[-1]
        s = 1.0 / np.sqrt((x**2).sum(-1, keepdims=True) / HD + eps)
        out[name] = _bf16((x * s * _f(args[wn])).astype(f32))
    return out


def layer_norm_welford(args, sizes):
    x = _f(args["x"])
    m = x.mean(1)
    rstd = 1.0 / np.sqrt(x.var(1) + float(args["eps"]))
    y = (x - m[:, None]) * rstd[:, None] * _f(args["gamma"])[None] + _f(args["beta"])[None]
    return {"y": _f16(y.astype(f32)), "mean_out": m.astype(f32), "rstd_out": rstd.astype(f32)}


def _rope(x, cs, R, neox, heads, HS, rnd):
    x = np.asarray(x, f32).reshape(x.shape[0], heads, HS).copy()
    half = R // 2
    cos, sin = cs[:, None, :half], cs[:, None, half:]
    if neox:
        a, b = x[..., :half].copy(), x[..., half:R].copy()
        x[..., :half] = rnd(rnd(a * cos) - rnd(b * sin))
        x[..., half:R] = rnd(rnd(b * cos) + rnd(a * sin))
    else:
        a, b = x[..., 0:R:2].copy(), x[..., 1:R:2].copy()
        x[..., 0:R:2] = rnd(rnd(a * cos) - rnd(b * sin))
        x[..., 1:R:2] = rnd(rnd(b * cos) + rnd(a * sin))
    return x.reshape(x.shape[0], -1)


def rotary_neox(args, sizes):
    R = int(args["rot_dim"])
    cs = np.asarray(args["cos_sin_cache"], f32)[args["positions"].astype(np.int64)]
    HS = int(args["head_size"])
    ident = lambda v: np.asarray(v, f32)
    return {
        "query": _rope(args["query"], cs, R, True, int(args["num_heads"]), HS, ident),
        "key": _rope(args["key"], cs, R, True, int(args["num_kv_heads"]), HS, ident),
    }


def rotary_gptj_batched(args, sizes):
    R = int(args["rot_dim"])
    rows = args["positions"].astype(np.int64) + args["cos_sin_cache_offsets"].astype(np.int64)
    cs = np.asarray(args["cos_sin_cache"], f32)[rows]
    HS = int(args["head_size"])
    return {
        "query": _rope(args["query"], cs, R, False, int(args["num_heads"]), HS, _f16),
        "key": _rope(args["key"], cs, R, False, int(args["num_kv_heads"]), HS, _f16),
    }


# ---------------- attention ----------------
def paged_attention_decode(args, sizes):
    q = _f(args["q"])
    kc, vc = _f(args["k_cache"]), _f(args["v_cache"])
    NS, NH, HS = q.shape
    BS = kc.shape[2]
    NKV = int(args["num_kv_heads"])
    bt, lens = args["block_tables"], args["seq_lens"]
    out = np.zeros_like(q)
    for s in range(NS):
        L = int(lens[s])
        t = np.arange(L)
        blk = bt[s, t // BS]
        for h in range(NH):
            kh = h // (NH // NKV)
            K = kc[blk, kh, t % BS]
            V = vc[blk, kh, t % BS]
            lg = K @ q[s, h] * float(args["scale"])
            p = np.exp(lg - lg.max())
            p /= p.sum() + 1e-6
            out[s, h] = p @ V
    return {"out": _f16(out.astype(f32))}


def paged_attention_v2_reduce(args, sizes):
    es, ml, tmp = _f(args["exp_sums"]), _f(args["max_logits"]), _f(args["tmp_out"])
    PS = sizes["PS"]
    NS, NH, MP, HS = tmp.shape
    out = np.zeros((NS, NH, HS))
    for s in range(NS):
        n = -(-int(args["seq_lens"][s]) // PS)
        for h in range(NH):
            m = ml[s, h, :n].max()
            r = es[s, h, :n] * np.exp(ml[s, h, :n] - m)
            out[s, h] = (r[:, None] * tmp[s, h, :n]).sum(0) / (r.sum() + 1e-6)
    return {"out": out.astype(f32)}


def reshape_and_cache(args, sizes):
    kc, vc = args["key_cache"].copy(), args["value_cache"].copy()
    NB, NH, HSX, BS, X = kc.shape
    HS = HSX * X
    for t, slot in enumerate(args["slot_mapping"].astype(np.int64)):
        if slot < 0:
            continue
        b, o = slot // BS, slot % BS
        k = args["key"][t].reshape(NH, HSX, X)
        v = args["value"][t].reshape(NH, HS)
        kc[b, :, :, o, :] = k
        vc[b, :, :, o] = v
    return {"key_cache": kc, "value_cache": vc}


def reshape_and_cache_flash(args, sizes):
    kc, vc = args["key_cache"].copy(), args["value_cache"].copy()
    NB, BS, NH, HS = kc.shape
    for t, slot in enumerate(args["slot_mapping"].astype(np.int64)):
        if slot < 0:
            continue
        kc[slot // BS, slot % BS] = args["key"][t].reshape(NH, HS)
        vc[slot // BS, slot % BS] = args["value"][t].reshape(NH, HS)
    return {"key_cache": kc, "value_cache": vc}


def merge_attn_states(args, sizes):
    pl, sl = _f(args["prefix_lse"]).T, _f(args["suffix_lse"]).T  # [T, NH]
    m = np.maximum(pl, sl)
    pe, se = np.exp(pl - m), np.exp(sl - m)
    tot = pe + se
    o = (
        _f(args["prefix_output"]) * (pe / tot)[..., None]
        + _f(args["suffix_output"]) * (se / tot)[..., None]
    )
    return {"output": _f16(o.astype(f32)), "output_lse": (np.log(tot) + m).T.astype(f32)}


def single_decode(args, sizes):
    q, k, v = _f(args["q"]), _f(args["k"]), _f(args["v"])
    NQO, HD = q.shape
    NKV = int(args["num_kv_heads"])
    o = np.zeros_like(q)
    lse = np.zeros(NQO)
    for h in range(NQO):
        kh = h // (NQO // NKV)
        s = k[:, kh] @ q[h] * float(args["sm_scale"])
        m = s.max()
        p = np.exp(s - m)
        o[h] = p @ v[:, kh] / p.sum()
        lse[h] = m + np.log(p.sum())
    return {"o": o.astype(f32), "lse": lse.astype(f32)}


# ---------------- act_sampling ----------------
def _silu(x):
    return x / (1.0 + np.exp(-x))


def silu_and_mul_bf16(args, sizes):
    x = _f(args["input"])
    D = int(args["d"])
    return {"out": _bf16((_silu(x[:, :D]) * x[:, D:]).astype(f32))}


def gelu_tanh_and_mul(args, sizes):
    x = _f(args["input"])
    D = int(args["d"])
    a = x[:, :D]
    g = 0.5 * a * (1.0 + np.tanh(0.7978845608028654 * (a + 0.044715 * a**3)))
    return {"out": _f16((g * x[:, D:]).astype(f32))}


def fatrelu_and_mul(args, sizes):
    x = np.asarray(args["input"], f32)
    D = int(args["d"])
    a = np.where(x[:, :D] > f32(args["threshold"]), x[:, :D], f32(0))
    return {"out": _f16(a * x[:, D:])}


def argmax_rows(args, sizes):
    x = np.asarray(args["logits"], f32)
    i = x.argmax(1)
    return {"out_ids": i.astype(np.int64), "out_vals": x[np.arange(len(i)), i]}


def greedy_argmax(args, sizes):
    return {"ids": np.asarray(args["logits"], f32).argmax(1).astype(np.int32)}


def apply_penalties(args, sizes):
    lg = np.asarray(args["logits"], f32).copy()
    cnt = args["output_bin_counts"]
    seen = (cnt > 0) | args["prompt_mask"].astype(bool)
    rep = np.asarray(args["repetition_penalties"], f32)[:, None]
    lg = np.where(seen, np.where(lg > 0, lg / rep, lg * rep), lg).astype(f32)
    lg = lg - np.asarray(args["frequency_penalties"], f32)[:, None] * cnt.astype(f32)
    lg = lg - np.asarray(args["presence_penalties"], f32)[:, None] * (cnt > 0).astype(f32)
    return {"logits": lg.astype(f32)}


def top_k_mask_logits(args, sizes):
    x = np.asarray(args["logits"], f32)
    k = int(args["top_k_val"])
    out = np.empty_like(x)
    for r in range(x.shape[0]):
        lo, hi = x[r].min(), x[r].max()
        if k < x.shape[1]:
            for _ in range(int(args["num_iters"])):
                mid = f32((lo + hi) * f32(0.5))
                if (x[r] >= mid).sum() >= k:
                    lo = mid
                else:
                    hi = mid
            pivot = lo
        else:
            pivot = -np.inf
        out[r] = np.where(x[r] >= pivot, x[r], -np.inf)
    return {"masked_logits": out}


def min_p_renorm(args, sizes):
    p = np.asarray(args["probs"], f32)
    th = (p.max(1) * np.asarray(args["min_p_arr"], f32)).astype(f32)[:, None]
    keep = np.where(p >= th, p, 0.0)
    return {"out": (keep / keep.sum(1, keepdims=True)).astype(f32)}


def sampling_from_probs(args, sizes):
    p = _f(args["probs"])
    u = _f(args["uniform_samples"]) * p.sum(1)
    c = np.cumsum(p, 1)
    out = np.array(
        [
            min(
                int(np.argmax(c[r] > u[r])) if (c[r] > u[r]).any() else p.shape[1] - 1,
                p.shape[1] - 1,
            )
            for r in range(p.shape[0])
        ],
        np.int32,
    )
    return {"output": out}


# ---------------- ggml_quants ----------------
def _half_at(b, off):
    """f16 values at byte offsets off (little-endian) of a u8 array, as f32."""
    lo, hi = b[off].astype(np.uint16), b[off + 1].astype(np.uint16)
    return (lo | (hi << 8)).view(np.float16).astype(np.float32)


def dequant_q8_0(args, sizes):
    b = args["vx"].astype(np.uint8)
    nb = b.size // 34
    blk = b.reshape(nb, 34)
    d = _half_at(blk.reshape(-1), np.arange(nb) * 34)
    q = blk[:, 2:].view(np.int8).astype(np.float32)
    return {"yy": _f16(d[:, None] * q).reshape(-1)}


def _scale_min_k4(j, s):
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)


def dequant_q4_K(args, sizes):
    b = args["vx"].astype(np.uint8)
    nb = b.size // 144
    out = np.zeros((nb, 256), np.float32)
    for i in range(nb):
        blk = b[i * 144 : (i + 1) * 144]
        dall, dmin = _half_at(blk, np.array([0, 2]))
        sc, qs = blk[4:16].astype(np.int64), blk[16:].astype(np.int64)
        for il in range(4):
            s1, m1 = _scale_min_k4(2 * il, sc)
            s2, m2 = _scale_min_k4(2 * il + 1, sc)
            q = qs[32 * il : 32 * il + 32]
            out[i, 64 * il : 64 * il + 32] = f32(dall * s1) * (q & 0xF) - f32(dmin * m1)
            out[i, 64 * il + 32 : 64 * il + 64] = f32(dall * s2) * (q >> 4) - f32(dmin * m2)
    return {"yy": out.reshape(-1)}


def _butterfly(v, op):
    v = v.astype(np.float32).copy()
    for off in (16, 8, 4, 2, 1):
        v = op(v, v[np.arange(32) ^ off]).astype(np.float32)
    return v[0]


def quantize_q8_1(args, sizes):
    x = np.asarray(args["x"], f32)
    R, KX = x.shape
    KXP = int(args["kx0_padded"])
    xp = np.zeros((R, KXP), f32)
    xp[:, :KX] = x
    out = np.zeros((R * KXP // 32, 36), np.uint8)
    for ib, blk in enumerate(xp.reshape(-1, 32)):
        amax = _butterfly(np.abs(blk), np.maximum)
        s = _butterfly(blk, np.add)
        d = f32(amax / f32(127))
        if amax == 0:
            q = np.zeros(32, np.int8)
        else:
            r = (blk / d).astype(f32)
            q = (np.sign(r) * np.floor(np.abs(r) + f32(0.5))).astype(np.int8)
        ds = np.array([d, s], np.float32).astype(np.float16).view(np.uint8)
        out[ib, :4] = ds
        out[ib, 4:] = q.view(np.uint8)
    return {"vy": out.reshape(-1)}


def mmvq_q8_0(args, sizes):
    C = int(args["ncols"])
    R = int(args["nrows"])
    nb = C // 32
    bx = args["vx"].astype(np.uint8).reshape(R * nb, 34)
    by = args["vy"].astype(np.uint8).reshape(nb, 36)
    dx = _half_at(bx.reshape(-1), np.arange(R * nb) * 34).reshape(R, nb)
    qx = bx[:, 2:].view(np.int8).astype(np.int64).reshape(R, nb, 32)
    dy = _half_at(by.reshape(-1), np.arange(nb) * 36)
    qy = by[:, 4:].view(np.int8).astype(np.int64)
    sums = (qx * qy[None]).sum(-1)
    return {"dst": (dx * dy[None] * sums).sum(1).astype(f32)}


def ggml_soft_max(args, sizes):
    x = _f(args["x"])
    RY = int(args["nrows_y"])
    H = x.shape[0] // RY
    mask = _f(args["mask"])
    nl2 = int(args["n_head_log2"])
    out = np.zeros_like(x)
    for r in range(x.shape[0]):
        h = r // RY
        base = float(args["m0"]) if h < nl2 else float(args["m1"])
        e = h + 1 if h < nl2 else 2 * (h - nl2) + 1
        v = x[r] * float(args["scale"]) + base**e * mask[r % RY]
        p = np.exp(v - v.max())
        out[r] = p / p.sum()
    return {"dst": out.astype(f32)}


def ggml_rope_neox(args, sizes):
    x = _f(args["x"])
    T, NH, NE0 = x.shape
    nd = int(args["n_dims"])
    out = x.copy()
    fs, ef, af = float(args["freq_scale"]), float(args["ext_factor"]), float(args["attn_factor"])
    lo, hi = (
        (float(v) for v in args["corr_dims.v"])
        if "corr_dims.v" in args
        else (float(args["corr_dims_v"][0]), float(args["corr_dims_v"][1]))
    )
    for t in range(T):
        for i0 in range(0, nd, 2):
            te = args["pos"][t] * float(args["theta_scale"]) ** (i0 / 2.0)
            ti = fs * te
            theta, ms = ti, af
            if ef != 0.0:
                y = (i0 // 2 - lo) / max(0.001, hi - lo)
                ramp = (1 - min(1.0, max(0.0, y))) * ef
                theta = ti * (1 - ramp) + te * ramp
                ms *= 1.0 + 0.1 * np.log(1.0 / fs)
            c, s = np.cos(theta) * ms, np.sin(theta) * ms
            x0, x1 = x[t, :, i0 // 2], x[t, :, i0 // 2 + nd // 2]
            out[t, :, i0 // 2] = x0 * c - x1 * s
            out[t, :, i0 // 2 + nd // 2] = x0 * s + x1 * c
    return {"dst": out.astype(f32)}


# ---------------- trtllm_misc ----------------
def fused_qkv_bias_transpose(args, sizes):
    B, S = int(args["batch_size"]), int(args["seq_len"])
    qkv = np.asarray(args["QKV"], f32) + np.asarray(args["qkv_bias"], f32)[None]
    qkv = _f16(qkv).reshape(B, S, 3, qkv.shape[2], qkv.shape[3]).transpose(2, 0, 3, 1, 4)
    return {"q_buf": qkv[0], "k_buf": qkv[1], "v_buf": qkv[2]}


def quant_kv_int8(args, sizes):
    x = np.asarray(args["src"], f32)
    inv = (f32(1) / np.asarray(args["scale"], f32)).astype(f32)
    q = np.rint((x - np.asarray(args["zero"], f32)[None, :, None]) * inv[None, :, None]) + 128
    return {"dst": np.clip(q, 0, 255).astype(np.uint8)}


def embedding_vocab_parallel(args, sizes):
    ids = args["input_ids"].astype(np.int64)
    vs, ve = int(args["vocab_start"]), int(args["vocab_end"])
    w = np.asarray(args["weight"], f32)
    ok = (ids >= vs) & (ids < ve)
    out = np.where(ok[:, None], w[np.clip(ids - vs, 0, w.shape[0] - 1)], 0.0)
    return {"output": out.astype(f32)}


def last_token_hidden(args, sizes):
    last = args["cu_seqlens"][1:].astype(np.int64) - 1
    return {"out": np.asarray(args["hidden_states"], f32)[last]}


def add_bias_softmax(args, sizes):
    lg = _f(args["logits"]).copy()
    V = int(args["vocab_size"])
    big = np.finfo(np.float32).max
    for b in range(lg.shape[0]):
        if args["finished"][b]:
            lg[b, :V] = -big
            lg[b, int(args["end_ids"][b])] = big
        else:
            lg[b, :V] += _f(args["bias"])[:V]
        lg[b, V:] = -big
        p = np.exp(lg[b] - lg[b].max())
        lg[b] = p / (p.sum() + 1e-6)
    return {"logits": lg.astype(f32)}


def softcap_temperature(args, sizes):
    x = _f(args["logits"])
    cap = float(args["cap"])
    return {"logits": (cap * np.tanh(x / cap) / _f(args["temperatures"])[:, None]).astype(f32)}


# ---------------- int_semantics ----------------
def int8_gemv_dp4a(args, sizes):
    W = args["W"].astype(np.int64)
    x = args["x"].astype(np.int64)
    acc = (W @ x).astype(f32)
    return {"y": (acc * np.asarray(args["w_scale"], f32) * f32(args["x_scale"])).astype(f32)}


def q4_dot_vsub(args, sizes):
    qw = args["qw"].astype(np.uint32)
    xb = args["xq"].astype(np.int32).view(np.int8).astype(np.int64).reshape(-1, 4)  # [2*WPR, 4]
    R, WPR = qw.shape
    qb = qw.view(np.uint8).reshape(R, WPR, 4).astype(np.int64)
    lo, hi = (qb & 0xF) - 8, (qb >> 4) - 8
    out = (lo * xb[0::2][None]).sum((1, 2)) + (hi * xb[1::2][None]).sum((1, 2))
    return {"out": out.astype(np.int32)}


def _fmix32(h):
    h = h.astype(np.uint64) & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def hash_uniform(args, sizes):
    seeds = args["seeds"].astype(np.uint64)
    n = int(args["n"])
    i = np.arange(n, dtype=np.uint64)
    raw = np.zeros((len(seeds), n), np.uint64)
    for r, s in enumerate(seeds):
        lo, hi = s & np.uint64(0xFFFFFFFF), s >> np.uint64(32)
        inner = _fmix32((hi + ((i * 0x9E3779B9) & 0xFFFFFFFF)) & 0xFFFFFFFF)
        raw[r] = _fmix32(lo ^ inner)
    out = ((raw >> 8).astype(f32) * f32(1.0 / 16777216.0)).astype(f32)
    return {"out": out, "raw": raw.astype(np.uint32)}


def _ordered(x):
    b = np.asarray(x, f32).view(np.uint32)
    return np.where(b & 0x80000000, ~b, b | 0x80000000).astype(np.uint32)


def row_max_ordered_key(args, sizes):
    x = np.asarray(args["x"], f32)
    k = _ordered(x)
    mk = k.max(1)
    cnt = ((k >> 24) == (mk >> 24)[:, None]).sum(1)
    return {"row_max": x.max(1), "max_key": mk, "top_bucket": cnt.astype(np.int32)}


def gather_expert_tokens(args, sizes):
    ids = args["topk_ids"]
    pos = args["positions"].copy()
    E = pos.shape[0]
    counts = np.zeros(E, np.int32)
    for e in range(E):
        idx = np.nonzero(ids == e)[0]
        pos[e, : len(idx)] = idx
        counts[e] = len(idx)
    return {"positions": pos, "counts": counts}


def sliding_window_blocks(args, sizes):
    start = args["seq_lens"].astype(np.int64) - int(args["window"])
    bs = int(args["block_size"])
    q = np.trunc(start / bs).astype(np.int32)
    return {
        "first_block": q,
        "rem": (start - q * bs).astype(np.int32),
        "shifted": (start >> 2).astype(np.int32),
    }


def dot_half2_hfma(args, sizes):
    a = np.asarray(args["a"], np.float64)
    b = np.asarray(args["b"], np.float64)
    R = a.shape[0]
    n2 = int(args["n2"])
    out = np.zeros(R, f32)
    for r in range(R):
        s = np.zeros(32, f32)
        for lane in range(32):
            acc = np.zeros(2)
            for i in range(lane, n2, 32):
                acc = (
                    (a[r, 2 * i : 2 * i + 2] * b[2 * i : 2 * i + 2] + acc)
                    .astype(np.float16)
                    .astype(np.float64)
                )
            s[lane] = f32(acc[0]) + f32(acc[1])
        for off in (16, 8, 4, 2, 1):
            s = (s + s[np.arange(32) ^ off]).astype(f32)
        out[r] = s[0]
    return {"out": out}


# ---------------- warp_smem ----------------
def _h(x):
    return np.asarray(x, np.float32).astype(np.float16)


def _h2_butterfly(v):
    """xor butterfly over 32 lanes of half values, rounding each add to half."""
    v = v.copy()
    for off in (16, 8, 4, 2, 1):
        v = (v.astype(np.float32) + v[np.arange(32) ^ off].astype(np.float32)).astype(np.float16)
    return v


def row_sum_half2(args, sizes):
    x = _h(args["x"])
    R = x.shape[0]
    n2 = int(args["n2"])
    x = x.reshape(R, n2, 2)
    out = np.zeros((R, 2), np.float32)
    for r in range(R):
        for c in range(2):
            acc = np.zeros(128, np.float16)
            for t in range(128):
                a = np.float16(0)
                for i in range(t, n2, 128):
                    a = np.float16(np.float32(a) + np.float32(x[r, i, c]))
                acc[t] = a
            warp = np.stack([_h2_butterfly(acc[w * 32 : (w + 1) * 32])[0] for w in range(4)])
            v = np.zeros(32, np.float16)
            v[:4] = warp
            out[r, c] = np.float32(_h2_butterfly(v)[0])
    return {"out": out}


def argmax_packed_u64(args, sizes):
    x = np.asarray(args["logits"], np.float32)
    i = x.argmax(1)
    b = x[np.arange(len(i)), i].view(np.uint32)
    ordered = np.where(b & 0x80000000, ~b, b | 0x80000000).astype(np.uint64)
    key = (ordered << np.uint64(32)) | (~i.astype(np.uint32)).astype(np.uint64)
    return {"out_idx": i.astype(np.int32), "out_key": key}


def top1_rows(args, sizes):
    x = np.asarray(args["x"], np.float32)
    i = x.argmax(1)
    return {"top_val": x[np.arange(len(i)), i], "top_idx": i.astype(np.int32)}


def sum_sq_rows(args, sizes):
    return {"out": (_f(args["x"]) ** 2).sum(1).astype(f32)}


def softmax_state_copy(args, sizes):
    x = _f(args["x"])  # [rows, n, 2]
    n = x.shape[1]

    def lse(v):
        if v.shape[1] == 0:
            return np.full((v.shape[0], 2), -np.inf)
        m = v.max(1)
        return m + np.log(np.exp(v - m[:, None]).sum(1))

    return {"lse": lse(x).astype(f32), "prev_lse": lse(x[:, : n - 1]).astype(f32)}


def sampled_logprob_rank(args, sizes):
    x = np.asarray(args["logits"], np.float64)
    s = args["sampled"].astype(np.int64)
    tok = x[np.arange(len(s)), s]
    m = x.max(1)
    lp = tok - m - np.log(np.exp(x - m[:, None]).sum(1))
    return {"logprob": lp.astype(f32), "rank": ((x > tok[:, None]).sum(1) + 1).astype(np.int32)}


def paged_attention_v1_grouped(args, sizes):
    q = _f(args["q"])
    kc = _f(args["k_cache"])  # [NB, NKV, HS/x, BS, x]
    NB, NKV, HSX, BS, X = kc.shape
    kc = kc.transpose(0, 1, 3, 2, 4).reshape(NB, NKV, BS, HSX * X)
    vc = _f(args["v_cache"]).transpose(0, 1, 3, 2)  # -> [NB, NKV, BS, HS]
    NS, NH, HS = q.shape
    out = np.zeros_like(q)
    for s in range(NS):
        L = int(args["seq_lens"][s])
        t = np.arange(L)
        blk = args["block_tables"][s, t // BS]
        for h in range(NH):
            kh = h // (NH // NKV)
            lg = kc[blk, kh, t % BS] @ q[s, h] * float(args["scale"])
            p = np.exp(lg - lg.max())
            p /= p.sum() + 1e-6
            out[s, h] = p @ vc[blk, kh, t % BS]
    return {"out": out.astype(f32)}


# ---------------- int4_kv_dequant ----------------
_AWQ_ORDER = np.array([0, 4, 1, 5, 2, 6, 3, 7])  # nibble holding column c of a packed word


def _unpack_awq(words):
    w = np.asarray(words, np.int64) & 0xFFFFFFFF
    nib = (w[..., None] >> (4 * _AWQ_ORDER)) & 0xF
    return nib.reshape(*w.shape[:-1], -1).astype(np.float32)


def awq_dequantize(args, sizes):
    K = int(args["K"])
    q = _unpack_awq(args["qweight"])
    z = _unpack_awq(args["qzeros"])
    s = np.asarray(args["scales"], f32)
    g = np.arange(K) // 32
    return {"out": _f16((q - z[g]) * s[g])}


def dequant_kv_u8(args, sizes):
    b = np.asarray(args["cache"], np.uint32).view(np.uint8).astype(np.float64) - 128.0
    H, D = int(args["num_heads"]), int(args["head_dim"])
    head = (np.arange(b.size) // D) % H
    s = _f16(args["scale"]).astype(np.float64)[head]
    z = _f16(args["zero"]).astype(np.float64)[head]
    return {"out": _f16((b * s + z).astype(f32))}


def moe_scatter_add(args, sizes):
    out = np.zeros(args["out"].shape)
    w = _f16(args["row_weight"])
    for r, t in enumerate(args["row_to_token"]):
        out[t] += _f16(np.asarray(args["expert_out"][r], f32) * w[r])
    return {"out": _f16(out.astype(f32))}


def absmax_all(args, sizes):
    return {"amax": np.array([np.abs(args["x"]).max()], f32)}


def expert_histogram(args, sizes):
    return {
        "counts": np.bincount(args["topk_ids"], minlength=int(args["num_experts"])).astype(np.int32)
    }


def append_paged_kv(args, sizes):
    g = lambda k: args.get("paged_kv." + k, args.get("paged_kv_" + k))
    kd, vd = np.array(g("k_data")), np.array(g("v_data"))
    ps = int(g("page_size"))
    for i, (b, pos) in enumerate(zip(args["batch_indices"], args["positions"])):
        page = g("indices")[g("indptr")[b] + pos // ps]
        kd[page, pos % ps] = args["append_key"][i]
        vd[page, pos % ps] = args["append_value"][i]
    return {"paged_kv_k_data": kd, "paged_kv_v_data": vd}
