"""Correctness, numpy only: masks in attn-wgpu's conventions, the float64 reference and its low-precision
twin, the tolerance rule (the same as attn-wgpu's src/validate.rs), the forward and gradient checks."""

from __future__ import annotations


from .common import np, torch, torch_dtype


# Validation: an element passes when |gpu - ref| <= atol + rtol * |ref|, with atol and rtol from
# one of two rules, the same ones attn-wgpu applies to its own rows (src/validate.rs):
# - "pytorch" (default), PyTorch's method (test/test_transformers.py, get_tolerances):
#   atol = FUDGE * max(largest |low-precision twin - f64 reference| over the checked rows,
#   PYTORCH_DEFAULTS[dtype].atol), rtol = FUDGE * PYTORCH_DEFAULTS[dtype].rtol. The twin
#   (low_precision_rows) rounds where FlashAttention rounds: scores and softmax in f32, P rounded
#   to the dtype before P.V (accumulated in f32), the output rounded to the dtype.
# - "strict": attn-wgpu's fixed per-dtype tolerances (STRICT_TOLERANCES).
FUDGE = 4.0


PYTORCH_DEFAULTS = {
    "f32": {"atol": 1e-5, "rtol": 1.3e-6},
    "f16": {"atol": 1e-3, "rtol": 1e-3},
    "bf16": {"atol": 1e-3, "rtol": 1.6e-2},
}


STRICT_TOLERANCES = {
    "f32": {"atol": 2e-5, "rtol": 2e-4},
    "f16": {"atol": 5e-5, "rtol": 1e-3},
    "bf16": {"atol": 5e-5, "rtol": 8e-3},
}


TOLERANCE_MODES = ("pytorch", "strict")


def pytorch_tolerance(dtype_name, lp_err):
    """The "pytorch" rule's atol/rtol for a run whose twin's largest error is lp_err."""
    d = PYTORCH_DEFAULTS[dtype_name]
    return {"atol": FUDGE * max(lp_err, d["atol"]), "rtol": FUDGE * d["rtol"]}


def round_to(x, dtype_name):
    """float32 array x rounded to f16 / bf16 (nearest even) and widened back; f32 unchanged."""
    x = np.asarray(x, dtype=np.float32)
    if dtype_name == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype_name == "bf16":
        u = x.view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
        return (u & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return x


MAX_RANDOM_ROWS = 256  # random (b, h, i) rows checked against the reference


REL_ERR_FLOOR = 1e-3  # max_rel_err = |err| / max(|ref|, REL_ERR_FLOOR)


# How a bool mask.npy is read (attn-wgpu's --mask-convention): sdpa = True takes
# part (SDPA's bool attn_mask), mha = True is blocked (masked_fill's mask).
MASK_CONVENTIONS = ("sdpa", "mha")


# What each variant returns for a row in which no key takes part: a plain
# softmax divides 0 by 0; SDPA zeroes such rows (_safe_softmax, PyTorch 2.5).
FULLY_MASKED = {
    "naive": "nan",
    "naive-inplace": "nan",
    "math": "zero",
    "flash": "zero",
    "efficient": "zero",
    "cudnn": "zero",
}


def load_npy_mask(path, shape, convention="sdpa"):
    """Read a mask .npy as the additive float32 bias attn-wgpu's kernels see.

    `shape` is q's [B, H, N, D].  Accepts what ``attn-wgpu run --mask`` accepts
    (bool or float32; [N, N] or [B, 1 or H, N, N]) and what ``--save-inputs``
    writes (float32 [1 or B, 1 or H, N, N]).  A bool mask is read by
    `convention` (sdpa: True = takes part; mha: True = blocked).  A float mask
    is additive and must not hold NaN or +inf.

    Returns float32 [Bm, Hm, N, N] (Bm in {1, B}, Hm in {1, H}): 0 where a key
    takes part, -inf where it is blocked, a float mask's own values otherwise.
    Raises ValueError naming the file and the bad value.
    """
    if convention not in MASK_CONVENTIONS:
        raise ValueError(f"mask convention {convention!r}: expected one of {', '.join(MASK_CONVENTIONS)}")
    B, H, N = int(shape[0]), int(shape[1]), int(shape[2])
    a = np.load(path, allow_pickle=False)
    if a.dtype != np.bool_ and a.dtype != np.float32:
        raise ValueError(f"{path}: mask dtype {a.dtype}, expected bool or float32")
    given = tuple(a.shape)
    if a.ndim == 2:
        a = a[None, None]
    if (
        a.ndim != 4
        or a.shape[2:] != (N, N)
        or a.shape[0] not in (1, B)
        or a.shape[1] not in (1, H)
    ):
        raise ValueError(
            f"{path}: mask shape {list(given)}, expected [{N}, {N}] or "
            f"[1 or {B}, 1 or {H}, {N}, {N}] (q/k/v are [B={B}, H={H}, N={N}, D])"
        )
    if a.dtype == np.bool_:
        takes_part = a if convention == "sdpa" else ~a
        bias = np.where(takes_part, np.float32(0.0), np.float32(-np.inf))
    else:
        bad = np.isnan(a) | (a == np.inf)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{path}: a float mask is added to the scores and must not hold NaN or +inf "
                f"(element {i} is {a.reshape(-1)[i]})"
            )
        bias = a
    return np.ascontiguousarray(bias, dtype=np.float32)


def mask_only_blocks(bias):
    """True when every bias value is 0 or -inf: the mask is a bool mask exactly."""
    return bool(np.all((bias == 0.0) | (bias == -np.inf)))


def blocked_keys(bias, causal):
    """[Bm, Hm, N, N] bool, True = blocked (masked_fill's convention): the
    bias's -inf entries, and the keys above the diagonal when causal (a key
    takes part only if the mask and causal both allow it)."""
    blocked = bias == -np.inf
    if causal:
        blocked = blocked | causal_blocked(bias.shape[-1])
    return blocked


def causal_blocked(n):
    """[N, N] bool, True above the diagonal: SDPA's is_causal (top-left)."""
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def fully_masked_rows(bias, causal, B, H, N, causal_off=0):
    """[B, H, N] bool: rows in which no key takes part (bias None: causal only,
    and a causal row always keeps key 0, so none)."""
    if bias is None:
        full = np.zeros((B, H, N), dtype=bool)
        if causal and causal_off < 0:
            full[..., : min(N, -causal_off)] = True  # bottom-right, M < N: rows before N - M
        return full
    full = blocked_keys(bias, causal).all(axis=-1)  # [Bm, Hm, N]
    return np.broadcast_to(full, (B, H, N))


def select_rows(B, H, N, seed, extra=()):
    """Seeded random (b, h, i) rows, plus rows 0 and N-1 of (b, h) = (0, 0) and
    the flat row indices `extra` (e.g. a fully-masked row, so that what a
    variant returns there is always checked).

    Returns an int64 array of shape [R, 3], sorted by (b, h, i).
    """
    total = B * H * N
    rng = np.random.default_rng(seed)
    count = min(MAX_RANDOM_ROWS, total)
    flat = set(int(x) for x in rng.choice(total, size=count, replace=False))
    flat.update({0, N - 1})  # flat index of (0, 0, i) is i
    flat.update(int(x) for x in extra)
    flat = np.array(sorted(flat), dtype=np.int64)
    b = flat // (H * N)
    h = (flat // N) % H
    i = flat % N
    return np.stack([b, h, i], axis=1)


def reference_rows(q, k, v, rows, scale, causal, bias=None, causal_off=0):
    """float64 attention output for the selected rows: (ref [R, D], full [R]).

    q, k, v are float32 numpy arrays [B, H, N, D] holding the rounded values
    the variants see (f16/bf16 are exact in float32); they are upcast exactly
    to float64.  `bias` is None or the additive float32 mask [Bm, Hm, N, N]
    (see load_npy_mask; for a float mask, already rounded to the run's dtype),
    added to the scaled scores.  Causal: key j is allowed iff j <= i (top-left
    aligned, as SDPA's is_causal with N_q == N_k), intersected with the mask.

    `full` marks fully-masked rows (no key takes part); their `ref` row is NaN
    and check_rows decides what a variant must return there.
    """
    H, N, D = q.shape[1], q.shape[2], q.shape[3]
    ref = np.empty((rows.shape[0], D), dtype=np.float64)
    full = np.zeros(rows.shape[0], dtype=bool)
    # Group rows by (b, h) so K and V are converted once per head.
    keys = rows[:, 0] * H + rows[:, 1]
    for key in np.unique(keys):
        sel = np.nonzero(keys == key)[0]
        b, h = int(rows[sel[0], 0]), int(rows[sel[0], 1])
        i_idx = rows[sel, 2]
        K = np.asarray(k[b, h], dtype=np.float64)  # [N, D]
        V = np.asarray(v[b, h], dtype=np.float64)  # [N, D]
        Q = np.asarray(q[b, h][i_idx], dtype=np.float64)  # [r, D]
        s = (Q @ K.T) * float(scale)  # [r, N]
        if bias is not None:
            bb = b if bias.shape[0] > 1 else 0
            hh = h if bias.shape[1] > 1 else 0
            s = s + bias[bb, hh][i_idx].astype(np.float64)
        if causal:
            # Key j in row i iff j <= i + causal_off (0: top-left, SDPA's is_causal; M - N:
            # bottom-right), over the M keys of K.
            blocked = np.arange(K.shape[0])[None, :] > i_idx[:, None] + causal_off
            s = np.where(blocked, -np.inf, s)
        m = s.max(axis=1, keepdims=True)
        none = m[:, 0] == -np.inf  # no key takes part
        m[none] = 0.0
        e = np.exp(s - m)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = e / e.sum(axis=1, keepdims=True)
        o = p @ V
        o[none] = np.nan
        ref[sel] = o
        full[sel] = none
    return ref, full


def low_precision_rows(q, k, v, rows, scale, causal, bias, dtype_name, causal_off=0):
    """The low-precision twin of reference_rows (attn-wgpu's reference::low_precision_row): scores
    and softmax in float32 (the row sum from the unrounded probabilities), P rounded to the
    dtype before P.V, P.V accumulated in float32, the output rounded to the dtype. Fully-masked
    rows are NaN, as in reference_rows."""
    H, N, D = q.shape[1], q.shape[2], q.shape[3]
    out = np.empty((rows.shape[0], D), dtype=np.float64)
    keys = rows[:, 0] * H + rows[:, 1]
    for key in np.unique(keys):
        sel = np.nonzero(keys == key)[0]
        b, h = int(rows[sel[0], 0]), int(rows[sel[0], 1])
        i_idx = rows[sel, 2]
        K = np.asarray(k[b, h], dtype=np.float32)
        V = np.asarray(v[b, h], dtype=np.float32)
        Q = np.asarray(q[b, h][i_idx], dtype=np.float32)
        s = (Q @ K.T) * np.float32(scale)
        if bias is not None:
            bb = b if bias.shape[0] > 1 else 0
            hh = h if bias.shape[1] > 1 else 0
            s = s + bias[bb, hh][i_idx].astype(np.float32)
        if causal:
            blocked = np.arange(K.shape[0])[None, :] > i_idx[:, None] + causal_off
            s = np.where(blocked, np.float32(-np.inf), s)
        m = s.max(axis=1, keepdims=True)
        none = m[:, 0] == -np.inf
        m[none] = 0.0
        e = np.exp(s - m).astype(np.float32)
        l_sum = e.sum(axis=1, keepdims=True, dtype=np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            o = (round_to(e, dtype_name) @ V) / l_sum
        o = round_to(o, dtype_name).astype(np.float64)
        o[none] = np.nan
        out[sel] = o
    return out


def check_rows(got, ref, full, semantics, tol):
    """Compare gathered output rows `got` [R, D] with the reference.

    `ref`/`full` come from reference_rows.  A fully-masked row must be all 0
    (semantics "zero") or all NaN ("nan"); elsewhere an element passes when
    finite and |got - ref| <= atol + rtol * |ref|.  Returns (passed [R, D],
    err [R, D], rel [R, D], expected [R, D]).
    """
    atol, rtol = tol["atol"], tol["rtol"]
    full2 = np.broadcast_to(np.asarray(full, dtype=bool)[:, None], ref.shape)
    expect = np.where(full2, 0.0 if semantics == "zero" else np.nan, ref)
    finite = np.isfinite(got)
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(got - expect), np.inf)
        passed = finite & (err <= atol + rtol * np.abs(expect))
        if semantics == "nan":
            hit = np.isnan(got)
            err = np.where(full2, np.where(hit, 0.0, np.inf), err)
            passed = np.where(full2, hit, passed)
        rel = err / np.maximum(np.abs(np.where(full2, 0.0, expect)), REL_ERR_FLOOR)
    return passed, err, rel, expect


def validate(out, rows, rows_dev, ref, full, full_dev, semantics, tol, rows_total):
    """Compare the checked rows of `out` with the float64 reference.

    `tol` holds the rule ("mode"), both rules' tolerances ("pytorch", "strict") and the twin's
    error ("lp_err"); the mode's tolerance decides, the other verdict is recorded beside it.
    nan_count / inf_count are counted over the whole output tensor; NaN is
    expected only in fully-masked rows of a "nan" variant (`full_dev`: [B, H, N]
    bool on the device, or None when no row is fully masked), anything else
    non-finite fails.  The error statistics are over the checked rows.
    """
    rules = tol
    tol = rules[rules["mode"]]
    atol, rtol = tol["atol"], tol["rtol"]
    nan = torch.isnan(out)
    nan_count = int(nan.sum().item())
    if semantics == "nan" and full_dev is not None:
        unexpected_nan = int((nan & ~full_dev[..., None]).sum().item())
    else:
        unexpected_nan = nan_count
    inf_count = int(torch.isinf(out).sum().item())
    got = out[rows_dev[0], rows_dev[1], rows_dev[2]].float().cpu().numpy().astype(np.float64)
    passed, err, rel, expect = check_rows(got, ref, full, semantics, tol)
    r, d = np.unravel_index(int(np.argmax(err)), err.shape)
    finite_ok = unexpected_nan == 0 and inf_count == 0
    ok = bool(passed.all()) and finite_ok
    verdicts = {}
    for mode in TOLERANCE_MODES:
        p_mode, _, _, _ = check_rows(got, ref, full, semantics, rules[mode])
        verdicts[mode] = "PASS" if bool(p_mode.all()) and finite_ok else "FAIL"
    lp_err = rules["lp_err"]
    max_abs = float(err.max())
    return {
        "verdict": "PASS" if ok else "FAIL",
        "tolerance_mode": rules["mode"],
        "pytorch_verdict": verdicts["pytorch"],
        "strict_verdict": verdicts["strict"],
        "lp_ref_max_abs_err": lp_err,
        "err_ratio_to_lp_ref": (max_abs / lp_err) if lp_err > 0 else None,
        "max_abs_err": float(err.max()),
        "max_rel_err": float(rel.max()),
        "worst": {
            "b": int(rows[r, 0]),
            "h": int(rows[r, 1]),
            "i": int(rows[r, 2]),
            "d": int(d),
            "gpu": float(got[r, d]),
            "ref": float(expect[r, d]),
        },
        "nan_count": nan_count,
        "unexpected_nan_count": unexpected_nan,
        "inf_count": inf_count,
        "rows_checked": int(rows.shape[0]),
        "rows_total": int(rows_total),
        "fully_masked_rows_checked": int(np.count_nonzero(full)),
        "fully_masked_rows_total": None if full_dev is None else int(full_dev.sum().item()),
        "fully_masked_expected": semantics,
        "atol": atol,
        "rtol": rtol,
    }


GRAD_HEADS = "batch 0, heads 0 and H-1 (with GQA: the whole groups of K/V heads 0 and Hkv-1)"


DROPOUT_UNCHECKED = (
    "not validated: PyTorch's dropout draws its own keep mask (its Philox offsets), which "
    "cannot be made to equal attn-wgpu's documented one, so no element-wise reference exists; "
    "the row is timed only (attn-wgpu validates its own dropout element-wise)"
)


def reference_grads(q, k, v, do, scale, causal, bias, lp_dtype=None, causal_off=0):
    """dQ, dK, dV (float64 numpy) of the heads given ([h, N, D] float numpy arrays), as
    attn-wgpu's backward oracle defines them (src/reference.rs, backward_head): with lp_dtype the
    low-precision twin (float32 arithmetic, P and dS rounded to the dtype before their products,
    outputs rounded), else float64. bias: [h, N, N] additive (or None)."""
    if lp_dtype is None:
        ft, rnd = np.float64, (lambda x: x)
    else:
        ft = np.float32
        tdt = torch_dtype(lp_dtype)
        rnd = lambda x: torch.from_numpy(np.ascontiguousarray(x)).to(tdt).float().numpy()  # noqa: E731
    q, k, v, do = (x.astype(ft) for x in (q, k, v, do))
    n, m = q.shape[1], k.shape[1]
    s = (q @ k.transpose(0, 2, 1)) * ft(scale)
    blocked = np.zeros(s.shape, dtype=bool)
    if causal:
        blocked |= np.triu(np.ones((n, m), dtype=bool), 1 + causal_off)[None]
    if bias is not None:
        s = s + bias.astype(ft)
        blocked |= np.isneginf(bias)
    s = np.where(blocked, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    live = np.isfinite(m)
    e = np.where(blocked, 0, np.exp(np.where(live, s - np.where(live, m, 0), -np.inf)))
    den = e.sum(axis=-1, keepdims=True)
    p = np.where(den > 0, e / np.where(den > 0, den, 1), 0).astype(ft)
    dv = rnd(p).transpose(0, 2, 1) @ do
    dp = do @ v.transpose(0, 2, 1)
    dd = (p * dp).sum(axis=-1, keepdims=True)
    ds = np.where(blocked, 0, p * (dp - dd) * ft(scale)).astype(ft)
    dsr = rnd(ds)
    dq = dsr @ k
    dk = dsr.transpose(0, 2, 1) @ q
    return [rnd(x).astype(np.float64) for x in (dq, dk, dv)]


def check_grads(got, ref, lp, dtype_name):
    """attn-wgpu's rule for gradients (src/validate.rs, validate_grads): atol = FUDGE x
    max(twin error, default atol), rtol = FUDGE x default rtol, per tensor."""
    out = []
    for name, g, r, l in zip(("dQ", "dK", "dV"), got, ref, lp):
        fin = np.isfinite(r) & np.isfinite(l)
        lp_err = float(np.abs(r - l)[fin].max()) if fin.any() else 0.0
        tol = pytorch_tolerance(dtype_name, lp_err)
        err = np.abs(g - r)
        bad_nan = int(np.count_nonzero(~np.isfinite(g) & np.isfinite(r)))
        ratio = err / (tol["atol"] + tol["rtol"] * np.abs(r))
        ratio = np.where(np.isfinite(r), ratio, 0)
        worst = float(np.nanmax(ratio)) if ratio.size else 0.0
        max_abs = float(np.nanmax(np.where(np.isfinite(r), err, 0)))
        out.append(
            {
                "tensor": name,
                "verdict": "PASS" if bad_nan == 0 and worst <= 1.0 else "FAIL",
                "max_abs_err": max_abs,
                "max_tol_ratio": worst,
                "nan_count": bad_nan,
                "atol": tol["atol"],
                "rtol": tol["rtol"],
                "lp_ref_max_abs_err": lp_err,
                "err_ratio_to_lp_ref": (max_abs / lp_err) if lp_err > 0 else None,
                "heads_checked": GRAD_HEADS,
            }
        )
    return out
