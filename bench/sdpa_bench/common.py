"""Constants and helpers every part shares: the schema, JSON writing, warning text."""

from __future__ import annotations

import argparse
import json
import math
import os
import re

# The optional dependencies, imported once: every other module takes np, torch and F from here.
try:
    import numpy as np
except ImportError:  # cli.main() says so; --help and the numpy-free parts still work
    np = None

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # cli.main() says so
    torch = None
    F = None


SCHEMA_VERSION = 1


TOOL_NAME = "torch_sdpa.py"


ALL_VARIANTS = ("naive", "naive-inplace", "math", "flash", "efficient", "cudnn")


DTYPE_NAMES = ("f32", "f16", "bf16")


REASON_CHARS = 500  # exception messages are cut to this many characters


MAX_CAPTURED_WARNINGS = 20  # per variant, warnings copied into the report


DEFAULTS = {"batch": 8, "heads": 16, "seq": 1024, "head_dim": 64}


def torch_dtype(name):
    """Map our dtype name to the torch dtype."""
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


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


def parse_int_list(text, what):
    try:
        values = [int(x) for x in str(text).split(",") if x.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: expected integers, got {text!r}")
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{what}: expected positive integers, got {text!r}")
    return values
