//! `split` and `combine` (shaders/split_kv.wgsl, shaders/split_kv_combine.wgsl): flash-decoding
//! for the `split-kv` variant. With few query rows (decode: N = 1..16) a fused kernel that gives
//! each workgroup a block of query rows launches B·H·⌈N/BR⌉ workgroups: at B = 1, H = 32 that is
//! 32, against the H200's 132 SMs. Splitting the keys into slices gives B·H·N·S workgroups, each
//! reading 1/S of K and V; a second, small dispatch merges the slices' (max, sum, output).

use super::{bind, check_grid, check_mask, kernel, mask_slot, with_mask, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};
use crate::problem::Problem;

/// Keys per tile of the split kernel (`BK` of shaders/split_kv_d128.wgsl / split_kv_d256.wgsl).
pub fn bk(p: &Problem) -> u64 {
    if p.head_dim <= 128 {
        32
    } else {
        16
    }
}
/// Query heads one workgroup serves at most (split_kv.wgsl `GMAX`): H / Hkv <= 8.
pub const GMAX: u32 = 8;
/// Workgroup storage of the split kernel: qsh 8 KiB, the K tile, scores, factors, rescales.
pub const STORAGE: u64 = (2048 + 4128 + 256 + 256 + 8) * 4;
/// Workgroups the split pass aims at: a few per SM of a large GPU (132 on the H200), so that
/// every SM has several to hide its memory latency.
pub const TARGET_WORKGROUPS: u64 = 1024;
/// The decode regime: at most this many query rows.
pub const MAX_ROWS: u32 = 16;

/// (slices per query row S, keys per slice): S = ⌈TARGET / (B·Hkv·N)⌉ (a workgroup serves a K/V
/// head's group of query heads), at most one slice per tile.
pub fn splits(p: &Problem) -> (u64, u64) {
    let bk = bk(p);
    let tiles = (p.kv_seq as u64).div_ceil(bk);
    let rows = p.batch as u64 * p.kv_heads as u64 * p.seq as u64;
    let want = TARGET_WORKGROUPS.div_ceil(rows).clamp(1, tiles);
    let chunk = tiles.div_ceil(want) * bk;
    ((p.kv_seq as u64).div_ceil(chunk), chunk)
}

/// Why the split kernel cannot run `p` (beyond the decode regime, which the variant checks).
pub fn check(p: &Problem) -> Result<(), String> {
    let epw = if p.dtype.bytes() == 2 { 8 } else { 4 };
    if !p.head_dim.is_multiple_of(epw) {
        return Err(format!(
            "split-KV reads K as 16-byte words ({epw} {} elements): D must be a multiple of \
             {epw} (got D={})",
            p.dtype.name(),
            p.head_dim
        ));
    }
    if p.group() > GMAX {
        return Err(format!(
            "split-KV serves the query heads of a K/V head in one workgroup, at most {GMAX} \
             (got H / Hkv = {})",
            p.group()
        ));
    }
    Ok(())
}

/// The split pass: `PO` (partial outputs) and `PML` (partial max and sum) of every slice.
pub fn split(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    let (s, chunk) = splits(p);
    let st = Storage::of(p.dtype);
    check_mask(p, caps)?;
    let bindings = with_mask(
        p,
        vec![
            bind("Q", Access::Read),
            bind("K", Access::Read),
            bind("V", Access::Read),
            bind("PO", Access::ReadWrite),
            bind("PML", Access::ReadWrite),
        ],
    );
    let e = p.dtype.bytes();
    let d = p.head_dim as u64;
    let pairs = p.bh() * p.allowed_pairs_per_head();
    let kv_groups = p.batch as u64 * p.kv_heads as u64;
    Ok(Dispatch {
        name: "split".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: if p.head_dim <= 128 {
            kernel!(
                "split_kv.wgsl" + "split_kv_d128.wgsl",
                st,
                mask_slot(&bindings),
                dropout = p.dropout().is_some()
            )
        } else {
            kernel!(
                "split_kv.wgsl" + "split_kv_d256.wgsl",
                st,
                mask_slot(&bindings),
                dropout = p.dropout().is_some()
            )
        },
        entry: "main",
        overrides: vec![
            ("CHUNK".to_string(), chunk as f64),
            ("DC".to_string(), d.div_ceil(128) as f64),
            ("GROUP".to_string(), p.group() as f64),
            ("SPLITS".to_string(), s as f64),
        ],
        params: Params::of(p),
        bindings,
        workgroups: [
            check_grid("key slices", s, caps)?,
            check_grid("N query rows", p.seq as u64, caps)?,
            check_grid("B*Hkv", kv_groups, caps)?,
        ],
        // Q once, each query row's keys of K and V once per K/V head (shared by its group), the
        // mask bias per pair; the partials.
        reads_bytes: p.qkv_bytes()
            + pairs / p.group() as u64 * 2 * d * e
            + if p.mask.bias.is_some() { pairs * 4 } else { 0 },
        writes_bytes: p.bh() * p.seq as u64 * s * (d + 2) * 4,
        flops: 4 * pairs * d,
        note: format!(
            "split-KV (flash-decoding): {s} slices of {chunk} keys per query row and K/V head, a \
             workgroup each serving the {} query heads of the group ({} in all), online softmax \
             per slice",
            p.group(),
            s * kv_groups * p.seq as u64
        ),
    })
}

/// The combine pass: O and the row logsumexp L from the slices' partials.
pub fn combine(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    let (s, _) = splits(p);
    let st = Storage::of(p.dtype);
    let d = p.head_dim as u64;
    let rows = p.bh() * p.seq as u64;
    Ok(Dispatch {
        name: "combine".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader: kernel!("split_kv_combine.wgsl", st, None),
        entry: "main",
        overrides: vec![("SPLITS".to_string(), s as f64)],
        params: Params::of(p),
        bindings: vec![
            bind("PO", Access::Read),
            bind("PML", Access::Read),
            bind("O", Access::ReadWrite),
            bind("L", Access::ReadWrite),
        ],
        workgroups: [
            check_grid("N query rows", p.seq as u64, caps)?,
            check_grid("B*H", p.bh(), caps)?,
            1,
        ],
        reads_bytes: rows * s * (d + 2) * 4,
        writes_bytes: p.qkv_bytes() + rows * 4,
        flops: 2 * rows * s * d,
        note: format!("merges the {s} slices of each row: O, and L for the backward"),
    })
}
