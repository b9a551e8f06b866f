#!/usr/bin/env python3
"""PyTorch attention baseline for attn-wgpu.

What it measures
----------------
For one attention problem (shape [B, H, N, D], causal or not, dtype f32, f16
or bf16) it runs these variants on the same inputs:

* ``naive``          q @ k^T, * scale, masked_fill(mask, -inf) (out of place),
                     softmax, @ v.  The causal mask is
                     ``torch.triu(ones(N, N, bool), diagonal=1)`` (True =
                     blocked, the nn.MultiheadAttention convention), built once
                     outside the timed region.  Non-causal runs skip the fill.
* ``naive-inplace``  the same with ``masked_fill_`` (in place).
* ``math``, ``flash``, ``efficient``, ``cudnn``
                     ``torch.nn.functional.scaled_dot_product_attention`` under
                     ``torch.nn.attention.sdpa_kernel(SDPBackend.<backend>)``.
                     A backend that refuses the dtype/shape/device is recorded
                     as "unsupported"; the reason is PyTorch's message followed
                     by the SDPA warnings that say why (e.g. "Expected query,
                     key and value to all be of dtype: {Half, BFloat16}").

For each variant it records:

* one cold call (wall clock, synchronized), then ``--warmup`` untimed calls
  (more, until ``--warmup-ms`` have passed: 500 on CUDA by default, as attn-wgpu does on a GPU),
  then ``--reps`` timed calls, each bracketed by its own pair of CUDA events
  (one synchronize at the end).  Median / p10 / p90 / min / max and the raw
  samples are reported in microseconds, plus the host time per call (the
  launch only, no synchronize).  On a CPU-only machine perf_counter is used.
* the CUDA kernels launched by one extra forward, from torch.profiler
  (memcpy/memset events are listed separately as ``copies`` and are not
  counted in kernels_per_forward; e.g. the out-of-place masked_fill of
  ``naive`` clones the scores, which shows up as a "Memcpy DtoD" copy).
* the peak allocated device memory of one forward.
* a validation against a float64 CPU reference on a seeded random subset of
  rows (at most 256, plus rows 0 and N-1 of the first (b, h)), computed from
  the same rounded inputs.  Tolerances follow one of two rules (``--tolerance``), see ``pytorch_tolerance`` below.

Inputs are uniform in [-1, 1), drawn in float32 from a CPU torch.Generator
seeded by ``--seed`` (q, then k, then v) and then cast to the dtype, or loaded
from ``--inputs DIR`` (q.npy, k.npy, v.npy; float32 or float16, [B, H, N, D]).

Masks (``--inputs DIR`` with a mask.npy)
---------------------------------------
``attn-wgpu run --save-inputs DIR`` writes mask.npy when its run had a mask
(``--mask`` and/or ``--key-padding``): the normalized additive float32 bias
attn-wgpu's kernels add to the scaled scores, shape [Bm, Hm, N, N] with Bm in
{1, B} and Hm in {1, H}: 0 where a key takes part, -inf where it is blocked, a
float mask's own values otherwise.  Causal is *not* in that file (attn-wgpu
tests it by index): pass ``--causal`` / ``--no-causal`` as the attn-wgpu run
did.  When DIR holds a mask.npy this script reads it with attn-wgpu's
conventions (``load_npy_mask``):

* float32: an additive bias (-inf blocks; NaN and +inf are refused);
* bool: read by ``--mask-convention``: ``sdpa`` (default) True = takes part,
  ``mha`` True = blocked (nn.MultiheadAttention / masked_fill);
* shape [N, N] or [1 or B, 1 or H, N, N].

It is combined with causal as their intersection (a key takes part only if
both allow it) and applied to every variant and to the float64 reference:

* a mask that only blocks (every bias value 0 or -inf, e.g. a bool mask or key
  padding) is one bool tensor ``blocked = (bias == -inf) | causal``:
  ``naive`` / ``naive-inplace`` do ``masked_fill(blocked, -inf)`` (one fill,
  as without a mask), the SDPA variants get ``attn_mask = ~blocked`` (bool,
  True = takes part) and ``is_causal=False``;
* any other float mask is cast to the run's dtype (SDPA wants attn_mask in the
  query's dtype; the reference uses the cast values) and added: ``naive*``
  add it to the scaled scores before the causal ``masked_fill``, SDPA gets it
  as a float ``attn_mask`` with -inf above the diagonal when causal.

A backend that refuses a mask (flash takes no attn_mask) is recorded as
"unsupported" with PyTorch's reason, like any other refusal.  A row in which
no key takes part ("fully masked") returns NaN in ``naive*`` (plain softmax,
0/0) and 0 in the SDPA variants (PyTorch >= 2.5); validation expects exactly
that per variant (``runs[].fully_masked_rows``: ``nan`` or ``zero``).

TF32 is switched off for cuBLAS and cuDNN so that f32 results are true f32.

How to run
----------
    python3 bench/torch_sdpa.py --dtype f16 --json results/h200/torch_f16.json
    python3 bench/torch_sdpa.py --seq 1024,4096 --dtype f16,bf16,f32 \\
        --json-dir results/h200
    # tiny smoke test (also works without a GPU):
    python3 bench/torch_sdpa.py --batch 1 --heads 2 --seq 64 --head-dim 16 \\
        --reps 2 --json /tmp/smoke.json

Needs PyTorch and numpy only (plus the standard library).  Without CUDA it runs
on the CPU (flash / efficient / cudnn are then reported as unsupported) and the
JSON says so (adapter.backend == "cpu", config.device == "cpu").
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import re
import shlex
import sys
import time
import warnings

try:
    import numpy as np
except ImportError:  # checked in main() so that --help still works
    np = None

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # checked in main() so that --help still works
    torch = None
    F = None

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

SCHEMA_VERSION = 1
TOOL_NAME = "torch_sdpa.py"

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

ALL_VARIANTS = ("naive", "naive-inplace", "math", "flash", "efficient", "cudnn")

# Variant name -> attribute of torch.nn.attention.SDPBackend.
SDPA_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}

# SDPA backends that only exist on CUDA for the purpose of this benchmark.
CUDA_ONLY_VARIANTS = ("flash", "efficient", "cudnn")

DTYPE_NAMES = ("f32", "f16", "bf16")

MAX_RANDOM_ROWS = 256  # random (b, h, i) rows checked against the reference
REL_ERR_FLOOR = 1e-3  # max_rel_err = |err| / max(|ref|, REL_ERR_FLOOR)
REASON_CHARS = 500  # exception messages are cut to this many characters
MAX_CAPTURED_WARNINGS = 20  # per variant, warnings copied into the report

DEFAULTS = {"batch": 8, "heads": 16, "seq": 1024, "head_dim": 64}

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


def torch_dtype(name):
    """Map our dtype name to the torch dtype."""
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def json_clean(obj):
    """Return a copy of obj that json.dump(allow_nan=False) accepts.

    Non-finite floats become None; numpy scalars become Python numbers;
    tuples become lists.
    """
    if isinstance(obj, dict):
        return {str(k): json_clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_clean(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if np is not None and isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, int):
        return obj
    return str(obj)


def write_json_atomic(path, data):
    """Write data as JSON to path.tmp, then rename it over path."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(json_clean(data), f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def truncate(text, limit=REASON_CHARS):
    text = str(text)
    return text if len(text) <= limit else text[:limit]


_TRIGGERED_RE = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?\s*$")


def clean_warning(text):
    """Drop PyTorch's '(Triggered internally at file:line.)' suffix."""
    return _TRIGGERED_RE.sub("", str(text)).strip()


def explanatory_warnings(messages):
    """The SDPA warnings that say *why* a kernel was refused.

    SDPA prints, per backend, a header ("Flash attention kernel not used
    because:") and then the reason; backends switched off by sdpa_kernel
    only say "... has been runtime disabled".  Keep the reasons only.
    """
    out = []
    for msg in messages:
        msg = clean_warning(msg)
        if not msg or msg.endswith("because:") or "runtime disabled" in msg:
            continue
        if msg not in out:
            out.append(msg)
    return out


def percentile(values, q):
    """numpy.percentile with linear interpolation (works on old and new numpy)."""
    try:
        return float(np.percentile(values, q, method="linear"))
    except TypeError:  # numpy < 1.22
        return float(np.percentile(values, q, interpolation="linear"))


def summarize_us(samples, with_samples=True):
    """Median / p10 / p90 / min / max (and optionally the raw samples) in µs."""
    a = np.asarray(samples, dtype=np.float64)
    out = {
        "median": percentile(a, 50),
        "p10": percentile(a, 10),
        "p90": percentile(a, 90),
        "min": float(a.min()),
        "max": float(a.max()),
    }
    if with_samples:
        out["samples"] = [float(x) for x in a]
    return out


def parse_int_list(text, what):
    try:
        values = [int(x) for x in str(text).split(",") if x.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: expected integers, got {text!r}")
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{what}: expected positive integers, got {text!r}")
    return values


def free_device_memory(is_cuda):
    """Drop unreferenced tensors and return cached blocks to the driver."""
    gc.collect()
    if is_cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def is_oom(exc):
    """True for an out-of-memory error, whatever class the torch version uses."""
    oom_cls = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_cls is not None and isinstance(exc, oom_cls):
        return True
    return "out of memory" in str(exc).lower()


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="PyTorch attention baseline (naive, SDPA math/flash/efficient/cudnn) "
        "for attn-wgpu; writes the attn-wgpu result JSON.",
    )
    p.add_argument("--batch", type=int, default=None, help="B (default: %d)" % DEFAULTS["batch"])
    p.add_argument("--heads", type=int, default=None, help="H (default: %d)" % DEFAULTS["heads"])
    p.add_argument(
        "--seq",
        default=None,
        help="N, or a comma list for a grid, e.g. 1024,4096 (default: %d)" % DEFAULTS["seq"],
    )
    p.add_argument(
        "--head-dim", type=int, default=None, help="D (default: %d)" % DEFAULTS["head_dim"]
    )
    p.add_argument(
        "--causal",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="causal (top-left aligned) mask (default: causal)",
    )
    p.add_argument("--scale", type=float, default=None, help="softmax scale (default 1/sqrt(D))")
    p.add_argument("--dtype", default="f16", help="f32, f16 or bf16, or a comma list for a grid (default: f16)")
    p.add_argument("--seed", type=int, default=0, help="input and row-subset seed (default: 0)")
    p.add_argument(
        "--tolerance",
        choices=TOLERANCE_MODES,
        default="pytorch",
        help="how outputs are judged, as attn-wgpu --tolerance: pytorch (default; 4 x the error "
        "of a low-precision twin, with PyTorch's default as a floor) or strict (attn-wgpu's "
        "fixed tolerances); both verdicts are recorded",
    )
    p.add_argument("--warmup", type=int, default=3, help="untimed calls after the cold one (default: 3)")
    p.add_argument("--warmup-ms", type=float, default=None,
                   help="least wall time of the warm-up in ms: more untimed calls until it has passed "
                        "(default: 500 on CUDA, 0 on the CPU; attn-wgpu's --warmup-ms)")
    p.add_argument("--reps", type=int, default=20, help="timed calls (default: 20)")
    p.add_argument(
        "--variants", default=",".join(ALL_VARIANTS), help="comma list of variants to run (default: all six)"
    )
    p.add_argument("--json", default=None, help="write the result JSON here (one grid point)")
    p.add_argument(
        "--backward",
        action="store_true",
        help="also time each variant's backward (autograd, for a seeded random dO), count its "
        "kernels, measure the training step's peak memory and validate dQ, dK, dV on two heads "
        "against a float64 reference under the same rule as the output",
    )
    p.add_argument(
        "--json-dir",
        default=None,
        help="write one JSON per (seq, dtype) here, "
        "named torch_B8_H16_N1024_D64_f16_causal.json",
    )
    p.add_argument(
        "--inputs",
        default=None,
        help="directory with q.npy, k.npy, v.npy ([B,H,N,D]), e.g. from attn-wgpu run "
        "--save-inputs; a mask.npy there (float32 additive bias, or bool read by "
        "--mask-convention; [N,N] or [1|B,1|H,N,N]) is applied to every variant and the "
        "reference, intersected with causal (pass --no-causal if the attn-wgpu run was)",
    )
    p.add_argument(
        "--kv-seq",
        type=int,
        default=None,
        help="keys M (default N): k and v are [B, Hkv, M, D]; with causal, --causal-align says "
        "where the diagonal sits (for decode, N=1, bottom-right is the same as --no-causal)",
    )
    p.add_argument(
        "--causal-align",
        choices=("top-left", "bottom-right"),
        default="top-left",
        help="where the causal diagonal sits when N != M (attn-wgpu's --causal ALIGN): top-left "
        "(SDPA's is_causal, default) or bottom-right (torch.nn.attention.bias.causal_lower_right)",
    )
    p.add_argument(
        "--kv-heads",
        type=int,
        default=None,
        help="K/V heads Hkv (default H): grouped-query attention, H a multiple of Hkv; SDPA with "
        "enable_gqa=True, the naive variants with k/v.repeat_interleave(H // Hkv, dim=1)",
    )
    p.add_argument(
        "--dropout",
        type=float,
        default=0.0,
        help="dropout_p on the attention probabilities (0 <= p < 1; default 0): SDPA's dropout_p, "
        "F.dropout for the naive variants. PyTorch's RNG cannot reproduce attn-wgpu's Philox keep "
        "mask, so with dropout the rows are timed, not validated (verdict n/a)",
    )
    p.add_argument(
        "--mask-convention",
        choices=MASK_CONVENTIONS,
        default="sdpa",
        help="how a bool mask.npy is read: sdpa (default) True = takes part, "
        "mha True = blocked (attn-wgpu's --mask-convention)",
    )
    p.add_argument(
        "--device",
        choices=("auto", "cuda", "cpu"),
        default="auto",
        help="auto (default) = CUDA when available, else CPU",
    )
    args = p.parse_args(argv)

    try:
        args.seq_list = parse_int_list(args.seq, "--seq") if args.seq is not None else None
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    args.dtype_list = [d.strip() for d in args.dtype.split(",") if d.strip()]
    bad = [d for d in args.dtype_list if d not in DTYPE_NAMES]
    if bad or not args.dtype_list:
        p.error(f"--dtype: unknown {bad or args.dtype!r}; choose from {', '.join(DTYPE_NAMES)}")
    args.variant_list = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in args.variant_list if v not in ALL_VARIANTS]
    if bad or not args.variant_list:
        p.error(f"--variants: unknown {bad}; choose from {', '.join(ALL_VARIANTS)}")
    for name in ("batch", "heads", "head_dim"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if args.warmup_ms is not None and not 0 <= args.warmup_ms <= 600000:
        p.error("--warmup-ms must be between 0 and 600000")
    if args.reps < 1:
        p.error("--reps must be >= 1")
    if args.scale is not None and not math.isfinite(args.scale):
        p.error("--scale must be finite")
    if args.kv_seq is not None and args.kv_seq <= 0:
        p.error("--kv-seq must be positive")
    if args.kv_heads is not None and args.kv_heads <= 0:
        p.error("--kv-heads must be positive")
    if not (math.isfinite(args.dropout) and 0.0 <= args.dropout < 1.0):
        p.error(f"--dropout must be a probability with 0 <= p < 1 (got {args.dropout})")
    args._parser = p
    return args


# ---------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Inputs and reference
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------


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


def cuda_device_type():
    """torch's DeviceType.CUDA enum, wherever this version keeps it."""
    for mod_name in ("torch.autograd", "torch._C._autograd", "torch._C._profiler"):
        try:
            mod = sys.modules.get(mod_name) or __import__(mod_name, fromlist=["DeviceType"])
            return mod.DeviceType.CUDA
        except Exception:  # noqa: BLE001
            continue
    return None


def event_device_us(evt):
    """Device duration of one profiler event in µs, robust to API changes."""
    try:
        return float(evt.time_range.elapsed_us())
    except Exception:  # noqa: BLE001
        pass
    for attr in ("device_time", "cuda_time", "device_time_total", "cuda_time_total"):
        value = getattr(evt, attr, None)
        if value is not None:
            return float(value)
    return 0.0


def is_copy_event(name):
    lower = name.lower()
    return "memcpy" in lower or "memset" in lower


def profile_forward(forward, is_cuda):
    """Profile one forward; return (dispatches, kernels_per_forward, copies, warning)."""
    from torch.profiler import ProfilerActivity, profile

    if not is_cuda:
        return [], None, [], None  # no kernels to count on the CPU

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        # The profiler warns about cycles/acc_events on every use; not ours.
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            out = forward()
            torch.cuda.synchronize()
        del out
        events = list(prof.events())

    kernels, copies = {}, {}  # name -> [calls, total µs]; dicts keep first-seen order
    cuda_type = cuda_device_type()
    launches = 0
    for evt in events:
        if cuda_type is None or getattr(evt, "device_type", None) != cuda_type:
            continue
        bucket = copies if is_copy_event(evt.name) else kernels
        entry = bucket.setdefault(evt.name, [0, 0.0])
        entry[0] += 1
        entry[1] += event_device_us(evt)
        if bucket is kernels:
            launches += 1

    warning = None
    if not kernels:
        # Fallback: aggregated view, entries that have device self time.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            averages = list(prof.key_averages())
        for avg in averages:
            dev_us = None
            for attr in ("self_device_time_total", "self_cuda_time_total"):
                dev_us = getattr(avg, attr, None)
                if dev_us is not None:
                    break
            if not dev_us or dev_us <= 0:
                continue
            if cuda_type is not None and getattr(avg, "device_type", None) != cuda_type:
                continue
            bucket = copies if is_copy_event(avg.key) else kernels
            bucket[avg.key] = [int(avg.count), float(dev_us)]
            if bucket is kernels:
                launches += int(avg.count)
        if kernels:
            warning = "profiler: kernels taken from key_averages() (no CUDA events in events())"

    def as_list(table):
        return [{"name": n, "calls": c, "gpu_us_total": us} for n, (c, us) in table.items()]

    if not kernels:
        return [], None, as_list(copies), "profiler recorded no CUDA kernels"
    return as_list(kernels), launches, as_list(copies), warning



def warm_up(forward, args, is_cuda, sync, out):
    """--warmup untimed calls, then more until --warmup-ms have passed (500 ms on CUDA unless set):
    the same warm-up rule as attn-wgpu's runner. Returns the last output."""
    floor_ms = args.warmup_ms if args.warmup_ms is not None else (500.0 if is_cuda else 0.0)
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        out = forward()
    sync()
    while (time.perf_counter() - t0) * 1e3 < floor_ms:
        out = forward()
        sync()
    return out

def measure(run, forward, is_cuda, args, check, captured):
    """Time, measure memory, validate and profile one variant (fills `run`)."""
    sync = torch.cuda.synchronize if is_cuda else (lambda: None)

    # Cold call: the first ever call of this variant.  Warnings are captured
    # because SDPA explains there why a backend was refused.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sync()
            t0 = time.perf_counter()
            out = forward()
            sync()
            cold_us = (time.perf_counter() - t0) * 1e6
        finally:
            captured.extend(str(w.message) for w in caught)
    run["phase"] = "warmup"

    out = warm_up(forward, args, is_cuda, sync, out)
    run["phase"] = "timing"

    host_us = []
    if is_cuda:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.reps)]
        for rep in range(args.reps):
            starts[rep].record()
            h0 = time.perf_counter()
            out = forward()
            host_us.append((time.perf_counter() - h0) * 1e6)
            ends[rep].record()
        torch.cuda.synchronize()
        dev_us = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    else:
        for _ in range(args.reps):
            h0 = time.perf_counter()
            out = forward()
            host_us.append((time.perf_counter() - h0) * 1e6)
        dev_us = list(host_us)  # on the CPU the call is synchronous
    run["forward"] = {
        "cold_us": cold_us,
        "gpu_us": summarize_us(dev_us),
        "host_us": summarize_us(host_us, with_samples=False),
    }
    run["phase"] = "memory"

    # One forward for the peak-memory delta; its output is also validated.
    out = None
    gc.collect()
    inputs_bytes = run["memory"]["inputs_bytes"]
    if is_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = forward()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        out = forward()
        peak = None
    run["memory"] = {
        "peak_allocated_bytes": peak,
        "inputs_bytes": inputs_bytes,
        "output_bytes": out.numel() * out.element_size(),
    }
    run["phase"] = "validation"
    if args.dropout > 0:
        run["validation"] = {"verdict": "n/a", "reason": DROPOUT_UNCHECKED}
    else:
        run["validation"] = validate(
            out,
            check["rows"],
            check["rows_dev"],
            check["ref"],
            check["full"],
            check["full_dev"],
            FULLY_MASKED[run["variant"]],
            check["tol"],
            check["rows_total"],
        )
    out = None
    run["phase"] = "profile"

    try:
        dispatches, kpf, copies, warning = profile_forward(forward, is_cuda)
        run["dispatches"], run["kernels_per_forward"], run["copies"] = dispatches, kpf, copies
        if warning:
            run["_warnings"].append(warning)
    except Exception as e:  # noqa: BLE001 - profiler problems must not stop the run
        run["_warnings"].append(f"profiler failed: {type(e).__name__}: {truncate(e, 300)}")
        run["dispatches"], run["kernels_per_forward"], run["copies"] = [], None, []


def run_variant(variant, forward, is_cuda, args, check, inputs_bytes, mask_note=None):
    """Run one variant and return its result dict (never raises on torch errors).

    `check` holds what validate needs (rows, reference, tolerances);
    `mask_note` says which mask the run passes, added to a refusal's reason.
    """
    run = {
        "variant": variant,
        "backend": "pytorch",
        "status": "ok",
        "reason": None,
        "dispatches": [],
        "kernels_per_forward": None,
        "copies": [],
        "forward": None,
        "memory": {"peak_allocated_bytes": None, "inputs_bytes": inputs_bytes, "output_bytes": None},
        "validation": None,
        "fully_masked_rows": FULLY_MASKED[variant],
        "phase": "cold",  # internal: where a failure happened
        "_warnings": [],  # internal: moved to the report's warnings list
    }
    reason = unsupported_reason(variant, is_cuda)
    if reason is not None:
        run["status"], run["reason"] = "unsupported", reason
    else:
        captured = []
        failure = None
        try:
            with kernel_context(variant):
                measure(run, forward, is_cuda, args, check, captured)
        except Exception as e:  # noqa: BLE001
            message = f"{type(e).__name__}: {e}" if not isinstance(e, RuntimeError) else str(e)
            if is_oom(e):
                failure = ("error", f"out of memory in {run['phase']}: {message}")
            elif isinstance(e, RuntimeError) and variant in SDPA_BACKENDS and run["phase"] == "cold":
                # PyTorch's message is only "No available kernel. Aborting
                # execution."; the reason is in the warnings SDPA printed.
                why = explanatory_warnings(captured)
                if mask_note:
                    why.append(mask_note)
                failure = ("unsupported", message + (" -- " + " | ".join(why) if why else ""))
            else:
                failure = ("error", f"{run['phase']}: {message}")
        if failure is not None:
            run["status"], run["reason"] = failure[0], truncate(failure[1])
        # Warnings of the cold call (SDPA's "why not this kernel" reasons and
        # anything else), without SDPA's headers, deduplicated and bounded.
        for msg in explanatory_warnings(captured)[:MAX_CAPTURED_WARNINGS]:
            run["_warnings"].append(truncate(msg))
    # `forward` and any exception traceback are gone now; release their memory.
    free_device_memory(is_cuda)
    return run


# ---------------------------------------------------------------------------
# Backward (--backward)
# ---------------------------------------------------------------------------

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


def measure_backward(variant, q, k, v, masks, scale, causal, ref_bias, args, is_cuda, dtype_name):
    """Time the backward of `variant` (autograd), count its kernels, measure the training step's
    peak memory and validate dQ, dK, dV on two heads. Returns a dict (or raises)."""
    sync = torch.cuda.synchronize if is_cuda else (lambda: None)
    B, H, N, D = q.shape
    g = torch.Generator(device="cpu")
    g.manual_seed(args.seed + 1)
    do = torch.empty(q.shape, dtype=torch.float32).uniform_(-1.0, 1.0, generator=g).to(q.dtype)
    do = do.to(q.device)
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    forward = make_forward(variant, qg, kg, vg, masks, scale, args.dropout)
    with kernel_context(variant):
        out = forward()
        out.backward(do, retain_graph=True)  # cold
        floor_ms = args.warmup_ms if args.warmup_ms is not None else (500.0 if is_cuda else 0.0)
        t0 = time.perf_counter()
        done = 0
        # --warmup backward calls, more until --warmup-ms have passed (as warm_up does).
        while done < args.warmup or (time.perf_counter() - t0) * 1e3 < floor_ms:
            for t in (qg, kg, vg):
                t.grad = None
            out.backward(do, retain_graph=True)
            done += 1
            if done >= args.warmup:
                sync()
        sync()
        bwd_us, step_us = [], []

        def timed_us(call):
            # One call's device time: CUDA events around it, or the host clock on the CPU.
            if not is_cuda:
                h0 = time.perf_counter()
                call()
                return (time.perf_counter() - h0) * 1e6
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            call()
            b.record()
            torch.cuda.synchronize()
            return a.elapsed_time(b) * 1e3

        for _ in range(args.reps):
            for t in (qg, kg, vg):
                t.grad = None
            bwd_us.append(timed_us(lambda: out.backward(do, retain_graph=True)))
        if is_cuda:
            for _ in range(args.reps):
                for t in (qg, kg, vg):
                    t.grad = None
                step_us.append(timed_us(lambda: forward().backward(do)))
        # Kernels of one backward.
        kernels, kpb = [], None
        if is_cuda:
            def one_backward():
                for t in (qg, kg, vg):
                    t.grad = None
                out.backward(do, retain_graph=True)
                return out
            try:
                kernels, kpb, _, _ = profile_forward(one_backward, is_cuda)
            except Exception as e:  # noqa: BLE001
                kernels = [{"name": f"profiler failed: {type(e).__name__}", "calls": 0, "gpu_us_total": 0}]
        grads = [t.grad.detach().float().cpu().numpy() for t in (qg, kg, vg)]
        del out
        for t in (qg, kg, vg):
            t.grad = None
        # Peak memory of one training step (forward + backward), inputs and dO excluded.
        peak = None
        if is_cuda:
            gc.collect()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            o3 = forward()
            o3.backward(do)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            del o3
    # Validation on two heads.
    # Grouped-query attention: the groups of K/V heads 0 and Hkv-1 of batch 0, whole (dK and dV
    # of a K/V head sum over its query heads); without it, heads 0 and H-1.
    group = H // k.shape[1]
    kv_heads = sorted({0, k.shape[1] - 1})
    heads = [(0, kh * group + r) for kh in kv_heads for r in range(group)]
    pick = lambda t: np.stack([t[b, h] for b, h in heads])  # noqa: E731
    kv_rep = lambda t: np.stack([t[b, h // group] for b, h in heads])  # noqa: E731
    qc, dc = (pick(t.detach().float().cpu().numpy()) for t in (q, do))
    kc, vc = (kv_rep(t.detach().float().cpu().numpy()) for t in (k, v))
    bias = None
    if ref_bias is not None:
        rb = ref_bias
        bias = np.stack([rb[min(b, rb.shape[0] - 1), min(h, rb.shape[1] - 1)] for b, h in heads])

    def group_sum(gr):
        # dK, dV per query head -> per K/V head (sums of `group` consecutive heads).
        dq, dk, dv = gr
        fold = lambda x: x.reshape(len(kv_heads), group, *x.shape[1:]).sum(axis=1)  # noqa: E731
        return [dq, fold(dk), fold(dv)]

    off = (k.shape[2] - N) if (causal and args.causal_align == "bottom-right") else 0
    ref = group_sum(reference_grads(qc, kc, vc, dc, scale, causal, bias, causal_off=off))
    lp = group_sum(
        reference_grads(qc, kc, vc, dc, scale, causal, bias, lp_dtype=dtype_name, causal_off=off)
    )
    got = [
        pick(grads[0]).astype(np.float64),
        np.stack([grads[1][0, kh] for kh in kv_heads]).astype(np.float64),
        np.stack([grads[2][0, kh] for kh in kv_heads]).astype(np.float64),
    ]
    if args.dropout > 0:
        checks = [{"tensor": t, "verdict": "n/a", "reason": DROPOUT_UNCHECKED} for t in ("dQ", "dK", "dV")]
    else:
        checks = check_grads(got, ref, lp, dtype_name)
    del qg, kg, vg, forward
    free_device_memory(is_cuda)
    return {
        "gpu_us": summarize_us(bwd_us),
        "step_gpu_us": summarize_us(step_us) if step_us else None,
        "kernels_per_backward": kpb,
        "dispatches": kernels,
        "training_peak_allocated_bytes": peak,
        "grads": checks,
        "verdict": (
            "n/a"
            if args.dropout > 0
            else "PASS" if all(c["verdict"] == "PASS" for c in checks) else "FAIL"
        ),
        "d_o": "torch.Generator(cpu).manual_seed(seed + 1); uniform [-1, 1) float32, cast to dtype",
    }


# ---------------------------------------------------------------------------
# One grid point
# ---------------------------------------------------------------------------


def run_point(args, device, is_cuda, shape, dtype_name, host_inputs, precision_cfg, top_warnings):
    """Run all requested variants for one (shape, dtype); return the report dict."""
    B, H, N, D = shape
    dtype = torch_dtype(dtype_name)
    scale = args.scale if args.scale is not None else 1.0 / math.sqrt(D)
    causal = bool(args.causal)
    report_warnings = list(top_warnings)

    # Masks (causal, and mask.npy from --inputs), built once outside any timed
    # region; ref_bias holds the mask values the variants see.
    bias = host_inputs.get("mask") if host_inputs is not None else None
    kv_seq = host_inputs["k"].shape[2] if host_inputs is not None else args.kv_seq
    bottom_right = args.causal_align == "bottom-right"
    causal_off = ((kv_seq or N) - N) if (causal and bottom_right) else 0
    masks, ref_bias = build_masks(bias, causal, N, dtype, device, kv_seq, bottom_right)
    full_rows = fully_masked_rows(ref_bias, causal, B, H, N, causal_off)  # [B, H, N]
    full_flat = np.flatnonzero(full_rows)

    # Inputs: rounded to dtype on the CPU; the reference uses exactly these.
    q_c, k_c, v_c = make_inputs(shape, args.seed, dtype, host_inputs, args.kv_heads, args.kv_seq)
    M = k_c.shape[2]
    if H % k_c.shape[1] != 0:
        raise SystemExit(f"error: --kv-heads {k_c.shape[1]} must divide the {H} query heads")
    group = H // k_c.shape[1]
    rows = select_rows(B, H, N, args.seed, extra=full_flat[:1])
    # The references see K and V expanded to every query head (what GQA means).
    qe, ke, ve = (t.float().numpy() for t in (q_c, k_c, v_c))
    ke, ve = (np.repeat(t, group, axis=1) for t in (ke, ve))
    ref, ref_full = reference_rows(qe, ke, ve, rows, scale, causal, ref_bias, causal_off)
    lp = low_precision_rows(qe, ke, ve, rows, scale, causal, ref_bias, dtype_name, causal_off)
    del qe, ke, ve
    finite = np.isfinite(ref) & np.isfinite(lp)
    lp_err = float(np.abs(ref - lp)[finite].max()) if finite.any() else 0.0
    tol = {
        "mode": args.tolerance,
        "pytorch": pytorch_tolerance(dtype_name, lp_err),
        "strict": STRICT_TOLERANCES[dtype_name],
        "lp_err": lp_err,
    }
    q, k, v = (t.to(device) for t in (q_c, k_c, v_c))
    del q_c, k_c, v_c
    check = {
        "rows": rows,
        "rows_dev": [
            torch.from_numpy(np.ascontiguousarray(rows[:, j])).to(device) for j in range(3)
        ],
        "ref": ref,
        "full": ref_full,
        "full_dev": (
            torch.from_numpy(np.array(full_rows, dtype=bool)).to(device) if full_flat.size else None
        ),
        "tol": tol,
        "rows_total": B * H * N,
    }
    inputs_bytes = sum(t.numel() * t.element_size() for t in (q, k, v))
    mask_info = None
    mask_note = None
    if bias is not None:
        mask_info = dict(host_inputs.get("mask_info") or {})
        mask_info.update(
            {
                "normalized_shape": list(bias.shape),
                "kind": masks["kind"],
                "combined_with_causal": causal,
                "fully_masked_rows": int(full_flat.size),
            }
        )
        mask_note = (
            f"this run passes attn_mask ({masks['kind']} mask from "
            f"{mask_info.get('file', 'mask.npy')}{', intersected with causal' if causal else ''})"
        )
    if is_cuda:
        torch.cuda.synchronize()

    runs = []
    for variant in args.variant_list:
        forward = make_forward(variant, q, k, v, masks, scale, args.dropout)
        run = run_variant(variant, forward, is_cuda, args, check, inputs_bytes, mask_note)
        del forward
        free_device_memory(is_cuda)
        if args.backward and run["status"] == "ok":
            try:
                run["backward"] = measure_backward(
                    variant, q, k, v, masks, scale, causal, ref_bias, args, is_cuda, dtype_name
                )
            except Exception as e:  # noqa: BLE001
                run["backward"] = {"status": "error", "reason": truncate(f"{type(e).__name__}: {e}")}
            free_device_memory(is_cuda)
        for w in run.pop("_warnings"):
            report_warnings.append(f"{variant}: {w}")
        run.pop("phase")
        runs.append(run)

    del q, k, v, masks, check
    free_device_memory(is_cuda)

    config = dict(precision_cfg)
    config.update(
        {
            "device": str(device),
            "dropout_p": args.dropout,
            "cuda_available": bool(torch.cuda.is_available()),
            "timer": "cuda_event" if is_cuda else "perf_counter",
            "cold_timer": "perf_counter around one call, synchronized before and after; "
            "the first call of the variant in this process, CUDA context and cuBLAS already initialised",
            "host_timer": "perf_counter around the launch, no synchronize",
            "inputs": (
                f"npy:{os.path.abspath(args.inputs)}"
                if args.inputs
                else "torch.Generator(cpu).manual_seed(seed); q,k,v uniform [-1,1) float32, cast to dtype"
            ),
            "naive_mask": {
                None: "torch.triu(ones(N,N,bool), diagonal=1), True = blocked" if causal else None,
                "blocking": "masked_fill with (mask.npy == -inf)"
                + (" | triu(ones(N,N,bool), diagonal=1)" if causal else "")
                + ", True = blocked",
                "additive": "scores + mask.npy (cast to dtype)"
                + (", then masked_fill with triu(ones(N,N,bool), diagonal=1)" if causal else ""),
            }[mask_info["kind"] if mask_info else None],
            "sdpa_mask": (
                ("is_causal=True" if causal else None)
                if mask_info is None
                else (
                    "attn_mask = ~(mask.npy == -inf"
                    + (" | causal" if causal else "")
                    + ") (bool, True = takes part), is_causal=False"
                    if mask_info["kind"] == "blocking"
                    else "attn_mask = mask.npy cast to dtype"
                    + (", -inf above the diagonal" if causal else "")
                    + ", is_causal=False"
                )
            ),
            "sdpa_api": "torch.nn.attention.sdpa_kernel",
            "tolerances": {
                "rule": args.tolerance,
                "fudge": FUDGE,
                "pytorch_defaults": PYTORCH_DEFAULTS,
                "strict": STRICT_TOLERANCES,
            },
            "validation_rows": (
                f"seeded (numpy default_rng(seed)) random subset of at most {MAX_RANDOM_ROWS} "
                "(b,h,i) rows plus rows 0 and N-1 of (b,h)=(0,0); float64 CPU reference"
            ),
            "nan_inf_scope": "whole output tensor",
        }
    )

    return {
        "schema_version": SCHEMA_VERSION,
        "tool": TOOL_NAME,
        "command": shlex.join(["python3"] + sys.argv),
        "seed": args.seed,
        "versions": versions_info(),
        "adapter": adapter_info(device, is_cuda),
        "problem": {
            "batch": B,
            "heads": H,
            "kv_heads": H // group,
            "seq": N,
            "kv_seq": M,
            "causal_align": args.causal_align,
            "head_dim": D,
            "causal": causal,
            "scale": float(scale),
            "dtype": dtype_name,
            "mask": mask_info,
            "dropout": args.dropout,
        },
        "timing": {"warmup": args.warmup, "warmup_ms": args.warmup_ms if args.warmup_ms is not None else (500.0 if torch.cuda.is_available() else 0.0), "reps": args.reps},
        "config": config,
        "runs": runs,
        "warnings": report_warnings,
    }


def point_file_name(B, H, N, D, dtype_name, causal):
    return f"torch_B{B}_H{H}_N{N}_D{D}_{dtype_name}_{'causal' if causal else 'noncausal'}.json"


def fmt_us(value):
    return "-" if value is None else f"{value:.1f}"


def print_table(report):
    """Print a short per-variant summary of one grid point."""
    p = report["problem"]
    print(
        f"\n== B={p['batch']} H={p['heads']} N={p['seq']} D={p['head_dim']} "
        f"{p['dtype']} {'causal' if p['causal'] else 'non-causal'} on "
        f"{report['adapter']['name']} ({report['config']['timer']})"
    )
    header = f"{'variant':<14} {'status':<11} {'median_us':>10} {'p10':>10} {'p90':>10} " \
             f"{'kern/fwd':>8} {'verdict':<7} reason"
    print(header)
    print("-" * len(header))
    for run in report["runs"]:
        gpu = (run.get("forward") or {}).get("gpu_us") or {}
        verdict = (run.get("validation") or {}).get("verdict") or "-"
        kpf = run.get("kernels_per_forward")
        reason = (run.get("reason") or "").replace("\n", " ")
        print(
            f"{run['variant']:<14} {run['status']:<11} {fmt_us(gpu.get('median')):>10} "
            f"{fmt_us(gpu.get('p10')):>10} {fmt_us(gpu.get('p90')):>10} "
            f"{('-' if kpf is None else str(kpf)):>8} {verdict:<7} {truncate(reason, 60)}"
        )
    if any("backward" in r for r in report["runs"]):
        print("backward (autograd; grads checked on %s):" % GRAD_HEADS)
        for run in report["runs"]:
            b = run.get("backward")
            if not b:
                continue
            if "gpu_us" not in b:
                print(f"  {run['variant']:<14} error: {b.get('reason')}")
                continue
            peak = b.get("training_peak_allocated_bytes")
            print(
                f"  {run['variant']:<14} bwd {fmt_us(b['gpu_us']['median']):>9} µs  step "
                f"{fmt_us((b.get('step_gpu_us') or {}).get('median')):>9} µs  kernels "
                f"{b.get('kernels_per_backward')}  peak {'-' if peak is None else f'{peak / 2**20:.0f} MiB'}  "
                f"{b['verdict']} "
                + " ".join(
                    f"{c['tensor']} x{(c.get('err_ratio_to_lp_ref') or 0):.2f}"
                    if c["verdict"] != "n/a"
                    else f"{c['tensor']} n/a"
                    for c in b["grads"]
                )
            )
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    parser = args._parser

    if torch is None:
        print(
            "error: PyTorch is not installed (import torch failed); "
            "torch_sdpa.py needs torch and numpy",
            file=sys.stderr,
        )
        return 1
    if np is None:
        print("error: numpy is not installed; torch_sdpa.py needs torch and numpy", file=sys.stderr)
        return 1

    device, is_cuda, note = pick_device(args.device)
    if device is None:
        print(f"error: {note}", file=sys.stderr)
        return 1
    top_warnings = [note] if note else []
    if note:
        print(f"warning: {note}", file=sys.stderr)

    # Problem shape: from --inputs when given, else from the flags / defaults.
    host_inputs = None
    if args.inputs:
        try:
            host_inputs = load_npy_inputs(args.inputs)
            mask_path = os.path.join(args.inputs, "mask.npy")
            if os.path.exists(mask_path):
                host_inputs["mask"] = load_npy_mask(
                    mask_path, host_inputs["q"].shape, args.mask_convention
                )
                file_dtype = np.load(mask_path, mmap_mode="r", allow_pickle=False).dtype
                host_inputs["mask_info"] = {
                    "file": os.path.abspath(mask_path),
                    "file_dtype": str(file_dtype),
                    "convention": args.mask_convention if file_dtype == np.bool_ else None,
                }
        except (OSError, ValueError) as e:
            print(f"error: --inputs {args.inputs}: {e}", file=sys.stderr)
            return 1
        B, H, N, D = host_inputs["q"].shape
        given = {"batch": args.batch, "heads": args.heads, "head_dim": args.head_dim}
        actual = {"batch": B, "heads": H, "head_dim": D}
        for key, value in given.items():
            if value is not None and value != actual[key]:
                parser.error(f"--{key.replace('_', '-')} {value} does not match --inputs shape {actual[key]}")
        if args.seq_list is not None and args.seq_list != [N]:
            parser.error(f"--seq {args.seq} does not match --inputs shape N={N}")
        seqs = [N]
    else:
        B = args.batch or DEFAULTS["batch"]
        H = args.heads or DEFAULTS["heads"]
        D = args.head_dim or DEFAULTS["head_dim"]
        seqs = args.seq_list or [DEFAULTS["seq"]]

    grid = [(n, dt) for n in seqs for dt in args.dtype_list]
    if args.json and len(grid) > 1:
        parser.error("--json takes one grid point; use --json-dir for several --seq/--dtype values")

    precision_cfg = configure_precision()
    if is_cuda:
        # Create the CUDA context and the cuBLAS handles outside any timing, so
        # that every variant's cold call means the same thing: its first call
        # in a process whose CUDA context and BLAS library are already up.
        torch.cuda.init()
        for dtype_name in args.dtype_list:
            a = torch.ones(64, 64, device=device, dtype=torch_dtype(dtype_name))
            (a @ a).sum().item()
        del a
        torch.cuda.synchronize()

    for n, dtype_name in grid:
        report = run_point(
            args, device, is_cuda, (B, H, n, D), dtype_name, host_inputs, precision_cfg, top_warnings
        )
        print_table(report)
        if args.json:
            write_json_atomic(args.json, report)
            print(f"wrote {args.json}")
        if args.json_dir:
            path = os.path.join(args.json_dir, point_file_name(B, H, n, D, dtype_name, args.causal))
            write_json_atomic(path, report)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
