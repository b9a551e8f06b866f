#!/usr/bin/env python3
"""Tests of the numpy-only parts of bench/torch_sdpa.py (no torch needed).

    python3 bench/test_torch_sdpa.py                      # unit tests
    python3 bench/test_torch_sdpa.py --attn-wgpu target/release/attn-wgpu
        # also: run attn-wgpu with masks (--save-inputs, --out) and check that
        # torch_sdpa.py's mask loading and f64 reference reproduce its output

Covers mask loading and conversion (load_npy_mask: bool under both
conventions, float, the shapes attn-wgpu accepts and writes, bad files),
blocked_keys / fully_masked_rows (intersection with causal), reference_rows
(mask and causal, fully-masked rows) and check_rows (NaN vs zero semantics).
Exits non-zero on the first failure.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdpa_bench import validation as ts  # noqa: E402

TOL = {"atol": 2e-5, "rtol": 2e-4}


def naive_attention(q, k, v, scale, allowed, bias=None):
    """Dense float64 attention over every row; `allowed` [B|1, H|1, N, N] bool."""
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64)) * scale
    if bias is not None:
        s = s + bias
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    with np.errstate(invalid="ignore"):
        p = e / e.sum(axis=-1, keepdims=True)
    return p @ v.astype(np.float64)


def all_rows(B, H, N):
    b, h, i = np.meshgrid(np.arange(B), np.arange(H), np.arange(N), indexing="ij")
    return np.stack([b.ravel(), h.ravel(), i.ravel()], axis=1).astype(np.int64)


def save(d, name, a):
    path = os.path.join(d, name)
    np.save(path, a)
    return path


def expect_error(fn, *needles):
    try:
        fn()
    except ValueError as e:
        for n in needles:
            assert n in str(e), f"message lacks {n!r}: {e}"
        return
    raise AssertionError(f"no ValueError (expected one naming {needles})")


def test_load_npy_mask(d):
    B, H, N = 2, 3, 4
    shape = (B, H, N, 8)
    m = np.tril(np.ones((N, N), dtype=bool))  # True on and below the diagonal
    # sdpa: True = takes part.
    bias = ts.load_npy_mask(save(d, "m.npy", m), shape, "sdpa")
    assert bias.dtype == np.float32 and bias.shape == (1, 1, N, N), bias.shape
    assert np.array_equal(bias[0, 0] == 0, m) and np.all(bias[0, 0][~m] == -np.inf)
    # mha: True = blocked.
    bias = ts.load_npy_mask(save(d, "m.npy", m), shape, "mha")
    assert np.array_equal(bias[0, 0] == -np.inf, m)
    # float: additive, kept as is (-inf blocks).
    f = np.zeros((B, 1, N, N), dtype=np.float32)
    f[1, 0, :, 0] = -np.inf
    f[0, 0, 2, 1] = -3.5
    bias = ts.load_npy_mask(save(d, "f.npy", f), shape)
    assert bias.shape == (B, 1, N, N) and np.array_equal(bias, f)
    # Every shape attn-wgpu accepts or writes, broadcastable over B and H.
    for s in [(N, N), (1, 1, N, N), (B, 1, N, N), (1, H, N, N), (B, H, N, N)]:
        a = np.zeros(s, dtype=np.float32)
        got = ts.load_npy_mask(save(d, "s.npy", a), shape)
        assert got.ndim == 4 and got.shape[2:] == (N, N), (s, got.shape)
    # Bad files: the message names the file and the bad value.
    p = save(d, "bad_shape.npy", np.zeros((3, 1, N, N), dtype=np.float32))
    expect_error(lambda: ts.load_npy_mask(p, shape), "bad_shape.npy", "[3, 1, 4, 4]")
    p = save(d, "bad_n.npy", np.zeros((N, N + 1), dtype=bool))
    expect_error(lambda: ts.load_npy_mask(p, shape), "bad_n.npy", "[4, 5]")
    p = save(d, "bad_dtype.npy", np.zeros((N, N), dtype=np.int32))
    expect_error(lambda: ts.load_npy_mask(p, shape), "bad_dtype.npy", "int32")
    p = save(d, "bad_dtype.npy", np.zeros((N, N), dtype=np.float64))
    expect_error(lambda: ts.load_npy_mask(p, shape), "float64")
    nan = np.zeros((N, N), dtype=np.float32)
    nan[1, 2] = np.nan
    p = save(d, "nan.npy", nan)
    expect_error(lambda: ts.load_npy_mask(p, shape), "nan.npy", "element 6", "NaN or +inf")
    pinf = np.zeros((N, N), dtype=np.float32)
    pinf[0, 3] = np.inf
    p = save(d, "pinf.npy", pinf)
    expect_error(lambda: ts.load_npy_mask(p, shape), "element 3 is inf")
    expect_error(lambda: ts.load_npy_mask(p, shape, "other"), "other")
    print("ok  load_npy_mask")


def test_blocked_and_fully_masked():
    N = 4
    bias = np.zeros((2, 1, N, N), dtype=np.float32)
    bias[0, 0, :, 0] = -np.inf  # batch 0: key 0 blocked for every row
    assert ts.mask_only_blocks(bias)
    assert not ts.mask_only_blocks(bias + np.float32(0.5))
    b = ts.blocked_keys(bias, causal=True)
    assert b.shape == (2, 1, N, N)
    # Intersection: blocked by the mask or above the diagonal.
    assert np.array_equal(b[1, 0], ts.causal_blocked(N))
    assert np.array_equal(b[0, 0], ts.causal_blocked(N) | (np.arange(N)[None, :] == 0))
    full = ts.fully_masked_rows(bias, True, 2, 3, N)
    assert full.shape == (2, 3, N)
    # Row 0 of batch 0 only had key 0 (causal), which the mask blocks.
    assert full[0, :, 0].all() and full.sum() == 3, full
    assert not ts.fully_masked_rows(bias, False, 2, 3, N).any()
    assert not ts.fully_masked_rows(None, True, 2, 3, N).any()
    print("ok  blocked_keys / fully_masked_rows")


def test_reference_and_check_rows():
    rng = np.random.default_rng(1)
    B, H, N, D = 2, 2, 6, 4
    q, k, v = (rng.uniform(-1, 1, (B, H, N, D)).astype(np.float32) for _ in range(3))
    bias = np.zeros((B, 1, N, N), dtype=np.float32)
    bias[0, 0, :, :2] = -np.inf  # batch 0: keys 0, 1 blocked -> rows 0, 1 fully masked (causal)
    bias[1, 0] = rng.uniform(-2, 0, (N, N)).astype(np.float32)  # batch 1: a float mask
    rows = all_rows(B, H, N)
    for causal in (True, False):
        ref, full = ts.reference_rows(q, k, v, rows, 0.5, causal, bias)
        allowed = bias != -np.inf
        if causal:
            allowed = allowed & ~ts.causal_blocked(N)
        dense = naive_attention(q, k, v, 0.5, allowed, np.where(allowed, bias, 0.0))
        dense = dense.reshape(-1, D)
        want_full = ts.fully_masked_rows(bias, causal, B, H, N).reshape(-1)
        assert np.array_equal(full, want_full), (causal, full, want_full)
        assert np.isnan(ref[full]).all() and np.isfinite(ref[~full]).all()
        assert np.allclose(ref[~full], dense[~full], rtol=1e-12, atol=1e-12)
        assert full.sum() == (2 * H if causal else 0)
    # No mask: plain (causal) attention.
    ref, full = ts.reference_rows(q, k, v, rows, 0.5, True)
    dense = naive_attention(q, k, v, 0.5, ~ts.causal_blocked(N)).reshape(-1, D)
    assert not full.any() and np.allclose(ref, dense, rtol=1e-12, atol=1e-12)

    # check_rows: fully-masked rows must be 0 ("zero") or NaN ("nan").
    ref, full = ts.reference_rows(q, k, v, rows, 0.5, True, bias)
    zero_out = np.where(full[:, None], 0.0, ref)
    nan_out = ref.copy()
    for got, sem, ok in [
        (zero_out, "zero", True),
        (nan_out, "nan", True),
        (nan_out, "zero", False),
        (zero_out, "nan", False),
    ]:
        passed, err, rel, _ = ts.check_rows(got, ref, full, sem, TOL)
        assert bool(passed.all()) == ok, (sem, ok)
        assert not np.isnan(err).any() and not np.isnan(rel).any()
    # A wrong element outside the fully-masked rows fails and is the worst.
    bad = zero_out.copy()
    r = int(np.flatnonzero(~full)[3])
    bad[r, 1] += 1e-3
    passed, err, _, _ = ts.check_rows(bad, ref, full, "zero", TOL)
    assert not passed[r, 1] and passed.sum() == passed.size - 1
    assert np.unravel_index(int(np.argmax(err)), err.shape) == (r, 1)
    # Small errors pass.
    passed, _, _, _ = ts.check_rows(zero_out + 1e-7, ref, full, "zero", TOL)
    assert passed.all()
    # select_rows keeps the extra rows.
    rows = ts.select_rows(2, 2, 300, 0, extra=[777])
    flat = rows[:, 0] * 600 + rows[:, 1] * 300 + rows[:, 2]
    assert 777 in flat and 0 in flat and 299 in flat
    print("ok  reference_rows / check_rows / select_rows")


def cross_check_with_attn_wgpu(binary, d):
    """attn-wgpu's own output on masked problems == torch_sdpa.py's reference on
    the inputs it saved (so both read masks the same way)."""
    B, H, N, D = 2, 2, 16, 8
    rng = np.random.default_rng(7)
    m_bool = rng.random((N, N)) < 0.7  # sdpa: True = takes part
    m_bool[3, :] = False  # row 3: no key takes part
    p_bool = save(d, "user_bool.npy", m_bool)
    m_float = rng.uniform(-3, 1, (B, 1, N, N)).astype(np.float32)
    m_float[0, 0, :, 5:9] = -np.inf
    p_float = save(d, "user_float.npy", m_float)
    cases = [
        ("bool sdpa, causal", ["--mask", p_bool], "sdpa"),
        ("bool mha, non-causal", ["--mask", p_bool, "--mask-convention", "mha", "--no-causal"], "mha"),
        ("float, causal", ["--mask", p_float], "sdpa"),
        ("key padding, causal", ["--key-padding", "5,0"], "sdpa"),
        ("bool + key padding, non-causal", ["--mask", p_bool, "--key-padding", "16,9", "--no-causal"], "sdpa"),
    ]
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    for name, extra, convention in cases:
        causal = "--no-causal" not in extra
        for variant, sem in (("math", "zero"), ("unfused", "nan")):
            out_dir = tempfile.mkdtemp(dir=d)
            o = os.path.join(out_dir, "o.npy")
            cmd = [
                binary, "run", "--variant", variant, "--batch", str(B), "--heads", str(H),
                "--seq", str(N), "--head-dim", str(D), "--warmup", "0", "--reps", "1",
                "--save-inputs", out_dir, "--out", o,
            ] + extra
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            assert r.returncode == 0, f"{name}: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
            q, k, v = (np.load(os.path.join(out_dir, n + ".npy")) for n in "qkv")
            # The saved mask is always the float32 bias; the bool file's convention
            # was applied by attn-wgpu already.
            bias = ts.load_npy_mask(os.path.join(out_dir, "mask.npy"), q.shape, "sdpa")
            rows = all_rows(B, H, N)
            ref, full = ts.reference_rows(q, k, v, rows, 1 / np.sqrt(D), causal, bias)
            got = np.load(o).astype(np.float64).reshape(-1, D)
            passed, err, _, _ = ts.check_rows(got, ref, full, sem, TOL)
            assert passed.all(), f"{name} / {variant}: max err {np.max(err)}"
            # The user's bool file read by torch_sdpa.py directly gives the same bias.
            if "--mask" in extra and extra[extra.index("--mask") + 1] == p_bool and "--key-padding" not in extra:
                direct = ts.load_npy_mask(p_bool, q.shape, convention)
                assert np.array_equal(direct[0, 0], bias[0, 0]), name
            print(f"ok  attn-wgpu {variant:<8} {name}: {int(full.sum())} fully-masked rows")


def test_tolerance_rule():
    """The low-precision twin rounds as its dtype and stays close to the f64 reference; the
    pytorch rule is FUDGE x max(twin error, PyTorch's default); bf16 rounds to nearest even."""
    assert ts.round_to(np.array([1.0 + 2.0**-8], np.float32), "bf16")[0] == 1.0  # tie: even
    assert ts.round_to(np.array([1.0 + 2.0**-8 + 2.0**-20], np.float32), "bf16")[0] == 1.0 + 2.0**-7
    assert ts.round_to(np.array([1.0 + 2.0**-12], np.float32), "f16")[0] == 1.0
    rng = np.random.default_rng(1)
    B, H, N, D = 1, 2, 48, 16
    for dt, bound in (("f32", 1e-5), ("f16", 5e-3), ("bf16", 5e-2)):
        q, k, v = (ts.round_to(rng.uniform(-1, 1, (B, H, N, D)), dt) for _ in range(3))
        rows = ts.select_rows(B, H, N, 0)
        ref, full = ts.reference_rows(q, k, v, rows, D**-0.5, True)
        lp = ts.low_precision_rows(q, k, v, rows, D**-0.5, True, None, dt)
        assert np.array_equal(ts.round_to(lp.astype(np.float32), dt), lp.astype(np.float32)), dt
        err = float(np.abs(lp - ref).max())
        assert err < bound, (dt, err)
        assert dt == "f32" or err > 0, dt
        t = ts.pytorch_tolerance(dt, err)
        assert t["atol"] == ts.FUDGE * max(err, ts.PYTORCH_DEFAULTS[dt]["atol"]), dt
        assert t["rtol"] == ts.FUDGE * ts.PYTORCH_DEFAULTS[dt]["rtol"], dt
        # The twin itself passes its own rule, a 10x larger error does not.
        passed, _, _, _ = ts.check_rows(lp, ref, full, "zero", t)
        assert passed.all(), dt
        worse = ref + 10 * (t["atol"] + t["rtol"] * np.abs(ref))
        passed, _, _, _ = ts.check_rows(worse, ref, full, "zero", t)
        assert not passed.any(), dt
    print("ok  low_precision_rows / pytorch_tolerance / round_to")


def test_kv_seq_and_alignment():
    """N != M: top-left causal (key j in row i iff j <= i) and bottom-right (j <= i + M - N); with
    N = 1 bottom-right sees every key, as no mask does; with M < N its first N - M rows see none;
    the backward reference takes the same offset."""
    rng = np.random.default_rng(3)
    B, H, N, M, D = 1, 2, 6, 10, 8
    q = rng.uniform(-1, 1, (B, H, N, D)).astype(np.float32)
    k, v = (rng.uniform(-1, 1, (B, H, M, D)).astype(np.float32) for _ in range(2))
    rows = ts.select_rows(B, H, N, 0)
    tl, _ = ts.reference_rows(q, k, v, rows, 0.3, True)
    br, _ = ts.reference_rows(q, k, v, rows, 0.3, True, None, M - N)
    last = rows[:, 2] == N - 1
    free, _ = ts.reference_rows(q, k, v, rows, 0.3, False)
    assert np.allclose(br[last], free[last]), "the last row sees every key bottom-right"
    assert not np.allclose(tl[last], br[last])
    q1 = q[:, :, :1]
    r1 = ts.select_rows(B, H, 1, 0)
    a, _ = ts.reference_rows(q1, k, v, r1, 0.3, True, None, M - 1)
    b, _ = ts.reference_rows(q1, k, v, r1, 0.3, False)
    assert np.allclose(a, b), "decode: bottom-right = no mask"
    full = ts.fully_masked_rows(None, True, B, H, M, 6 - M)  # M' = 6 keys for 10 rows
    assert full[0, 0, :4].all() and not full[0, 0, 4:].any()
    g = [x[0] for x in (q, k, v, q)]  # [H, rows, D]
    d_tl = ts.reference_grads(*g, 0.3, True, None)
    d_br = ts.reference_grads(*g, 0.3, True, None, causal_off=M - N)
    assert d_tl[1].shape == (H, M, D) and not np.allclose(d_tl[1], d_br[1])
    print("ok  kv-seq / causal alignment / fully-masked bottom-right rows")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attn-wgpu", default=None, help="attn-wgpu binary for the cross-check")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        test_load_npy_mask(d)
        test_blocked_and_fully_masked()
        test_reference_and_check_rows()
        test_tolerance_rule()
        test_kv_seq_and_alignment()
        if args.attn_wgpu:
            cross_check_with_attn_wgpu(args.attn_wgpu, d)
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
