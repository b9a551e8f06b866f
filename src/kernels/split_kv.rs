//! `split` and `combine` (shaders/split_kv.wgsl, shaders/split_kv_combine.wgsl): flash-decoding
//! for the `split-kv` variant. With few query rows (decode: N = 1..16) a fused kernel that gives
//! each workgroup a block of query rows launches B·H·⌈N/BR⌉ workgroups: at B = 1, H = 32 that is
//! 32, against the H200's 132 SMs. Splitting the keys into slices gives B·H·N·S workgroups, each
//! reading 1/S of K and V; a second, small dispatch merges the slices' (max, sum, output).

use super::{bind, check_grid, check_mask, kernel, mask_slot, with_mask, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{Access, Dispatch, Params};
use crate::problem::Problem;

/// Threads of the split kernel's workgroup (split_kv.wgsl `WG`).
pub const WG: u32 = 128;
/// Workgroup storage of the split kernel: the lane sets' (m, l) and outputs (split_kv.wgsl `sml`,
/// `sacc`).
pub const STORAGE: u64 = 16 * 8 + 4096 * 4;
/// Workgroups the split pass aims at: a few per SM of a large GPU (132 on the H200), so that
/// every SM has several to hide its memory latency.
pub const TARGET_WORKGROUPS: u64 = 1024;
/// The decode regime: at most this many query rows.
pub const MAX_ROWS: u32 = 16;

/// How the split kernel cuts the work (its overrides). A lane set of `kw` lanes holds a share of
/// a key row (`wpl` 16-byte words a lane) and reads `unroll` key rows of K and V at once; each of
/// the workgroup's key groups takes every `groups`-th of the slice's keys. Two kernels:
/// - `every_head` (shaders/split_kv_hpl.wgsl, groups of at most [`EVERY_HEAD_MAX_GROUP`] query
///   heads whose rows fit two words a lane): every lane set is a key group serving all the
///   group's query heads, so each K/V word it loads feeds GROUP dot products;
/// - otherwise (shaders/split_kv.wgsl) the group's lane sets form a key group, a lane set per
///   query head, each loading the same K/V words.
///
/// On the H200 (Hq 32, Hkv 8, D 128, N 1, f16; one lease, results/EXPERIMENTS.md, v31-*) the
/// first took B16 M65536 from 2322 to 1418 µs and B16 M16384 from 501 to 342: the same
/// registers hold 4x the unique K/V rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub kw: u32,
    pub wpl: u32,
    pub unroll: u32,
    /// Key slices per query row and K/V head: slice s takes the blocks of `step` keys s, s +
    /// splits, s + 2 splits, ...
    pub splits: u64,
    pub step: u64,
    /// split_kv_hpl.wgsl: every lane set serves all the group's query heads.
    pub every_head: bool,
}

/// The largest query-head group split_kv_hpl.wgsl serves from one lane set (its named per-head
/// registers).
pub const EVERY_HEAD_MAX_GROUP: u32 = 4;

impl Layout {
    /// Key groups per workgroup for `group` query heads per K/V head.
    pub fn groups(&self, group: u32) -> u32 {
        if self.every_head {
            WG / self.kw
        } else {
            WG / self.kw / group
        }
    }
}

/// The layout for `p` on `caps`, or why the kernel cannot run there (beyond the decode regime,
/// which the variant checks).
pub fn layout(p: &Problem, caps: &AdapterCaps) -> Result<Layout, String> {
    if !caps.subgroups {
        return Err(
            "split-KV sums each key's dot product over the lanes that read its row by subgroup \
             shuffles: the adapter (or device) lacks Features::SUBGROUP"
                .into(),
        );
    }
    if caps.subgroup_min_size < 8 || !caps.subgroup_min_size.is_power_of_two() {
        return Err(format!(
            "split-KV gives a key row to 8 or 16 lanes of one subgroup: subgroups of at least 8 \
             lanes are needed (this adapter: {}..{})",
            caps.subgroup_min_size, caps.subgroup_max_size
        ));
    }
    if caps.max_invocations_per_workgroup < WG || caps.max_workgroup_size_x < WG {
        return Err(format!("split-KV needs {WG}-thread workgroups"));
    }
    if STORAGE > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "split-KV needs {STORAGE} bytes of workgroup storage, this adapter allows {}",
            caps.max_workgroup_storage
        ));
    }
    let epw = if p.dtype.bytes() == 2 { 8 } else { 4 };
    if !p.head_dim.is_multiple_of(epw) {
        return Err(format!(
            "split-KV reads K and V as 16-byte words ({epw} {} elements): D must be a multiple \
             of {epw} (got D={})",
            p.dtype.name(),
            p.head_dim
        ));
    }
    let kw = caps.subgroup_min_size.min(16);
    let wpl = (p.head_dim / epw).div_ceil(kw);
    // The kernels' register arrays: UNROLL * WPL <= 16 words of K (and V) in flight (LMAX), a
    // head's query row and output as at most 8 vec4 a lane (split_kv.wgsl) or 2 (split_kv_hpl.wgsl,
    // one set per head of the group, which also keeps the unroll at 8: 4 heads' scores).
    if wpl * (epw / 4) > 8 || p.group() * kw > WG {
        return Err(format!(
            "split-KV gives each query head of a group {kw} lanes and keeps a lane's share of the \
             head's row in registers: D={} with {} query heads per K/V head is more than a \
             workgroup of {WG} holds",
            p.head_dim,
            p.group()
        ));
    }
    let every_head = p.group() <= EVERY_HEAD_MAX_GROUP
        && wpl * (epw / 4) <= 2
        // split_kv_hpl.wgsl's `sacc`: [lane set][head][D] f32
        && (WG / kw) * p.group() * p.head_dim <= 4096;
    let mut unroll = (16 / wpl).clamp(1, if every_head { 8 } else { 16 });
    let groups = if every_head {
        WG / kw
    } else {
        WG / kw / p.group()
    };
    // Fewer keys in flight where M is too short to give every slice a block of them (the H200
    // figures: 16 rows in flight beat 8 by 5-15 % at M >= 16384, results/EXPERIMENTS.md, v25-*).
    let rows = p.batch as u64 * p.kv_heads as u64 * p.seq as u64;
    let want = TARGET_WORKGROUPS.div_ceil(rows);
    let blocks = |u: u32| (p.kv_seq as u64).div_ceil((groups * u) as u64);
    while unroll > 1 && blocks(unroll) < want {
        unroll /= 2;
    }
    let step = (groups * unroll) as u64;
    let steps = blocks(unroll);
    Ok(Layout {
        kw,
        wpl,
        unroll,
        splits: want.clamp(1, steps),
        step,
        every_head,
    })
}

/// K/V heads per split dispatch: all B·Hkv when K fits one storage binding, else as many as fit
/// one (at an offset the binding alignment allows; each dispatch then binds its heads' ranges of
/// K and V).
fn kv_heads_per_dispatch(p: &Problem, caps: &AdapterCaps) -> Result<u64, String> {
    let kv_heads = p.batch as u64 * p.kv_heads as u64;
    if p.kv_bytes() <= caps.max_storage_binding {
        return Ok(kv_heads);
    }
    let per_head = p.kv_seq as u64 * p.head_dim as u64 * p.dtype.bytes();
    let mut per = caps.max_storage_binding / per_head;
    while per > 0 && !(per * per_head).is_multiple_of(crate::plan::BINDING_OFFSET_ALIGN) {
        per -= 1;
    }
    if per == 0 {
        return Err(format!(
            "K ({} bytes) exceeds one storage binding ({} bytes) and one K/V head's {per_head} \
             bytes cannot start a binding range at a multiple of {} bytes",
            p.kv_bytes(),
            caps.max_storage_binding,
            crate::plan::BINDING_OFFSET_ALIGN
        ));
    }
    Ok(per)
}

/// `(first K/V head, K/V heads)` of each split dispatch (`kv_heads_per_dispatch`).
pub fn kv_chunks(p: &Problem, caps: &AdapterCaps) -> Result<Vec<(u64, u64)>, String> {
    let kv_heads = p.batch as u64 * p.kv_heads as u64;
    Ok(super::chunks(kv_heads, kv_heads_per_dispatch(p, caps)?))
}

/// Loop iterations of one split-pass invocation, counting every loop of split_kv.wgsl as written:
/// per key block of its slice, the loads, dot products, lane sums and output updates.
fn split_loops(p: &Problem, lay: &Layout) -> u64 {
    let hw = if p.dtype.bytes() == 2 { 2 } else { 1 };
    let (u, w) = (lay.unroll as u64, lay.wpl as u64);
    let lanes = (lay.kw as u64).trailing_zeros() as u64;
    let per_block = u * (w * (3 * hw + 2) + lanes + 2) + w * hw + 1;
    let blocks = (p.kv_seq as u64).div_ceil(lay.step).div_ceil(lay.splits);
    blocks * per_block + 4 * (w * hw + p.group() as u64 + 8)
}

/// The split pass: `PO` (partial outputs) and `PML` (partial max and sum) of every slice; one
/// dispatch per chunk of K/V heads (`kv_chunks`).
pub fn split(p: &Problem, caps: &AdapterCaps) -> Result<Vec<Dispatch>, String> {
    let lay = layout(p, caps)?;
    let parts = kv_chunks(p, caps)?;
    let whole = parts.len() == 1;
    let per_head = p.kv_seq as u64 * p.head_dim as u64 * p.dtype.bytes();
    parts
        .into_iter()
        .map(|(first, count)| split_part(p, caps, &lay, first, count, whole, per_head))
        .collect()
}

fn split_part(
    p: &Problem,
    caps: &AdapterCaps,
    lay: &Layout,
    first: u64,
    count: u64,
    whole: bool,
    per_head: u64,
) -> Result<Dispatch, String> {
    let (s, step) = (lay.splits, lay.step);
    let st = Storage::of(p.dtype);
    check_mask(p, caps)?;
    let kv = |name: &str| {
        let mut b = bind(name, Access::Read);
        if !whole {
            b.range = Some((first * per_head, count * per_head));
        }
        b
    };
    let bindings = with_mask(
        p,
        vec![
            bind("Q", Access::Read),
            kv("K"),
            kv("V"),
            bind("PO", Access::ReadWrite),
            bind("PML", Access::ReadWrite),
        ],
    );
    let e = p.dtype.bytes();
    let d = p.head_dim as u64;
    let g = p.group() as u64;
    let pairs = count * g * p.allowed_pairs_per_head();
    let kv_groups = count;
    let shader = if lay.every_head {
        kernel!(
            "split_kv_hpl.wgsl" + "split_kv_lib.wgsl",
            st,
            mask_slot(&bindings),
            dropout = p.dropout().is_some()
        )
    } else {
        kernel!(
            "split_kv.wgsl" + "split_kv_lib.wgsl",
            st,
            mask_slot(&bindings),
            dropout = p.dropout().is_some()
        )
    };
    Ok(Dispatch {
        name: "split".into(),
        phase: crate::plan::Phase::Forward,
        saved: vec![],
        shader,
        entry: "main",
        overrides: vec![
            ("GROUP".to_string(), p.group() as f64),
            ("KW".to_string(), lay.kw as f64),
            ("SPLITS".to_string(), s as f64),
            ("UNROLL".to_string(), lay.unroll as f64),
            ("WPL".to_string(), lay.wpl as f64),
        ],
        params: Params::of(p).chunk((first * g) as u32, (count * g) as u32),
        bindings,
        workgroups: [
            check_grid("key slices", s, caps)?,
            check_grid("N query rows", p.seq as u64, caps)?,
            check_grid("B*Hkv", kv_groups, caps)?,
        ],
        // Q once, each query row's keys of K and V once per K/V head (shared by its group), the
        // mask bias per pair; the partials.
        reads_bytes: count * g * p.seq as u64 * d * e
            + pairs / g * 2 * d * e
            + if p.mask.bias.is_some() { pairs * 4 } else { 0 },
        writes_bytes: count * g * p.seq as u64 * s * (d + 2) * 4,
        flops: 4 * pairs * d,
        // Unmeasured, an upper bound: every loop of split_kv.wgsl counted as written (the driver
        // unrolls the fixed-count ones) for each of a slice's key blocks. On lavapipe the binding
        // limit stops M long before this reaches Mesa's cap (results/EXPERIMENTS.md, v40-loop-limit).
        loop_iters: split_loops(p, lay),
        note: format!(
            "split-KV (flash-decoding){}: {s} slices per query row and K/V head (blocks of {step} \
             keys, dealt round-robin), a workgroup each serving the {} query heads of the group \
             ({} in all); in a workgroup {} key groups, {}, each reading {} key rows of K and V \
             at once as 16-byte words, an online softmax per head and key group, merged at the \
             end",
            if whole {
                String::new()
            } else {
                format!(
                    ", K/V heads {first}..{} (K and V exceed one binding: a range each)",
                    first + count
                )
            },
            p.group(),
            s * kv_groups * p.seq as u64,
            lay.groups(p.group()),
            if lay.every_head {
                format!(
                    "each one set of {} lanes holding a key row and serving all {} heads \
                     (split_kv_hpl.wgsl)",
                    lay.kw,
                    p.group()
                )
            } else {
                format!(
                    "each {} sets of {} lanes (a head's share of a key row on each)",
                    p.group(),
                    lay.kw
                )
            },
            lay.unroll
        ),
    })
}

/// The combine pass: O and the row logsumexp L from the slices' partials.
pub fn combine(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    let s = layout(p, caps)?.splits;
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
        // The slices' maxima and sums, then their outputs, per column group of the row.
        loop_iters: 3 * (s + 1) * (d.div_ceil(4) + 1),
        note: format!("merges the {s} slices of each row: O, and L for the backward"),
    })
}
