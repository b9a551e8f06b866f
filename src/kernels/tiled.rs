//! `attention` for the register-tiled and row-per-thread fused kernels (the `tiled` variant's
//! tiles):
//! - shaders/tiled_rt.wgsl, register-tiled (a 4 x 4 score tile and a 4 x 16 output tile per
//!   thread at D <= 64; 2 rows at D <= 128, 1 at D <= 256), with its row
//!   reductions from shaders/tiled_rt_wg.wgsl (workgroup memory), and its score masking from
//!   shaders/tiled_mask.wgsl (the subgroup branch of the family is rt2/rt3, tiled_v2/v3.wgsl);
//! - shaders/tiled.wgsl (+ tiled_mask.wgsl), one query row per thread, for any D up to 256 and
//!   small workgroup storage.
//!
//! The host picks the `override` constants of tiled.wgsl: BR query rows per workgroup (one thread
//! each), the largest whose workgroup storage fits the adapter's
//! `max_compute_workgroup_storage_size`; D4 = ceil(D/4) and the odd row pitch DP. BC = 16 keys per
//! block is fixed by the kernels.

use super::{bind, check_grid, check_mask, kernel, mask_slot, with_mask, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};
use crate::problem::{DType, Problem};
pub use crate::tile::{TileChoice, TileConfig, TileKernel, RT_PART_STORAGE};

/// BR candidates, preferred first: BR = 64 halves the K/V re-reads of BR = 32.
const BR_CANDIDATES: &[u32] = &[64, 32, 16, 8, 4];
/// Keys per staged block: fixed in tiled.wgsl (four named vec4 score registers).
pub const BC: u32 = 16;

/// The configuration of `choice` for head dimension `head_dim`, or why it does not fit this adapter.
pub fn config_for(
    choice: TileChoice,
    head_dim: u32,
    caps: &AdapterCaps,
) -> Result<TileConfig, String> {
    let d4 = head_dim.div_ceil(4);
    match choice {
        TileChoice::Subgroup(bc) => {
            if head_dim > 64 || !head_dim.is_multiple_of(8) {
                return Err(format!(
                    "tile `rt2`: the v2 kernel reads rows as 16-byte words and holds at most 64 \
                     columns: D must be a multiple of 8 up to 64 (got D={head_dim})"
                ));
            }
            row_groups_of_8("rt2", caps)?;
            // Key blocks of 32 by default: on the H200 they beat blocks of 64 by 2.2x (fewer
            // registers and 32 KiB instead of 48 KiB a workgroup: more workgroups per SM;
            // results/EXPERIMENTS.md, v15-rt2-ab).
            let cfg = TileConfig {
                kernel: TileKernel::Rt2,
                br: 64,
                bc,
                d4,
                dp: 0,
            };
            let need = cfg.storage_bytes();
            if need > caps.max_workgroup_storage as u64 {
                return Err(format!(
                    "tile `rt2:{bc}` needs {need} bytes of workgroup storage, this adapter allows {}",
                    caps.max_workgroup_storage
                ));
            }
            Ok(cfg)
        }
        TileChoice::Chunked => {
            if !(RT3_MIN_HEAD_DIM..=RT_MAX_HEAD_DIM).contains(&head_dim)
                || !head_dim.is_multiple_of(8)
            {
                return Err(format!(
                    "tile `rt3` reads rows as 16-byte words and walks the head dimension in chunks \
                     of 64 columns: D must be a multiple of 8 from {RT3_MIN_HEAD_DIM} to \
                     {RT_MAX_HEAD_DIM} (got D={head_dim}; `rt2` takes D <= 64)"
                ));
            }
            row_groups_of_8("rt3", caps)?;
            let cfg = TileConfig {
                kernel: TileKernel::Rt3,
                br: 64,
                bc: 32,
                d4,
                dp: 0,
            };
            let need = cfg.storage_bytes();
            if need > caps.max_workgroup_storage as u64 {
                return Err(format!(
                    "tile `rt3` needs {need} bytes of workgroup storage, this adapter allows {}",
                    caps.max_workgroup_storage
                ));
            }
            Ok(cfg)
        }
        TileChoice::RegisterTiled => {
            if caps.max_invocations_per_workgroup < 64 || caps.max_workgroup_size_x < 64 {
                return Err(format!(
                    "tile `rt` needs 64-thread workgroups, this adapter allows {} invocations \
                     ({} in x)",
                    caps.max_invocations_per_workgroup, caps.max_workgroup_size_x
                ));
            }
            rt_config(head_dim, caps.max_workgroup_storage as u64)
        }
        TileChoice::Row(br) => {
            let cfg = TileConfig {
                kernel: TileKernel::Row,
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

/// The largest head dimension of the register-tiled kernels tiled_v3.wgsl and tiled_rt.wgsl.
pub const RT_MAX_HEAD_DIM: u32 = 256;

/// The largest head dimension at which tiled_v3.wgsl prefetches the next Q/K chunk into registers.
pub const RT3_PREFETCH_MAX_D: u32 = 128;

/// The lazy-rescale threshold of tiles rt2 and rt3 (tiled_mask.wgsl's `lazy_max`, base 2). 0:
/// the classic online softmax, O rescaled in every block where a row's maximum grew. With
/// `--override TAU=8` a row's running maximum moves only when a block's exceeds it by more than
/// 2^8, and O's rescale is skipped in every block where no row of the thread moved: written for
/// the v49 A/B and tested on the software adapter, not yet measured on a GPU
/// (results/EXPERIMENTS.md), so not the default.
pub const LAZY_TAU: f64 = 0.0;

/// The smallest head dimension of tiled_v3.wgsl (below it, tiled_v2.wgsl holds the row whole).
pub const RT3_MIN_HEAD_DIM: u32 = 72;

/// What tiles `rt2` and `rt3` need of the adapter: 128-thread workgroups whose row groups of 8
/// lanes exchange P and the row statistics by subgroup shuffles.
fn row_groups_of_8(tile: &str, caps: &AdapterCaps) -> Result<(), String> {
    if !caps.subgroups || caps.subgroup_min_size < 8 {
        return Err(format!(
            "tile `{tile}` exchanges P among the 8 lanes of a row group by subgroup shuffles: it \
             needs SUBGROUP with subgroups of at least 8 lanes (this adapter: {})",
            if caps.subgroups {
                format!(
                    "{}..{} lanes",
                    caps.subgroup_min_size, caps.subgroup_max_size
                )
            } else {
                "no SUBGROUP".to_string()
            }
        ));
    }
    if caps.max_invocations_per_workgroup < 128 || caps.max_workgroup_size_x < 128 {
        return Err(format!(
            "tile `{tile}` needs 128-thread workgroups, this adapter allows {} invocations ({} in x)",
            caps.max_invocations_per_workgroup, caps.max_workgroup_size_x
        ));
    }
    Ok(())
}

/// tiled_rt.wgsl's tile for head dimension `head_dim` within `storage` bytes of workgroup storage
/// (with tiled_rt_wg.wgsl's 1 KiB of row partials): rows per thread RPT = 4 for D <= 64,
/// 2 for D <= 128, 1 for D <= 256 (BR = 16 RPT rows, so that a thread's RPT x ceil(D/16) vec4 of
/// O stay at 16), and the largest key block BC of 16, 8, 4 that fits (and keeps a thread's
/// staged K/V elements BC * 4 ceil(D/4) / 64 at 32 at most), or why none does.
pub fn rt_config(head_dim: u32, storage: u64) -> Result<TileConfig, String> {
    if head_dim > RT_MAX_HEAD_DIM {
        return Err(format!(
            "tile `rt`: the register-tiled kernel holds at most D = {RT_MAX_HEAD_DIM} columns \
             (got D={head_dim})"
        ));
    }
    let d4 = head_dim.div_ceil(4);
    let br = match head_dim {
        0..=64 => 64,
        65..=128 => 32,
        _ => 16,
    };
    let cfg = |bc: u32| TileConfig {
        kernel: TileKernel::Rt,
        br,
        bc,
        d4,
        dp: d4 + 1,
    };
    let need = |c: &TileConfig| c.storage_bytes();
    [16, 8, 4]
        .into_iter()
        .map(cfg)
        .find(|c| c.bc * 4 * d4 <= 2048 && need(c) <= storage)
        .ok_or_else(|| {
            let c = cfg(4);
            format!(
                "tile `rt` does not fit: D={head_dim} with BR={br} rows and the smallest key block \
                 (BC=4) needs {} bytes of workgroup storage ((BR + 2 BC) * (ceil(D/4) + 1) * 16 + \
                 BC * 256 + 1024), this adapter allows {storage}",
                need(&c)
            )
        })
}

/// Every tile choice `tune` tries, preferred first: `rt2:32`, `rt2:64`, `rt3`, `rt`, then `row:BR` for BR in
/// [`BR_CANDIDATES`]. Not all of them fit a given adapter (see [`candidates`]).
pub fn all_choices() -> Vec<TileChoice> {
    [
        TileChoice::Subgroup(32),
        TileChoice::Subgroup(64),
        TileChoice::Chunked,
        TileChoice::RegisterTiled,
    ]
    .into_iter()
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
        kernel: TileKernel::Row,
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

/// Keys each query block reads: all M, or up to the causal diagonal of its last row.
fn keys_for_block(p: &Problem, br: u64, qb: u64) -> u64 {
    let n = p.seq as u64;
    p.keys_for_row(n.min((qb + 1) * br) - 1)
}

/// The traffic and work of a fused kernel with `br` query rows per workgroup: Q once, K and V once
/// per query block (only the blocks up to the diagonal when causal), the mask bias for every
/// visited (row, key) pair, O once. Work: every (row, key) pair of the visited blocks, masked or
/// not. Returns (query blocks, bytes read, FLOPs).
pub(crate) fn fused_traffic(p: &Problem, br: u64) -> (u64, u64, u64) {
    let e = p.dtype.bytes();
    let n = p.seq as u64;
    let d = p.head_dim as u64;
    let bh = p.bh();
    let blocks = n.div_ceil(br);
    let mut kv_rows = 0u64;
    let mut pairs = 0u64;
    for qb in 0..blocks {
        let keys = keys_for_block(p, br, qb);
        let rows = br.min(n - qb * br);
        kv_rows += keys;
        pairs += rows * keys;
    }
    let mask_reads = if p.mask.bias.is_some() {
        bh * pairs * 4
    } else {
        0
    };
    let reads = p.qkv_bytes() + bh * kv_rows * d * e * 2 + mask_reads;
    (blocks, reads, bh * pairs * d * 4)
}

/// The fused kernel's bindings: Q, K, V, O, in training mode L (the row logsumexp,
/// shaders/tiled_lse.wgsl), then MASK when the problem has one.
pub(crate) fn fused_bindings(p: &Problem) -> Vec<crate::plan::BindingDecl> {
    let mut b = vec![
        bind("Q", Access::Read),
        bind("K", Access::Read),
        bind("V", Access::Read),
        bind("O", Access::ReadWrite),
    ];
    if p.backward {
        b.push(bind("L", Access::ReadWrite));
    }
    with_mask(p, b)
}

/// Loop iterations per key of each fused forward kernel as Mesa's llvmpipe counts them, measured:
/// 65535 / the smallest M that failed on lavapipe (Mesa 22.3.6) at B1 H1 N8, non-causal, f32,
/// by bisection (results/EXPERIMENTS.md, v40-loop-limit), for D up to the first figure. What the
/// driver unrolls does not count, so no formula from the shader's loops predicts it; a larger D
/// than any measured point takes the last one's rate times D / that D.
const LOOPS_PER_KEY: &[(TileKernel, &[(u32, f64)])] = &[
    (
        TileKernel::Rt2,
        &[(16, 65535.0 / 352426.0), (64, 65535.0 / 29688.0)],
    ),
    (
        TileKernel::Rt3,
        &[(128, 65535.0 / 9853.0), (256, 65535.0 / 4990.0)],
    ),
    (
        TileKernel::Rt,
        &[
            (64, 65535.0 / 29944.0),
            (128, 65535.0 / 12285.0),
            (256, 65535.0 / 3999.0),
        ],
    ),
    (TileKernel::Row, &[(64, 65535.0 / 10493.0)]),
];

/// An upper bound of the loop iterations one invocation of the fused kernel `cfg` runs: the
/// measured rate per key ([`LOOPS_PER_KEY`], with a 10 % margin) times the M keys. The
/// cooperative-matrix kernels run on no adapter with a loop cap (none offers cooperative
/// matrices) and are counted as one iteration per key and 16 columns of D, unmeasured.
pub(crate) fn fused_loops(p: &Problem, cfg: &TileConfig) -> u64 {
    let m = p.kv_seq as f64;
    let d = p.head_dim;
    let rate = match LOOPS_PER_KEY.iter().find(|(k, _)| *k == cfg.kernel) {
        Some((_, points)) => match points.iter().find(|(upto, _)| d <= *upto) {
            Some((_, r)) => *r,
            None => {
                let (last, r) = points[points.len() - 1];
                r * d as f64 / last as f64
            }
        },
        None => d.div_ceil(16) as f64,
    };
    (rate * 1.1 * m).ceil() as u64 + 64
}

/// The one fused dispatch over all heads, `blocks` query blocks x B*H.
pub(crate) fn fused_dispatch(
    p: &Problem,
    caps: &AdapterCaps,
    shader: crate::plan::Shader,
    overrides: Vec<(String, f64)>,
    cfg: &TileConfig,
) -> Result<Dispatch, String> {
    check_mask(p, caps)?;
    let (blocks, reads, flops) = fused_traffic(p, cfg.br as u64);
    let x = check_grid("N / BR query blocks", blocks, caps)?;
    let heads = check_grid("B*H", p.bh(), caps)?;
    Ok(Dispatch {
        name: "attention".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader,
        entry: "main",
        overrides,
        params: Params::of(p),
        bindings: fused_bindings(p),
        workgroups: [x, heads, 1],
        reads_bytes: reads,
        writes_bytes: p.qkv_bytes(),
        flops,
        loop_iters: fused_loops(p, cfg),
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
    })
}

/// The fused dispatch of tile configuration `cfg` (rt2, rt3, the register-tiled rt with its row
/// partials combined through workgroup memory, or the row-per-thread kernel).
pub fn attention(p: &Problem, caps: &AdapterCaps, cfg: &TileConfig) -> Result<Dispatch, String> {
    let st = Storage::of(p.dtype);
    let mask = mask_slot(&fused_bindings(p));
    let drop = p.dropout().is_some();
    let (shader, overrides) = match cfg.kernel {
        TileKernel::Rt2 => (
            if p.backward {
                kernel!(
                    "tiled_v2.wgsl" + "tiled_mask.wgsl" + "tiled_lse.wgsl" + "tiled_store.wgsl",
                    st,
                    mask,
                    dropout = drop
                )
            } else {
                kernel!(
                    "tiled_v2.wgsl" + "tiled_mask.wgsl" + "tiled_nolse.wgsl" + "tiled_store.wgsl",
                    st,
                    mask,
                    dropout = drop
                )
            },
            // Measured on the H200 at B8 H16 N1024 D64 causal (results/EXPERIMENTS.md, v16-rt2-knobs):
            // D as a pipeline constant 968 µs f32 against 1677 with D read at run time (the loops
            // over d unroll); the register prefetch of the next K/V block 862 against 968 µs (f16
            // 802 against 878, bf16 799 against 875).
            vec![
                ("BC".to_string(), cfg.bc as f64),
                ("HD".to_string(), p.head_dim as f64),
                ("PREFETCH".to_string(), 1.0),
                ("TAU".to_string(), LAZY_TAU),
            ],
        ),
        TileKernel::Rt3 => (
            if p.backward {
                kernel!(
                    "tiled_v3.wgsl" + "tiled_mask.wgsl" + "tiled_lse.wgsl" + "tiled_store.wgsl",
                    st,
                    mask,
                    dropout = drop
                )
            } else {
                kernel!(
                    "tiled_v3.wgsl" + "tiled_mask.wgsl" + "tiled_nolse.wgsl" + "tiled_store.wgsl",
                    st,
                    mask,
                    dropout = drop
                )
            },
            // D as a pipeline constant: the chunk and column loops unroll and the O tile stays
            // in registers. The register prefetch of the next Q/K chunk up to D = 128 only: on the
            // H100 it made D = 128 1.09-1.23x faster and D = 256 (O already 128 registers a
            // thread) 1.23-1.40x slower (results/EXPERIMENTS.md, v39-rt3).
            vec![
                ("HD".to_string(), p.head_dim as f64),
                (
                    "PREFETCH".to_string(),
                    if p.head_dim <= RT3_PREFETCH_MAX_D {
                        1.0
                    } else {
                        0.0
                    },
                ),
                ("TAU".to_string(), LAZY_TAU),
            ],
        ),
        TileKernel::Rt => {
            // tiled_rt.wgsl double-buffers K/V through registers for f32 storage only (measured
            // on the H200: see PREFETCH in the kernel); its tile is RPT = BR / 16 rows a thread,
            // BC keys a block and D4 = ceil(D / 4) vec4 a row.
            let prefetch = vec![
                (
                    "PREFETCH".to_string(),
                    if p.dtype == DType::F32 { 1.0 } else { 0.0 },
                ),
                ("RPT".to_string(), (cfg.br / 16) as f64),
                ("BC".to_string(), cfg.bc as f64),
                ("D4".to_string(), cfg.d4 as f64),
            ];
            let shader = if p.backward {
                kernel!(
                    "tiled_rt.wgsl"
                        + "tiled_rt_wg.wgsl"
                        + "tiled_mask.wgsl"
                        + "tiled_lse.wgsl"
                        + "tiled_store.wgsl",
                    st,
                    mask,
                    dropout = drop
                )
            } else {
                kernel!(
                    "tiled_rt.wgsl"
                        + "tiled_rt_wg.wgsl"
                        + "tiled_mask.wgsl"
                        + "tiled_nolse.wgsl"
                        + "tiled_store.wgsl",
                    st,
                    mask,
                    dropout = drop
                )
            };
            (shader, prefetch)
        }
        TileKernel::Coop | TileKernel::CoopVk | TileKernel::Cm2 => {
            return Err(
                "the cooperative-matrix kernels are built by kernels::tiled_coop and \
                 kernels::tiled_coop_vk"
                    .into(),
            )
        }
        TileKernel::Row if p.backward => {
            return Err(format!(
                "training (--backward) needs the row logsumexp from the forward, which the \
                 row-per-thread kernel (tiled.wgsl, tile row:{}) does not keep; the register-tiled \
                 kernels (tiles rt2, rt; D <= 64) do",
                cfg.br
            ))
        }
        TileKernel::Row => (
            kernel!("tiled.wgsl" + "tiled_mask.wgsl", st, mask, dropout = drop),
            vec![
                ("BR".to_string(), cfg.br as f64),
                ("D4".to_string(), cfg.d4 as f64),
                ("DP".to_string(), cfg.dp as f64),
            ],
        ),
    };
    fused_dispatch(p, caps, shader, overrides, cfg)
}
