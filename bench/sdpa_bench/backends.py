"""The PyTorch side: devices and versions, inputs, masks as PyTorch wants them, and one forward per
variant (the naive code and the SDPA backends), with the reason a backend refuses."""

from __future__ import annotations

import contextlib
import os
import platform
import warnings

from .common import np, torch, F  # optional: cli.main() says when missing
from .validation import blocked_keys, mask_only_blocks


# Variant name -> attribute of torch.nn.attention.SDPBackend.
SDPA_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}


# SDPA backends that only exist on CUDA for the purpose of this benchmark.
CUDA_ONLY_VARIANTS = ("flash", "efficient", "cudnn")


def configure_precision():
    """Switch TF32 off (legacy flags, as documented) and return what is in force.

    Only the legacy flags are written and read here: PyTorch >= 2.9 can raise
    when the legacy and the new fp32_precision APIs are mixed.
    """
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = {
        "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
    }
    # Informational flags; each read is guarded because they vary by version.
    optional = {
        "allow_fp16_reduced_precision_reduction": lambda: bool(
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "allow_bf16_reduced_precision_reduction": lambda: bool(
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "math_sdp_fp16_bf16_reduction_allowed": lambda: bool(
            torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
        ),
        "float32_matmul_precision": lambda: torch.get_float32_matmul_precision(),
    }
    for key, getter in optional.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cfg[key] = getter()
        except Exception:  # noqa: BLE001 - attribute missing or API-mix check
            cfg[key] = None
    return cfg


def pick_device(choice):
    """Return (torch.device, is_cuda, warning or None)."""
    cuda_ok = torch.cuda.is_available()
    if choice == "cuda" and not cuda_ok:
        return None, False, "CUDA requested with --device cuda but torch.cuda.is_available() is False"
    if choice == "cpu" or not cuda_ok:
        note = None
        if choice == "auto":
            note = (
                "CUDA is not available: running on the CPU (smoke test only; "
                "flash/efficient/cudnn reported as unsupported, timings are wall clock)"
            )
        return torch.device("cpu"), False, note
    return torch.device("cuda", torch.cuda.current_device()), True, None


def versions_info():
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:  # noqa: BLE001
        cudnn = None
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cudnn": cudnn,
    }


def adapter_info(device, is_cuda):
    if is_cuda:
        name = torch.cuda.get_device_name(device) or "cuda"
        return {
            "name": name,
            "backend": "cuda",
            "device_type": "DiscreteGpu",
            "driver": "",
            "driver_info": "",
        }
    return {"name": "cpu", "backend": "cpu", "device_type": "Cpu", "driver": "", "driver_info": ""}


def sdpa_api():
    """Return (sdpa_kernel, SDPBackend) or (None, None) on old torch."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel, SDPBackend
    except ImportError:
        return None, None


def load_npy_inputs(directory):
    """Load q/k/v .npy files (float32 or float16; q [B,H,N,D], k and v [B,Hkv,N,D]) as float32."""
    arrays = {}
    for name in ("q", "k", "v"):
        path = os.path.join(directory, name + ".npy")
        a = np.load(path, allow_pickle=False)
        if a.dtype not in (np.float32, np.float16):
            raise ValueError(f"{path}: dtype {a.dtype}, expected float32 or float16")
        if a.ndim != 4:
            raise ValueError(f"{path}: shape {a.shape}, expected [B,H,N,D]")
        arrays[name] = np.ascontiguousarray(a.astype(np.float32))
    q, k, v = (arrays[n].shape for n in "qkv")
    # K and V: [B, Hkv, N, D] with Hkv dividing H (grouped-query attention), alike.
    if k != v or k[0] != q[0] or k[2:] != q[2:] or q[1] % k[1] != 0:
        raise ValueError(f"q/k/v shapes do not fit (k, v: [B, Hkv, N, D], Hkv dividing H): {[q, k, v]}")
    return arrays


def make_inputs(shape, seed, dtype, host_inputs, kv_heads=None, kv_seq=None):
    """q, k, v on the CPU, already cast (rounded) to dtype.

    Generated values are uniform in [-1, 1), drawn in float32 from one CPU
    generator seeded by `seed` (q first, then k, then v), then cast. k and v have
    `kv_heads` heads (grouped-query attention; default: q's).
    """
    if host_inputs is not None:
        tensors = [torch.from_numpy(host_inputs[n]) for n in ("q", "k", "v")]
    else:
        g = torch.Generator(device="cpu")
        g.manual_seed(seed)
        B, H, N, D = shape
        kv_shape = (B, kv_heads or H, kv_seq or N, D)
        tensors = [
            torch.empty(s, dtype=torch.float32).uniform_(-1.0, 1.0, generator=g)
            for s in (shape, kv_shape, kv_shape)
        ]
    return [t.to(dtype).contiguous() for t in tensors]


def build_masks(bias, causal, N, dtype, device, kv_seq=None, bottom_right=False):
    """The mask tensors of every variant, built once outside any timed region.

    Returns (masks, ref_bias): `masks` has "fill" (bool, True = blocked, for
    the naive variants' masked_fill, or None), "add" (a float bias in the run's
    dtype that the naive variants add first, or None), "attn_mask" and
    "is_causal" (SDPA's arguments) and "kind" (None, "blocking" or
    "additive"); `ref_bias` is the bias the reference must use (None, or
    float32 holding the values the variants see).  See the module docstring.
    """
    tri = None
    M = kv_seq or N
    off = M - N if bottom_right else 0
    if causal:
        # Over the N x M scores: top-left (SDPA's is_causal) or bottom-right.
        tri = torch.triu(torch.ones(N, M, dtype=torch.bool, device=device), diagonal=1 + off)
    if bias is None:
        if causal and bottom_right and M != N:
            # SDPA's own bottom-right causal bias, which flash and efficient take as causal.
            from torch.nn.attention.bias import causal_lower_right

            masks = {
                "fill": tri,
                "add": None,
                "attn_mask": causal_lower_right(N, M),
                "is_causal": False,
                "kind": None,
            }
            return masks, None
        masks = {"fill": tri, "add": None, "attn_mask": None, "is_causal": causal, "kind": None}
        return masks, None
    if causal and bottom_right and M != N:
        raise SystemExit("error: --causal-align bottom-right with a mask.npy is not supported here")
    if mask_only_blocks(bias):
        # 0 / -inf only: exactly a bool mask, the same in every dtype.
        blocked = torch.from_numpy(np.ascontiguousarray(blocked_keys(bias, causal))).to(device)
        masks = {
            "fill": blocked,
            "add": None,
            "attn_mask": ~blocked,  # SDPA's bool attn_mask: True = takes part
            "is_causal": False,  # SDPA refuses attn_mask together with is_causal
            "kind": "blocking",
        }
        return masks, bias
    add_cpu = torch.from_numpy(bias).to(dtype)  # SDPA wants attn_mask in q's dtype
    ref_bias = np.ascontiguousarray(add_cpu.float().numpy())
    add = add_cpu.to(device)
    attn_mask = add.masked_fill(tri, float("-inf")) if causal else add
    masks = {"fill": tri, "add": add, "attn_mask": attn_mask, "is_causal": False, "kind": "additive"}
    return masks, ref_bias


def make_forward(variant, q, k, v, masks, scale, dropout=0.0):
    group = q.shape[1] // k.shape[1]
    if group > 1 and variant in ("naive", "naive-inplace"):
        # The naive code expands K and V to every query head (a copy), as before enable_gqa.
        k0, v0 = k, v

        def expanded():
            return k0.repeat_interleave(group, dim=1), v0.repeat_interleave(group, dim=1)

    else:
        expanded = None
    return _make_forward(variant, q, k, v, masks, scale, dropout, expanded)


def _make_forward(variant, q, k, v, masks, scale, dropout, expanded):
    """Return a zero-argument callable that runs one forward of `variant`.

    `masks` comes from build_masks. `dropout` > 0: F.dropout(p, dropout, training=True) after the
    softmax of the naive variants (out of place: softmax's backward needs p), SDPA's dropout_p.
    """
    neg_inf = float("-inf")

    def drop(p):
        return F.dropout(p, dropout, training=True) if dropout > 0 else p

    fill, add = masks["fill"], masks["add"]
    if variant == "naive":

        def forward():
            kk, vv = expanded() if expanded else (k, v)
            scores = q @ kk.transpose(-2, -1)
            scores = scores * scale
            if add is not None:
                scores = scores + add
            if fill is not None:
                scores = scores.masked_fill(fill, neg_inf)
            p = torch.softmax(scores, dim=-1)
            return drop(p) @ vv

    elif variant == "naive-inplace":

        def forward():
            kk, vv = expanded() if expanded else (k, v)
            scores = q @ kk.transpose(-2, -1)
            scores = scores * scale
            if add is not None:
                scores.add_(add)
            if fill is not None:
                scores.masked_fill_(fill, neg_inf)
            p = torch.softmax(scores, dim=-1)
            return drop(p) @ vv

    else:
        gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
        attn_mask, is_causal = masks["attn_mask"], masks["is_causal"]

        def forward():
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, dropout_p=dropout,
                **gqa,
            )

    return forward


def kernel_context(variant):
    """Context manager that pins the SDPA backend (no-op for the naive variants)."""
    if variant not in SDPA_BACKENDS:
        return contextlib.nullcontext()
    sdpa_kernel, SDPBackend = sdpa_api()
    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[variant]))


def unsupported_reason(variant, is_cuda):
    """A reason string if the variant cannot run here at all, else None."""
    if variant in CUDA_ONLY_VARIANTS and not is_cuda:
        return (
            f"CUDA is not available (running on the CPU): the {variant} SDPA backend "
            "is only measured on a CUDA device"
        )
    if variant in SDPA_BACKENDS:
        sdpa_kernel, SDPBackend = sdpa_api()
        if sdpa_kernel is None:
            return "torch.nn.attention.sdpa_kernel is not available in this torch version"
        if not hasattr(SDPBackend, SDPA_BACKENDS[variant]):
            return f"SDPBackend.{SDPA_BACKENDS[variant]} is not available in this torch version"
    return None
