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
    python3 bench/torch_sdpa.py --dtype f16 --json /tmp/torch_f16.json
    python3 bench/torch_sdpa.py --seq 1024,4096 --dtype f16,bf16,f32 \
        --json-dir /tmp/torch
    # tiny smoke test (also works without a GPU):
    python3 bench/torch_sdpa.py --batch 1 --heads 2 --seq 64 --head-dim 16 \
        --reps 2 --json /tmp/smoke.json

Needs PyTorch and numpy only (plus the standard library).  Without CUDA it runs
on the CPU (flash / efficient / cudnn are then reported as unsupported) and the
JSON says so (adapter.backend == "cpu", config.device == "cpu").
"""
