//! `attention` on cooperative matrices (the `tiled-coop` variant): f16 Q·Kᵀ and P·V as 16 x 16 x
//! 16 products with f32 accumulators, four independent 32-wide subgroups per workgroup, key
//! blocks of 16 keys, any D that is a multiple of 16 up to 256. Two kernels, sharing
//! tiled_coop_lib.wgsl + tiled_coop_kv.wgsl + tiled_coop_lo.wgsl + tiled_mask.wgsl: for D <=
//! [`RT2_MAX_HEAD_DIM`], shaders/tiled_coop_rt2.wgsl (two row tiles of 16 a subgroup: 128 query rows a workgroup);
//! above, shaders/tiled_coop.wgsl (one: 64 rows).

use super::{check_binding, kernel, mask_slot, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::Dispatch;
use crate::problem::Problem;
use crate::tile::TileConfig;

/// Workgroup storage of the kernel at D = 64 (tiled_coop_rt2.wgsl; its header comment derives
/// it, `TileConfig::storage_bytes` for any D).
pub const STORAGE: u64 = crate::tile::COOP_STORAGE;
/// The widest head tiled_coop_rt2.wgsl takes. Two row tiles a subgroup (each K and V matrix
/// feeding two products, staging and barriers paid once per 32 rows) measured on the H200 (B8 H16
/// causal f16, one lease, results/EXPERIMENTS.md, v29-coop-rt2): D = 64 N = 1024 323.8 -> 269.3
/// µs, N = 4096 3667.5 -> 2789.7; at D = 128 the two-tile code was slower than one tile (635.4
/// against 442.4: twice the registers for Q and the accumulators), so wider heads keep
/// tiled_coop.wgsl.
pub const RT2_MAX_HEAD_DIM: u32 = 64;
/// The largest head dimension the kernel takes (16 tiles of 16 columns a row).
pub const MAX_HEAD_DIM: u32 = 256;

/// Keys per block (fixed in the kernel): one 16 x 16 score tile per subgroup and block. Measured
/// on the H200 in one lease with the kernel's block size as a pipeline constant
/// (results/EXPERIMENTS.md, v26-coop-wide, B8 H16 N1024 causal f16): at D = 64, 16 keys 331.4 µs,
/// 32 keys 419.3, 64 keys 344.9 (N = 4096: 3794.8 / 4675.0 / 3837.1); at D = 128, 16 keys 450.8
/// against 32 keys 503.5. Smaller blocks leave more workgroups resident (16896 bytes of
/// workgroup storage at D = 64 against 43008 with 64 keys). Two K/V stages with one workgroup
/// barrier a block instead of two were slower (352.9 against 332.2 µs at D = 64, 747.1 against
/// 450.5 at D = 128).
pub const BLOCK_KEYS: u32 = 16;

/// Rows (of Q) and keys (of K and V) past N that tiled_coop.wgsl's cooperative loads may read: the
/// last query block (BR rows: 128 at most) and key block of a head are read whole.
pub const PAD_ROWS: u64 = 128;

/// Whether `p` takes the two-row-tile kernel (tiled_coop_rt2.wgsl).
pub fn two_tiles(p: &Problem) -> bool {
    p.head_dim <= RT2_MAX_HEAD_DIM
}

/// The kernel's tile: BR = 128 query rows (two tiles a subgroup, D <= 64) or 64, BC =
/// [`BLOCK_KEYS`].
pub fn tile(p: &Problem) -> TileConfig {
    TileConfig {
        kernel: crate::tile::TileKernel::Coop,
        br: if two_tiles(p) { 128 } else { 64 },
        bc: BLOCK_KEYS,
        d4: p.head_dim.div_ceil(4),
        dp: 0,
    }
}

/// Bytes of each of the Q, K and V buffers: the tensor plus [`PAD_ROWS`] rows past the last head.
pub fn input_bytes(p: &Problem) -> u64 {
    p.qkv_bytes() + PAD_ROWS * p.head_dim as u64 * p.dtype.bytes()
}

/// tiled_coop.wgsl's choices (see the kernel), as measured on the H200 at B8 H16 N1024 D64 causal
/// f16: how P enters P V (`LO` = 0, P in one f16 as FlashAttention does: 450.7 µs against 474.5
/// for 2, hi + unscaled lo, in one lease, results/EXPERIMENTS.md, v15-rt2-ab; it passes PyTorch's
/// rule (error 1.0-1.7x the low-precision twin's) and fails `--tolerance strict`, which
/// `--override LO=2` passes), the lazy-rescale threshold (`TAU` = 8; 0,
/// FlashAttention-2's rescale on every new maximum, was 14 % slower in v5) and the register
/// prefetch of the next K/V block (`PREFETCH` = 1; 0 was 8 % slower in v5); and the shape the
/// kernel is specialized for, `D16` = D / 16 tiles a row.
pub fn overrides(p: &Problem) -> Vec<(String, f64)> {
    vec![
        ("D16".to_string(), (p.head_dim / 16) as f64),
        ("LO".to_string(), 0.0),
        ("TAU".to_string(), 8.0),
        ("PREFETCH".to_string(), 1.0),
    ]
}

/// The fused dispatch. The caller has checked the adapter (cooperative matrices, 32-wide
/// subgroups, [`STORAGE`]) and D.
pub fn attention(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    check_binding("Q ([B, H, N, D])", input_bytes(p), caps)?;
    let mask = mask_slot(&super::tiled::fused_bindings(p));
    let (st, dropout) = (Storage::of(p.dtype), p.dropout().is_some());
    // Training (`--backward`) appends tiled_lse.wgsl: the kernel also writes the row logsumexp L
    // for tiled_coop_bwd.rs (binding 5, after O).
    // One of the two kernels with the parts both take, then the L writer (or its no-op).
    macro_rules! coop {
        ($main:literal, $lse:literal) => {
            kernel!(
                $main
                    + "tiled_coop_lib.wgsl"
                    + "tiled_coop_kv.wgsl"
                    + "tiled_coop_lo.wgsl"
                    + "tiled_mask.wgsl"
                    + $lse,
                st,
                mask,
                dropout = dropout
            )
        };
    }
    let shader = match (two_tiles(p), p.backward) {
        (true, false) => coop!("tiled_coop_rt2.wgsl", "tiled_nolse.wgsl"),
        (true, true) => coop!("tiled_coop_rt2.wgsl", "tiled_lse.wgsl"),
        (false, false) => coop!("tiled_coop.wgsl", "tiled_nolse.wgsl"),
        (false, true) => coop!("tiled_coop.wgsl", "tiled_lse.wgsl"),
    };
    super::tiled::fused_dispatch(p, caps, shader, overrides(p), &tile(p))
}
