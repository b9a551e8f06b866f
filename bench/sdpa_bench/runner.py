"""One grid point: every variant timed and validated, forward or training step, into one report."""

from __future__ import annotations

import gc
import math
import os
import shlex
import sys
import time

from .common import explanatory_warnings, MAX_CAPTURED_WARNINGS, np, SCHEMA_VERSION, TOOL_NAME, torch, torch_dtype, truncate
from .backends import SDPA_BACKENDS, adapter_info, build_masks, kernel_context, make_forward, make_inputs, unsupported_reason, versions_info
from .timing import free_device_memory, is_oom, measure, profile_forward, summarize_us
from .validation import DROPOUT_UNCHECKED, FUDGE, FULLY_MASKED, MAX_RANDOM_ROWS, PYTORCH_DEFAULTS, STRICT_TOLERANCES, check_grads, fully_masked_rows, low_precision_rows, pytorch_tolerance, reference_grads, reference_rows, select_rows


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
