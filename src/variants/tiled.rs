//! `tiled`: one fused dispatch, FlashAttention-2 style. Two kernels:
//! - shaders/tiled_rt.wgsl, register-tiled (a 4 x 4 score tile and a 4 x 16 output tile per thread),
//!   for D <= 64 on adapters with >= 31232 bytes of workgroup storage: the fast one;
//! - shaders/tiled.wgsl, one query row per thread, for any D up to 256 and small workgroup storage.
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

/// Workgroup storage of tiled_rt.wgsl + tiled_rt_wg.wgsl (their header comments derive it).
pub const RT_STORAGE: u64 = 31232;
/// The part of it that tiled_rt_wg.wgsl adds (absent with subgroup reductions).
pub const RT_PART_STORAGE: u64 = 1024;

/// Tile configuration of the fused kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileConfig {
    /// True for the register-tiled kernel (tiled_rt.wgsl), false for one row per thread.
    pub register_tiled: bool,
    pub br: u32,
    pub bc: u32,
    pub d4: u32,
    pub dp: u32,
}

impl TileConfig {
    /// Workgroup storage in bytes: qs + os (BR rows) + ks + vs (BC rows), DP vec4 each, + inv_l.
    pub fn storage_bytes(&self) -> u64 {
        if self.register_tiled {
            return RT_STORAGE;
        }
        (2 * self.br as u64 + 2 * self.bc as u64) * self.dp as u64 * 16 + 4 * self.br as u64
    }
}

/// The largest configuration that fits this adapter, or why none does.
pub fn choose(head_dim: u32, caps: &AdapterCaps) -> Result<TileConfig, String> {
    let d4 = head_dim.div_ceil(4);
    let dp = d4 | 1;
    if head_dim <= 64
        && RT_STORAGE <= caps.max_workgroup_storage as u64
        && caps.max_invocations_per_workgroup >= 64
        && caps.max_workgroup_size_x >= 64
    {
        return Ok(TileConfig {
            register_tiled: true,
            br: 64,
            bc: BC,
            d4,
            dp: 17,
        });
    }
    for &br in BR_CANDIDATES {
        let cfg = TileConfig {
            register_tiled: false,
            br,
            bc: BC,
            d4,
            dp,
        };
        if cfg.storage_bytes() <= caps.max_workgroup_storage as u64
            && br <= caps.max_invocations_per_workgroup
            && br <= caps.max_workgroup_size_x
        {
            return Ok(cfg);
        }
    }
    let smallest = TileConfig {
        register_tiled: false,
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
    build_with(p, caps, cfg, "tiled")
}

/// `tiled-subgroup`: the register-tiled kernel with its row reductions done by subgroup shuffles
/// (shaders/tiled_rt_sg.wgsl) instead of workgroup memory and a barrier.
pub fn build_subgroup(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    if !caps.subgroups {
        return Err("the adapter (or device) lacks Features::SUBGROUP".into());
    }
    if caps.subgroup_min_size < 4 {
        return Err(format!(
            "subgroups of at least 4 invocations are needed (row groups of 4 threads); this adapter's \
             minimum subgroup size is {}",
            caps.subgroup_min_size
        ));
    }
    if p.head_dim > 64 {
        return Err(format!(
            "the register-tiled kernel holds at most D = 64 columns per row (got --head-dim {})",
            p.head_dim
        ));
    }
    if RT_STORAGE - RT_PART_STORAGE > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "needs {} bytes of workgroup storage, this adapter allows {}",
            RT_STORAGE - RT_PART_STORAGE,
            caps.max_workgroup_storage
        ));
    }
    let cfg = TileConfig {
        register_tiled: true,
        br: 64,
        bc: BC,
        d4: p.head_dim.div_ceil(4),
        dp: 17,
    };
    build_with(p, caps, cfg, "tiled-subgroup")
}

/// Workgroup storage of tiled_coop.wgsl (its header comment derives it).
pub const COOP_STORAGE: u64 = 38400;

/// `tiled-coop`: f16 attention on cooperative matrices (shaders/tiled_coop.wgsl): Q Kᵀ and P V as
/// 16 x 16 x 16 f16 products with f32 accumulators, four 32-wide subgroups per workgroup.
pub fn build_coop(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    if !caps.cooperative_matrix {
        return Err(
            "the adapter (or device) lacks Features::EXPERIMENTAL_COOPERATIVE_MATRIX".into(),
        );
    }
    if caps.subgroup_min_size != 32 || caps.subgroup_max_size != 32 {
        return Err(format!(
            "the kernel splits its 128 threads into four 32-wide subgroups; this adapter's subgroups \
             are {}..{} wide",
            caps.subgroup_min_size, caps.subgroup_max_size
        ));
    }
    if p.head_dim > 64 {
        return Err(format!(
            "the cooperative-matrix kernel stages at most D = 64 columns (got --head-dim {})",
            p.head_dim
        ));
    }
    if COOP_STORAGE > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "needs {COOP_STORAGE} bytes of workgroup storage, this adapter allows {}",
            caps.max_workgroup_storage
        ));
    }
    let cfg = TileConfig {
        register_tiled: false,
        br: 64,
        bc: 32,
        d4: p.head_dim.div_ceil(4),
        dp: 0,
    };
    build_with(p, caps, cfg, "tiled-coop")
}

fn build_with(
    p: &Problem,
    caps: &AdapterCaps,
    cfg: TileConfig,
    variant: &str,
) -> Result<Plan, String> {
    let subgroup = variant == "tiled-subgroup";
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
    let storage = Storage::of(p.dtype);
    let mask_binding = (mask_bytes > 0).then_some(5);
    let (shader, overrides) = if variant == "tiled-coop" {
        (kernel!("tiled_coop.wgsl", storage, mask_binding), vec![])
    } else if subgroup {
        (
            kernel!("tiled_rt.wgsl" + "tiled_rt_sg.wgsl", storage, mask_binding),
            vec![],
        )
    } else if cfg.register_tiled {
        (
            kernel!("tiled_rt.wgsl" + "tiled_rt_wg.wgsl", storage, mask_binding),
            vec![],
        )
    } else {
        (
            kernel!("tiled.wgsl", storage, mask_binding),
            vec![
                ("BR".to_string(), cfg.br as f64),
                ("D4".to_string(), cfg.d4 as f64),
                ("DP".to_string(), cfg.dp as f64),
            ],
        )
    };
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
        variant: variant.into(),
        buffers,
        dispatches: vec![Dispatch {
            name: "attention".into(),
            shader,
            entry: "main",
            overrides,
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
            vec![
                ("register_tiled".into(), cfg.register_tiled as u8 as f64),
                ("BR".into(), cfg.br as f64),
                ("BC".into(), cfg.bc as f64),
                ("D4".into(), cfg.d4 as f64),
                ("DP".into(), cfg.dp as f64),
                ("workgroup_storage_bytes".into(), cfg.storage_bytes() as f64),
            ]
        },
        notes,
    })
}
