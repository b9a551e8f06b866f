"""The command line: arguments, the printed table, main()."""

from __future__ import annotations

import argparse
import math
import os
import sys

from .common import ALL_VARIANTS, DEFAULTS, DTYPE_NAMES, np, parse_int_list, torch, torch_dtype, truncate, write_json_atomic
from .backends import configure_precision, load_npy_inputs, pick_device
from .runner import run_point
from .validation import GRAD_HEADS, MASK_CONVENTIONS, TOLERANCE_MODES, load_npy_mask


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
