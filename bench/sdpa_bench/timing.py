"""Timing: cold call, warm-up, CUDA events per call, the profiler's kernel list, statistics."""

from __future__ import annotations

import gc
import sys
import time
import warnings

from .common import np, torch, truncate
from .validation import DROPOUT_UNCHECKED, FULLY_MASKED, validate


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
