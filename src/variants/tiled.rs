//! `tiled`: one fused dispatch, FlashAttention-2 style (kernel: shaders/tiled.wgsl).
//!
//! The host picks the `override` constants: BR query rows per workgroup (one thread each), the
//! largest whose workgroup storage fits the adapter's `max_compute_workgroup_storage_size`;
//! D4 = ceil(D/4) and the odd row pitch DP. BC = 16 keys per block is fixed by the kernel.

use super::unfused::{bind, buf};
use super::{check_binding, check_grid, check_mask, kernel, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params, Plan, Role};
use crate::problem::Problem;

/// BR candidates, preferred first: BR = 64 halves the K/V re-reads of BR = 32.
const BR_CANDIDATES: &[u32] = &[64, 32, 16, 8, 4];
/// Keys per staged block: fixed in tiled.wgsl (four named vec4 score registers).
pub const BC: u32 = 16;

/// Tile configuration of the fused kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileConfig {
    pub br: u32,
    pub bc: u32,
    pub d4: u32,
    pub dp: u32,
}

impl TileConfig {
    /// Workgroup storage in bytes: qs + os (BR rows) + ks + vs (BC rows), DP vec4 each, + inv_l.
    pub fn storage_bytes(&self) -> u64 {
        (2 * self.br as u64 + 2 * self.bc as u64) * self.dp as u64 * 16 + 4 * self.br as u64
    }
}

/// The largest configuration that fits this adapter, or why none does.
pub fn choose(head_dim: u32, caps: &AdapterCaps) -> Result<TileConfig, String> {
    let d4 = head_dim.div_ceil(4);
    let dp = d4 | 1;
    for &br in BR_CANDIDATES {
        let cfg = TileConfig { br, bc: BC, d4, dp };
        if cfg.storage_bytes() <= caps.max_workgroup_storage as u64
            && br <= caps.max_invocations_per_workgroup
            && br <= caps.max_workgroup_size_x
        {
            return Ok(cfg);
        }
    }
    let smallest = TileConfig {
        br: 4,
        bc: BC,
        d4,
        dp,
    };
    Err(format!(
        "workgroup storage too small for D={head_dim}: the smallest tile (BR=4, BC=16) needs {} bytes, \
         this adapter allows {}",
        smallest.storage_bytes(),
        caps.max_workgroup_storage
    ))
}

/// Keys each query block reads: all N, or up to the end of the block when causal.
fn keys_for_block(p: &Problem, br: u64, qb: u64) -> u64 {
    let n = p.seq as u64;
    if p.causal {
        n.min((qb + 1) * br)
    } else {
        n
    }
}

pub fn build(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    let cfg = choose(p.head_dim, caps)?;
    let e = p.dtype.bytes();
    let n = p.seq as u64;
    let d = p.head_dim as u64;
    let bh = p.bh();
    let qkv = p.qkv_bytes();
    check_binding("Q/K/V", qkv, caps)?;
    let br = cfg.br as u64;
    let blocks = n.div_ceil(br);
    let x = check_grid("N / BR query blocks", blocks, caps)?;
    let heads = check_grid("B*H", bh, caps)?;

    // Traffic: Q once, K and V once per query block (only the blocks up to the diagonal when
    // causal), O once. Work: every (row, key) pair of the visited blocks, masked or not.
    let mut kv_rows = 0u64;
    let mut pairs = 0u64;
    for qb in 0..blocks {
        let keys = keys_for_block(p, br, qb);
        let rows = br.min(n - qb * br);
        kv_rows += keys;
        pairs += rows * keys;
    }
    let mask_bytes = check_mask(p, caps)?;
    // The mask bias is read for every visited (row, key) pair, per head.
    let mask_reads = if mask_bytes > 0 { bh * pairs * 4 } else { 0 };
    let reads = qkv + bh * kv_rows * d * e * 2 + mask_reads;
    let flops = bh * pairs * d * 4;
    let params = Params::of(p);
    let overrides = vec![
        ("BR".to_string(), cfg.br as f64),
        ("D4".to_string(), cfg.d4 as f64),
        ("DP".to_string(), cfg.dp as f64),
    ];
    let mut buffers = vec![
        buf("Q", qkv, Role::Input, false),
        buf("K", qkv, Role::Input, false),
        buf("V", qkv, Role::Input, false),
    ];
    let mut bindings = vec![
        bind("Q", Access::Read),
        bind("K", Access::Read),
        bind("V", Access::Read),
        bind("O", Access::ReadWrite),
    ];
    if mask_bytes > 0 {
        buffers.push(buf("MASK", mask_bytes, Role::Input, false));
        bindings.push(bind("MASK", Access::Read));
    }
    buffers.push(buf("O", qkv, Role::Output, false));
    let mut notes = vec![
        "the N x N score matrix never reaches device memory".to_string(),
        "a row with no allowed key returns 0 (SDPA's convention)".to_string(),
    ];
    if p.causal && mask_bytes > 0 {
        notes.push("causal AND explicit mask / key padding: their intersection".into());
    }
    Ok(Plan {
        variant: "tiled".into(),
        buffers,
        dispatches: vec![Dispatch {
            name: "attention".into(),
            shader: kernel!(
                "tiled.wgsl",
                Storage::of(p.dtype),
                (mask_bytes > 0).then_some(5)
            ),
            entry: "main",
            overrides: overrides.clone(),
            params,
            bindings,
            workgroups: [x, heads, 1],
            reads_bytes: reads,
            writes_bytes: qkv,
            flops,
            note: format!(
                "fused: {} query blocks of {} rows x key blocks of {}; online softmax; {}",
                blocks,
                cfg.br,
                cfg.bc,
                if p.causal {
                    "key blocks above the diagonal skipped"
                } else {
                    "all key blocks"
                }
            ),
        }],
        output: "O".into(),
        config: {
            let mut c = overrides;
            c.push(("BC".into(), cfg.bc as f64));
            c.push(("workgroup_storage_bytes".into(), cfg.storage_bytes() as f64));
            c
        },
        notes,
    })
}
