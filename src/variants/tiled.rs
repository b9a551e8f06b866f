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

/// Which kernel (and BR) the `tiled` variant runs: what `tune` searches and `--tile` forces.
/// Written `rt` (the register-tiled kernel) or `row:BR` (one row per thread, BR rows a workgroup).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TileChoice {
    RegisterTiled,
    Row(u32),
}

impl TileChoice {
    /// Parses `rt` or `row:BR` (BR a positive integer; whether it fits is the builder's question).
    pub fn parse(s: &str) -> Result<TileChoice, String> {
        let t = s.trim();
        if t == "rt" {
            return Ok(TileChoice::RegisterTiled);
        }
        if let Some(br) = t.strip_prefix("row:") {
            return match br.trim().parse::<u32>() {
                Ok(0) => Err(format!("--tile `{s}`: BR must be at least 1")),
                Ok(n) => Ok(TileChoice::Row(n)),
                Err(_) => Err(format!("--tile `{s}`: `{br}` is not a positive integer")),
            };
        }
        Err(format!(
            "--tile `{s}` is unknown (expected `rt`, the register-tiled kernel, or `row:BR`, e.g. `row:32`)"
        ))
    }
}

impl std::fmt::Display for TileChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TileChoice::RegisterTiled => write!(f, "rt"),
            TileChoice::Row(br) => write!(f, "row:{br}"),
        }
    }
}

impl serde::Serialize for TileChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for TileChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TileChoice::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A tile choice imposed on the `tiled` variant, and where it came from (`--tile`,
/// `tuned: <cache path>`, `tune candidate`). Carried in [`Problem::tile`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TileRequest {
    pub choice: TileChoice,
    pub source: String,
}

/// The tile choice a plan used and why: [`TileRequest::source`], or `default` (the builder's own
/// preference, [`choose`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TileUsed {
    pub choice: TileChoice,
    pub source: String,
}

/// The configuration of `choice` for head dimension `head_dim`, or why it does not fit this adapter.
pub fn config_for(
    choice: TileChoice,
    head_dim: u32,
    caps: &AdapterCaps,
) -> Result<TileConfig, String> {
    let d4 = head_dim.div_ceil(4);
    match choice {
        TileChoice::RegisterTiled => {
            if head_dim > 64 {
                return Err(format!(
                    "tile `rt`: the register-tiled kernel holds at most D = 64 columns (got D={head_dim})"
                ));
            }
            if RT_STORAGE > caps.max_workgroup_storage as u64 {
                return Err(format!(
                    "tile `rt` needs {RT_STORAGE} bytes of workgroup storage, this adapter allows {}",
                    caps.max_workgroup_storage
                ));
            }
            if caps.max_invocations_per_workgroup < 64 || caps.max_workgroup_size_x < 64 {
                return Err(format!(
                    "tile `rt` needs 64-thread workgroups, this adapter allows {} invocations \
                     ({} in x)",
                    caps.max_invocations_per_workgroup, caps.max_workgroup_size_x
                ));
            }
            Ok(TileConfig {
                register_tiled: true,
                br: 64,
                bc: BC,
                d4,
                dp: 17,
            })
        }
        TileChoice::Row(br) => {
            let cfg = TileConfig {
                register_tiled: false,
                br,
                bc: BC,
                d4,
                dp: d4 | 1,
            };
            if br == 0 {
                return Err("tile `row:0`: BR must be at least 1".into());
            }
            if cfg.storage_bytes() > caps.max_workgroup_storage as u64 {
                return Err(format!(
                    "tile `{choice}` does not fit: BR={br}, BC={BC}, D={head_dim} needs {} bytes of \
                     workgroup storage ((2*BR + 2*BC) * DP * 16 + 4*BR, DP={}), this adapter allows {}",
                    cfg.storage_bytes(),
                    cfg.dp,
                    caps.max_workgroup_storage
                ));
            }
            if br > caps.max_invocations_per_workgroup || br > caps.max_workgroup_size_x {
                return Err(format!(
                    "tile `{choice}` does not fit: BR={br} threads per workgroup, this adapter allows \
                     {} invocations ({} in x)",
                    caps.max_invocations_per_workgroup, caps.max_workgroup_size_x
                ));
            }
            Ok(cfg)
        }
    }
}

/// Every tile choice `tune` tries, preferred first: `rt`, then `row:BR` for BR in
/// [`BR_CANDIDATES`]. Not all of them fit a given adapter (see [`candidates`]).
pub fn all_choices() -> Vec<TileChoice> {
    std::iter::once(TileChoice::RegisterTiled)
        .chain(BR_CANDIDATES.iter().map(|&br| TileChoice::Row(br)))
        .collect()
}

/// The tile choices that fit this adapter for `head_dim`, preferred first.
pub fn candidates(head_dim: u32, caps: &AdapterCaps) -> Vec<(TileChoice, TileConfig)> {
    all_choices()
        .into_iter()
        .filter_map(|c| config_for(c, head_dim, caps).ok().map(|cfg| (c, cfg)))
        .collect()
}

/// The default configuration: the first of [`all_choices`] that fits this adapter, or why none does.
pub fn choose(head_dim: u32, caps: &AdapterCaps) -> Result<TileConfig, String> {
    default_choice(head_dim, caps).map(|(_, cfg)| cfg)
}

/// [`choose`] with the choice it made.
pub fn default_choice(
    head_dim: u32,
    caps: &AdapterCaps,
) -> Result<(TileChoice, TileConfig), String> {
    if let Some(first) = candidates(head_dim, caps).into_iter().next() {
        return Ok(first);
    }
    let d4 = head_dim.div_ceil(4);
    let smallest = TileConfig {
        register_tiled: false,
        br: 4,
        bc: BC,
        d4,
        dp: d4 | 1,
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

/// `tiled`: the tile configuration of [`Problem::tile`] when one is imposed (refused with the reason
/// when it does not fit), else the default ([`choose`]).
pub fn build(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    let (choice, cfg, source) = match &p.tile {
        Some(t) => (
            t.choice,
            config_for(t.choice, p.head_dim, caps)
                .map_err(|e| format!("{e} (tile from {})", t.source))?,
            t.source.clone(),
        ),
        None => {
            let (c, cfg) = default_choice(p.head_dim, caps)?;
            (c, cfg, "default".to_string())
        }
    };
    let mut plan = build_with(p, caps, cfg, "tiled")?;
    plan.tile = Some(TileUsed { choice, source });
    Ok(plan)
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
pub const COOP_STORAGE: u64 = 43008;
/// Rows (of Q) and keys (of K and V) past N that tiled_coop.wgsl's cooperative loads may read: the
/// last query block and key block of a head are read whole.
pub const COOP_PAD_ROWS: u64 = 64;

/// `tiled-coop`: f16 attention on cooperative matrices (shaders/tiled_coop.wgsl): Q Kᵀ and P V as
/// 16 x 16 x 16 f16 products with f32 accumulators, four independent 32-wide subgroups per
/// workgroup.
pub fn build_coop(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    if !caps.cooperative_matrix {
        return Err(
            "the adapter (or device) lacks Features::EXPERIMENTAL_COOPERATIVE_MATRIX".into(),
        );
    }
    if caps.subgroup_min_size != 32 || caps.subgroup_max_size != 32 {
        return Err(format!(
            "the kernel gives each 32-wide subgroup 16 rows (two lanes a row); this adapter's \
             subgroups are {}..{} wide",
            caps.subgroup_min_size, caps.subgroup_max_size
        ));
    }
    if p.head_dim > 64 || !p.head_dim.is_multiple_of(16) {
        return Err(format!(
            "the cooperative-matrix kernel reads Q, K and V in 16 x 16 tiles straight from memory \
             and keeps at most 4 of them a row: D must be 16, 32, 48 or 64 (got --head-dim {})",
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
        bc: 64,
        d4: p.head_dim.div_ceil(4),
        dp: 0,
    };
    build_with(p, caps, cfg, "tiled-coop")
}

/// tiled_coop.wgsl's choices (see the kernel), as measured on the H200 at B8 H16 N1024 D64 causal
/// f16: how P enters P V (`LO` = 2, hi + unscaled lo into the same accumulators: 480 µs, PASS,
/// results/h200/2026-12-02-v8-noregs; 0, P in one f16 as FlashAttention does: fails the f16
/// tolerance, results/h200/2026-12-02-v5/ab), the lazy-rescale threshold (`TAU` = 8; 0,
/// FlashAttention-2's rescale on every new maximum, was 14 % slower in v5) and the register
/// prefetch of the next K/V block (`PREFETCH` = 1; 0 was 8 % slower in v5).
fn coop_overrides() -> Vec<(String, f64)> {
    vec![
        ("LO".to_string(), 2.0),
        ("TAU".to_string(), 8.0),
        ("PREFETCH".to_string(), 1.0),
    ]
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
    // tiled_coop.wgsl reads whole 64-row blocks of Q, K and V: room for them past the last head.
    let padded = if variant == "tiled-coop" {
        qkv + COOP_PAD_ROWS * d * e
    } else {
        qkv
    };
    check_binding("Q/K/V", padded, caps)?;
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
    // tiled_rt.wgsl double-buffers K/V through registers for f32 storage only (measured on the
    // H200: see PREFETCH in the kernel).
    let prefetch = vec![(
        "PREFETCH".to_string(),
        if p.dtype == crate::problem::DType::F32 {
            1.0
        } else {
            0.0
        },
    )];
    let (shader, overrides) = if variant == "tiled-coop" {
        (
            kernel!("tiled_coop.wgsl" + "tiled_mask.wgsl", storage, mask_binding),
            coop_overrides(),
        )
    } else if subgroup {
        (
            kernel!("tiled_rt.wgsl" + "tiled_rt_sg.wgsl", storage, mask_binding),
            prefetch,
        )
    } else if cfg.register_tiled {
        (
            kernel!("tiled_rt.wgsl" + "tiled_rt_wg.wgsl", storage, mask_binding),
            prefetch,
        )
    } else {
        (
            kernel!("tiled.wgsl" + "tiled_mask.wgsl", storage, mask_binding),
            vec![
                ("BR".to_string(), cfg.br as f64),
                ("D4".to_string(), cfg.d4 as f64),
                ("DP".to_string(), cfg.dp as f64),
            ],
        )
    };
    let mut buffers = vec![
        buf("Q", padded, Role::Input, false),
        buf("K", padded, Role::Input, false),
        buf("V", padded, Role::Input, false),
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
            let mut c = vec![
                ("register_tiled".into(), cfg.register_tiled as u8 as f64),
                ("BR".into(), cfg.br as f64),
                ("BC".into(), cfg.bc as f64),
                ("D4".into(), cfg.d4 as f64),
                ("DP".into(), cfg.dp as f64),
                (
                    "workgroup_storage_bytes".into(),
                    if variant == "tiled-coop" {
                        COOP_STORAGE
                    } else {
                        cfg.storage_bytes()
                    } as f64,
                ),
            ];
            if variant == "tiled-coop" {
                c.extend(overrides.iter().cloned());
            }
            c
        },
        notes,
        tile: None,
    })
}
