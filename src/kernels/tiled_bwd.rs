//! FlashAttention-2's backward for the `tiled` training plans (`--backward`):
//!
//! | dispatch  | WGSL                                            | what                                   |
//! |-----------|-------------------------------------------------|----------------------------------------|
//! | `bwd_dot` | tiled_bwd_dot.wgsl                              | D = rowsum(dO ∘ O), 16 threads per row |
//! | `bwd_kv`  | D ≤ 64 (f16/bf16: ≤ 128): tiled_bwd_kv.wgsl + tiled_bwd_common.wgsl; f32 to D = 128 in two chunks: tiled_bwd_chunk_kv.wgsl + tiled_bwd_common.wgsl; above: tiled_bwd_wide_kv.wgsl + tiled_bwd_wide.wgsl; + tiled_bwd_kv_out.wgsl + tiled_bwd_lib.wgsl + a width file | dK, dV: a workgroup per BT keys walks the query blocks |
//! | `bwd_q`   | the same with `_q` (+ tiled_bwd_q_out.wgsl)     | dQ: a workgroup per BT rows walks the key blocks |
//!
//! Both fused kernels recompute P = exp2(S·scale·log2 e − L) from Q, K and the forward's row
//! logsumexp L (shaders/tiled_lse.wgsl) on chip; N x N never reaches device memory. Causal
//! block skipping as in the forward. Tiles ([`Tile`]): 32 x 32 with 128 threads for D ≤ 64, and
//! for f16/bf16 inputs up to D = 128 with the four staged tiles kept in their 16 bits (25856
//! bytes at D = 64, 42240 at D = 128); for f32 up to D = 128 with D walked in two chunks, a
//! staged row holding one (43264 bytes at D = 128, 26880 at D = 64 where the whole rows do not
//! fit: lavapipe's 32 KiB);
//! for wider heads four staged tiles of 32 rows do not fit NVIDIA's 48 KiB of workgroup memory,
//! so 8 x 8 for D ≤ 256 (64 threads), 16 x 16 at D ≤ 128 where the 32 x 32 tiles do not fit, or
//! smaller where workgroup memory is smaller (a browser's 16 KiB). At D ≤ 256 `--bwd-tile 32`
//! takes the 32 x 32 tile with D walked in four chunks of 64 columns (25856 bytes staged in 16
//! bits for f16/bf16, 43264 in f32), not yet the default: it waits for an A/B on a GPU.

use super::{bind, check_grid, kernel, mask_slot, with_mask, Storage};
use crate::gpu::AdapterCaps;
use crate::plan::{grid_2d, Access, Dispatch, Params, Phase, Shader};
use crate::problem::Problem;

/// Largest head dimension the kernels hold (64 vec4 per staged row).
pub const MAX_D: u32 = 256;

/// A tile of the fused backward: its file (tiled_bwd_d<D>[_b<BT> | h].wgsl), vec4 per staged row
/// and rows (and keys) per tile. 32 x 32 with 128 threads for D ≤ 64, and for f16/bf16 to D = 128
/// staged in 16 bits (`h`; tiled_bwd_common.wgsl); otherwise the small tiles of
/// tiled_bwd_wide.wgsl (BT x D4 / 8 threads). Four staged tiles of BT rows of D must fit
/// workgroup memory: [`Tile::pick`] takes the largest that fits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Tile {
    /// D ≤ 32, 32 x 32.
    D32,
    /// D ≤ 64, 32 x 32 (43264 bytes: more than lavapipe's 32 KiB).
    D64,
    /// D ≤ 64, 32 x 32 staged in f16/bf16 (25856 bytes).
    D64H,
    /// D ≤ 64, 32 x 32 staged in f32 with D walked in two chunks of 32 columns (26880 bytes:
    /// within lavapipe's 32 KiB, where the tests run the chunked kernels).
    D64C,
    /// D ≤ 64, 8 x 8 (small workgroup memory, e.g. a browser's 16 KiB).
    D64B8,
    /// D ≤ 80, 32 x 32 staged in f16/bf16 (29952 bytes: within lavapipe's 32 KiB).
    D80H,
    /// D ≤ 128, 32 x 32 staged in f16/bf16 (42240 bytes).
    D128H,
    /// D ≤ 128, 32 x 32 staged in f32 with D walked in two chunks of 64 columns (43264 bytes).
    D128C,
    /// D ≤ 128, 16 x 16 (35968 bytes).
    D128B16,
    /// D ≤ 128, 8 x 8.
    D128B8,
    /// D ≤ 256, 8 x 8 (33856 bytes).
    D256B8,
    /// D ≤ 256, 32 x 32 staged in f16/bf16 with D walked in four chunks of 64 columns (25856
    /// bytes): `--bwd-tile 32` (not yet measured on a GPU against the 8 x 8 tile).
    D256H,
    /// D ≤ 256, 32 x 32 staged in f32 with D walked in four chunks of 64 columns (43264 bytes):
    /// `--bwd-tile 32` (not yet measured on a GPU against the 8 x 8 tile).
    D256C,
    /// D ≤ 256, 4 x 4.
    D256B4,
}

impl Tile {
    /// The tiles for head dimension `d`, largest first; `half`: the inputs are f16 or bf16, whose
    /// 32 x 32 tiles above D = 64 stage them in their 16 bits (an f32 input keeps f32).
    fn candidates(d: u32, half: bool) -> &'static [Tile] {
        match (d, half) {
            (0..=32, _) => &[Tile::D32],
            (33..=64, true) => &[Tile::D64H, Tile::D64, Tile::D64C, Tile::D64B8],
            (33..=64, false) => &[Tile::D64, Tile::D64C, Tile::D64B8],
            (65..=80, true) => &[Tile::D80H, Tile::D128H, Tile::D128B16, Tile::D128B8],
            (81..=128, true) => &[Tile::D128H, Tile::D128B16, Tile::D128B8],
            (65..=128, false) => &[Tile::D128C, Tile::D128B16, Tile::D128B8],
            // The chunked 32 x 32 tiles last: taken only when asked for (`--bwd-tile 32`) until
            // an A/B on a GPU measures them against the small tiles.
            (_, true) => &[Tile::D256B8, Tile::D256B4, Tile::D256H],
            (_, false) => &[Tile::D256B8, Tile::D256B4, Tile::D256C],
        }
    }
    /// The largest tile of head dimension `d` (f16/bf16 inputs: `half`) whose workgroup storage
    /// fits `max_storage` bytes.
    pub fn pick(d: u32, half: bool, max_storage: u64) -> Option<Tile> {
        Tile::candidates(d, half)
            .iter()
            .copied()
            .find(|t| t.storage() <= max_storage)
    }
    /// The tile `p` takes here: `--bwd-tile`'s (which must exist at this D and fit), else
    /// [`Tile::pick`]'s; or why none can.
    pub fn for_problem(p: &Problem, caps: &AdapterCaps) -> Result<Tile, String> {
        let max = caps.max_workgroup_storage as u64;
        let half = p.dtype != crate::problem::DType::F32;
        let c = Tile::candidates(p.head_dim, half);
        let t = match p.bwd_tile {
            Some(bt) => *c.iter().find(|t| t.bt() == bt as u64).ok_or_else(|| {
                let have: Vec<String> = c.iter().map(|t| t.bt().to_string()).collect();
                format!(
                    "--bwd-tile {bt}: the fused backward has no {bt} x {bt} tile at D = {} \
                     (it has {})",
                    p.head_dim,
                    have.join(", ")
                )
            })?,
            None => Tile::pick(p.head_dim, half, max).unwrap_or(c[c.len() - 1]),
        };
        if t.storage() > max {
            return Err(format!(
                "the fused backward's {} x {} tile at D = {} needs {} bytes of workgroup \
                 storage, this adapter allows {max}",
                t.bt(),
                t.bt(),
                p.head_dim,
                t.storage()
            ));
        }
        Ok(t)
    }
    /// vec4 slots per staged row (`D4`).
    pub fn d4(self) -> u64 {
        match self {
            Tile::D32 | Tile::D64C => 8,
            Tile::D64 | Tile::D64H | Tile::D64B8 => 16,
            Tile::D80H => 20,
            Tile::D128H => 32,
            Tile::D128C | Tile::D256H | Tile::D256C => 16,
            Tile::D128B16 | Tile::D128B8 => 32,
            Tile::D256B8 | Tile::D256B4 => 64,
        }
    }
    /// Query rows and keys per tile (`BT`).
    pub fn bt(self) -> u64 {
        match self {
            Tile::D32
            | Tile::D64
            | Tile::D64H
            | Tile::D64C
            | Tile::D80H
            | Tile::D128H
            | Tile::D128C
            | Tile::D256H
            | Tile::D256C => 32,
            Tile::D128B16 => 16,
            Tile::D64B8 | Tile::D128B8 | Tile::D256B8 => 8,
            Tile::D256B4 => 4,
        }
    }
    /// Whether tiled_bwd_wide.wgsl's kernels take it: every tile below 32 x 32.
    pub fn wide(self) -> bool {
        self.bt() < 32
    }
    /// Whether the chunked kernels take it (tiled_bwd_chunk_kv.wgsl / _q.wgsl: D in
    /// [`Tile::chunks`] chunks of D4 vec4, a staged row holding one chunk).
    pub fn chunked(self) -> bool {
        self.chunks() > 1
    }
    /// The chunks of D4 vec4 its kernels walk D in (the tile file's NCH; 1: whole rows).
    pub fn chunks(self) -> u32 {
        match self {
            Tile::D64C | Tile::D128C => 2,
            Tile::D256H | Tile::D256C => 4,
            _ => 1,
        }
    }
    /// Whether its staged tiles hold f16/bf16 words (8 bytes a vec4) instead of f32 (16).
    pub fn half(self) -> bool {
        matches!(self, Tile::D64H | Tile::D80H | Tile::D128H | Tile::D256H)
    }
    /// Threads per workgroup.
    pub fn threads(self) -> u64 {
        if self.wide() {
            self.bt() * self.d4() / 8
        } else {
            128
        }
    }
    /// Workgroup storage of the dK/dV kernel (the larger of the two; its header derives it): Q,
    /// dO, K, V tiles of BT rows x (D4 + 1) vec4 (one of padding; 16 bytes each, 8 in 16 bits),
    /// P and dS tiles, L and D.
    pub fn storage(self) -> u64 {
        let bt = self.bt();
        let vec4 = if self.half() { 8 } else { 16 };
        4 * bt * (self.d4() + 1) * vec4 + 2 * bt * bt * 4 + 2 * bt * 4
    }
    /// An upper bound of one invocation's loop iterations per walked key (dQ) or query row (dK/dV)
    /// as Mesa's llvmpipe counts them: measured where llvmpipe takes the tile (the 32 x 32 tiles
    /// at D = 32, scaled by D / 32; the small tiles of its 32 KiB, [`Tile::llvmpipe_first_fail`]),
    /// else counted from the WGSL (per block of BT rows: 8 staging steps of two 4-element row
    /// loads, D4 steps of phase A, BT of phase B; 2.2x and 1.9x the measured rates where both are
    /// known).
    fn loops_per_row(self, which: usize, d: u32) -> f64 {
        match self.llvmpipe_first_fail() {
            Some(first) => 65535.0 / first[which],
            None if self.wide() => {
                (8.0 * 9.0 + self.d4() as f64 + self.bt() as f64) / self.bt() as f64
            }
            // The chunked kernels: phase B once a chunk and up to two stagings a chunk, counted
            // as the chunks' number of times.
            None => BWD_LOOPS_PER_ROW_D32[which] * (d.max(32) as f64 / 32.0) * self.chunks() as f64,
        }
    }
    /// The fewest walked keys (dQ) and query rows (dK/dV) at which the pass's answer went wrong
    /// on lavapipe (Mesa 22.3.6), B1 H1 non-causal f32, by bisection with the loop check off
    /// (results/EXPERIMENTS.md, v37-bwd-wide-loops; the smallest count not seen to pass). D = 128's
    /// dQ pass still passed at 11000 keys, where the forward allows no more: its dK/dV figure is
    /// used for both.
    fn llvmpipe_first_fail(self) -> Option<[f64; 2]> {
        match self {
            Tile::D64B8 => Some([19408.0, 14535.0]),
            Tile::D128B8 => Some([10063.0, 10063.0]),
            Tile::D256B4 => Some([3444.0, 3493.0]),
            _ => None,
        }
    }
}

/// Why the fused backward cannot run this problem here, if it cannot.
pub fn check(p: &Problem, caps: &AdapterCaps) -> Result<(), String> {
    if p.head_dim > MAX_D {
        return Err(format!(
            "the fused backward kernels (tiled_bwd_*.wgsl) hold at most D = {MAX_D} columns per \
             staged row (got --head-dim {})",
            p.head_dim
        ));
    }
    // Two bf16 elements a u32 word: the prefetch and the staging take every row to start at an
    // even element (shaders/tiled_bwd_common.wgsl).
    if p.dtype == crate::problem::DType::BF16 && p.head_dim % 2 == 1 {
        return Err(format!(
            "the fused backward reads bf16 rows as u32 pairs, so D must be even (D={})",
            p.head_dim
        ));
    }
    Tile::for_problem(p, caps).map(|_| ())
}

/// (visited BT x BT tiles per head, their (row, key) pairs per head).
fn visited(p: &Problem, bt: u64) -> (u64, u64) {
    let n = p.seq as u64;
    let m = p.kv_seq as u64;
    let (mut tiles, mut pairs) = (0, 0);
    for qb in 0..n.div_ceil(bt) {
        let rows = bt.min(n - qb * bt);
        // Key blocks up to the causal diagonal of the block's last row (all of M without causal).
        let keys = p.keys_for_row(n.min((qb + 1) * bt) - 1);
        for kb in 0..keys.div_ceil(bt) {
            tiles += 1;
            pairs += rows * bt.min(m - kb * bt);
        }
    }
    (tiles, pairs)
}

/// Loop iterations per walked key (dQ) or query row (dK/dV) of the fused backward passes as Mesa's
/// llvmpipe counts them, measured at D = 32 like the forward's (tiled.rs, `LOOPS_PER_KEY`; the
/// D = 64 passes need more workgroup storage than lavapipe has), scaled by D / 32 above it.
const BWD_LOOPS_PER_ROW_D32: [f64; 2] = [65535.0 / 48884.0, 65535.0 / 49088.0];

/// An upper bound of the loop iterations of the fused backward pass `which` (0: dQ, 1: dK/dV)
/// on tile `t` walking `rows` keys or query rows.
fn bwd_loops(t: Tile, d: u32, rows: u64, which: usize) -> u64 {
    (t.loops_per_row(which, d) * 1.1 * rows as f64).ceil() as u64 + 64
}

/// `bwd_dot`: `delta` = rowsum(dO ∘ O).
pub fn bwd_dot(p: &Problem, [o, g, delta]: [&str; 3], caps: &AdapterCaps) -> Dispatch {
    let rows = p.bh() * p.seq as u64;
    Dispatch {
        name: "bwd_dot".into(),
        phase: Phase::Backward,
        saved: vec![],
        shader: kernel!("tiled_bwd_dot.wgsl", Storage::of(p.dtype), None),
        entry: "main",
        overrides: vec![],
        params: Params::of(p),
        bindings: vec![
            bind(o, Access::Read),
            bind(g, Access::Read),
            bind(delta, Access::ReadWrite),
        ],
        // 4 rows per workgroup of 64 threads (tiled_bwd_dot.wgsl).
        workgroups: grid_2d(rows.div_ceil(4), caps.max_workgroups_per_dimension),
        reads_bytes: 2 * p.qkv_bytes(),
        writes_bytes: rows * 4,
        flops: 2 * p.qkv_elems(),
        // A row's D columns in steps of its lanes, and the lanes' reduction.
        loop_iters: 2 * (p.head_dim as u64 + 2),
        note: format!("{delta} = rowsum(dO ∘ O), FlashAttention-2's D"),
    }
}

fn overrides(p: &Problem) -> Vec<(String, f64)> {
    vec![("HD".into(), p.head_dim as f64)]
}

/// The fused backward kernels' bindings (these and tiled_coop_bwd.rs's): Q, K, V, dO, L, D, the
/// gradients `outs`, then the mask.
pub(crate) fn bindings(p: &Problem, outs: &[&str]) -> Vec<crate::plan::BindingDecl> {
    let mut b = vec![
        bind("Q", Access::Read),
        bind("K", Access::Read),
        bind("V", Access::Read),
        bind("dO", Access::Read),
        bind("L", Access::Read),
        bind("Dl", Access::Read),
    ];
    b.extend(outs.iter().map(|o| bind(o, Access::ReadWrite)));
    with_mask(p, b)
}

/// The fused kernels: which one, and what differs between them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fused {
    /// dK, dV: a workgroup per 32 keys walks the query blocks.
    Kv,
    /// dK, dV and dQ (`--bwd-dq atomic`): `Kv`, adding each block's dS·K into an f32 dQ with
    /// float atomics (the narrow 32 x 32 tiles only).
    KvDq,
    /// dQ: a workgroup per 32 rows walks the key blocks.
    Q,
}

/// `bwd_kv`: dK and dV, one workgroup per 32 keys of a head.
pub fn bwd_kv(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    fused(p, caps, Fused::Kv)
}

/// `bwd_q`: dQ, one workgroup per 32 query rows of a head.
pub fn bwd_q(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    fused(p, caps, Fused::Q)
}

/// Why `--bwd-dq atomic` (one pass: dQ added into an f32 accumulator by the dK/dV pass) cannot
/// run `p` here, if it cannot: it needs float atomics (wgpu's SHADER_FLOAT32_ATOMIC: Vulkan with
/// VK_EXT_shader_atomic_float, Metal; no browser or GL) and a narrow 32 x 32 tile (the chunked
/// and small tiles re-stage K, whose whole rows the dQ product needs).
pub fn check_dq_atomic(p: &Problem, caps: &AdapterCaps) -> Result<(), String> {
    if !caps.float32_atomics {
        return Err(format!(
            "--bwd-dq atomic adds dQ with float atomics (SHADER_FLOAT32_ATOMIC), which this \
             adapter ({}) does not offer; the default --bwd-dq pass runs everywhere",
            caps.backend
        ));
    }
    let t = Tile::for_problem(p, caps)?;
    if t.chunked() || t.wide() {
        return Err(format!(
            "--bwd-dq atomic runs on the fused backward's 32 x 32 tiles with whole rows staged \
             (D <= 64; f16/bf16 D <= 128 where they fit), not on the {} x {} tile{} this problem \
             takes at D = {} here",
            t.bt(),
            t.bt(),
            if t.chunked() {
                " walking D in chunks"
            } else {
                ""
            },
            p.head_dim
        ));
    }
    Ok(())
}

/// `bwd_kv` of `--bwd-dq atomic`: dK and dV, and each block's dS·K added into `dQacc` (f32).
pub fn bwd_kv_dq(p: &Problem, caps: &AdapterCaps) -> Result<Dispatch, String> {
    check_dq_atomic(p, caps)?;
    fused(p, caps, Fused::KvDq)
}

/// `dq_zero` of `--bwd-dq atomic`: the f32 accumulator `acc` (BH x N x D) cleared.
pub fn dq_zero(p: &Problem, acc: &str, caps: &AdapterCaps) -> Dispatch {
    let elems = p.bh() * p.seq as u64 * p.head_dim as u64;
    Dispatch {
        name: "dq_zero".into(),
        phase: Phase::Backward,
        saved: vec![],
        shader: kernel!("tiled_bwd_dq_zero.wgsl", Storage::F32, None),
        entry: "main",
        overrides: vec![],
        params: Params::of(p),
        bindings: vec![bind(acc, Access::ReadWrite)],
        workgroups: super::ew_grid(elems, caps),
        reads_bytes: 0,
        writes_bytes: elems * 4,
        flops: 0,
        loop_iters: 0,
        note: "the f32 dQ accumulator of --bwd-dq atomic cleared".into(),
    }
}

/// `dq_out` of `--bwd-dq atomic`: the f32 accumulator `acc` rounded into `dq` in the storage
/// dtype, bound as the fused passes bind it (`math`'s `to_dtype`, shaders/narrow.wgsl).
pub fn dq_out(p: &Problem, [acc, dq]: [&str; 2], caps: &AdapterCaps) -> Dispatch {
    let mut d = super::narrow::to_dtype(p, storage(p), Params::of(p), [acc, dq], caps);
    d.name = "dq_out".into();
    d.phase = Phase::Backward;
    d
}

/// The composed kernel of pass `which` at width `w`.
fn shader(which: Fused, t: Tile, st: Storage, slot: Option<u32>, drop: bool) -> Shader {
    // One kernel family per tile kind: its entry files (dK/dV, dQ) and shared tile code; the tile
    // file (the last part) sets the widths. Each arm composes the pass `which` asks for.
    macro_rules! k {
        ($kv:literal, $q:literal, $common:literal, $width:literal) => {
            match which {
                // (KvDq only reaches the narrow tiles: check_dq_atomic.)
                Fused::Kv | Fused::KvDq => kernel!(
                    $kv + $common + "tiled_bwd_kv_out.wgsl" + "tiled_bwd_lib.wgsl" + $width,
                    st,
                    slot,
                    dropout = drop
                ),
                Fused::Q => kernel!(
                    $q + $common + "tiled_bwd_q_out.wgsl" + "tiled_bwd_lib.wgsl" + $width,
                    st,
                    slot,
                    dropout = drop
                ),
            }
        };
    }
    // The 32 x 32 tiles with whole rows staged, with D in two chunks, and the small tiles.
    macro_rules! narrow {
        ($width:literal) => {
            match which {
                // dQ's hook: a no-op, or the atomic dQ of `--bwd-dq atomic`.
                Fused::Kv => kernel!(
                    "tiled_bwd_kv.wgsl"
                        + "tiled_bwd_common.wgsl"
                        + "tiled_bwd_kv_out.wgsl"
                        + "tiled_bwd_lib.wgsl"
                        + "tiled_bwd_kv_nodq.wgsl"
                        + $width,
                    st,
                    slot,
                    dropout = drop
                ),
                Fused::KvDq => kernel!(
                    "tiled_bwd_kv.wgsl"
                        + "tiled_bwd_common.wgsl"
                        + "tiled_bwd_kv_out.wgsl"
                        + "tiled_bwd_lib.wgsl"
                        + "tiled_bwd_kv_dq.wgsl"
                        + $width,
                    st,
                    slot,
                    dropout = drop
                ),
                Fused::Q => k!(
                    "tiled_bwd_kv.wgsl",
                    "tiled_bwd_q.wgsl",
                    "tiled_bwd_common.wgsl",
                    $width
                ),
            }
        };
    }
    macro_rules! chunked {
        ($width:literal) => {
            k!(
                "tiled_bwd_chunk_kv.wgsl",
                "tiled_bwd_chunk_q.wgsl",
                "tiled_bwd_common.wgsl",
                $width
            )
        };
    }
    macro_rules! wide {
        ($width:literal) => {
            k!(
                "tiled_bwd_wide_kv.wgsl",
                "tiled_bwd_wide_q.wgsl",
                "tiled_bwd_wide.wgsl",
                $width
            )
        };
    }
    match t {
        Tile::D32 => narrow!("tiled_bwd_d32.wgsl"),
        Tile::D64 => narrow!("tiled_bwd_d64.wgsl"),
        Tile::D64H => narrow!("tiled_bwd_d64h.wgsl"),
        Tile::D80H => narrow!("tiled_bwd_d80h.wgsl"),
        Tile::D128H => narrow!("tiled_bwd_d128h.wgsl"),
        Tile::D64C => chunked!("tiled_bwd_d64c.wgsl"),
        Tile::D128C => chunked!("tiled_bwd_d128c.wgsl"),
        Tile::D64B8 => wide!("tiled_bwd_d64_b8.wgsl"),
        Tile::D128B16 => wide!("tiled_bwd_d128_b16.wgsl"),
        Tile::D128B8 => wide!("tiled_bwd_d128_b8.wgsl"),
        Tile::D256B8 => wide!("tiled_bwd_d256_b8.wgsl"),
        Tile::D256B4 => wide!("tiled_bwd_d256_b4.wgsl"),
        Tile::D256H => chunked!("tiled_bwd_d256h.wgsl"),
        Tile::D256C => chunked!("tiled_bwd_d256c.wgsl"),
    }
}

/// How the fused passes bind Q, K, V, dO and the gradients: f16 with an even D as u32 words of two
/// halves (dtype_f16x2.wgsl), as bf16 is bound, rather than as WGSL f16 elements: on the H100 the
/// same kernels ran bf16's words 1.54x faster than f16's halves at D = 64 and 1.65x at D = 128
/// (results/EXPERIMENTS.md, v44-bwd), and f16 as words then took 3574.1 µs against 5508.9 at
/// D = 64 and 6712.8 against 11224.0 at D = 128 (B8 H16 N1024 causal, v45-ab).
fn storage(p: &Problem) -> Storage {
    match p.dtype {
        crate::problem::DType::F16 if p.head_dim.is_multiple_of(2) => Storage::F16x2,
        d => Storage::of(d),
    }
}

fn fused(p: &Problem, caps: &AdapterCaps, which: Fused) -> Result<Dispatch, String> {
    let n = p.seq as u64;
    let d = p.head_dim as u64;
    let e = p.dtype.bytes();
    let bh = p.bh();
    let tile = Tile::for_problem(p, caps)?;
    let bt = tile.bt();
    let (tiles, pairs) = visited(p, bt);
    let st = storage(p);
    let drop = p.dropout().is_some();
    let mask = if p.mask.bias.is_some() {
        bh * pairs * 4
    } else {
        0
    };
    let walk = if p.causal {
        match which {
            Fused::Kv | Fused::KvDq => " from the diagonal",
            Fused::Q => " up to the diagonal",
        }
    } else {
        ""
    };
    let kv = p.kv_bytes();
    // bwd_kv: a workgroup per BT keys of a K/V head (walking its group's query heads); bwd_q: per
    // BT rows of a query head.
    let heads = match which {
        Fused::Kv | Fused::KvDq => p.batch as u64 * p.kv_heads as u64,
        Fused::Q => bh,
    };
    let threads = tile.threads();
    let (name, b, reads, writes, products, note) = match which {
        Fused::Kv => (
            "bwd_kv",
            bindings(p, &["dK", "dV"]),
            // K and V once; per visited tile BT rows of Q and dO, with L and D.
            2 * kv + bh * tiles * bt * (2 * d * e + 8),
            2 * kv,
            4,
            format!(
                "dK, dV: a workgroup of {threads} threads per {bt} keys walks the query blocks\
                 {walk}; S, P, dP, dS recomputed on chip from Q, K, V, dO, L, D"
            ),
        ),
        Fused::KvDq => (
            "bwd_kv",
            bindings(p, &["dK", "dV", "dQacc"]),
            // bwd_kv's, and per visited tile BT rows x D of dQ added (an f32 read and write).
            2 * kv + bh * tiles * bt * (2 * d * e + 8) + bh * tiles * bt * d * 4,
            2 * kv + bh * tiles * bt * d * 4,
            5,
            format!(
                "dK, dV and dQ (--bwd-dq atomic): a workgroup of {threads} threads per {bt} keys \
                 walks the query blocks{walk}; S, P, dP, dS recomputed on chip, each block's dS·K \
                 added into the f32 dQ with float atomics (no dQ pass)"
            ),
        ),
        Fused::Q => (
            "bwd_q",
            bindings(p, &["dQ"]),
            // Q, dO, L, D once; per visited tile BT keys of K and V.
            2 * p.qkv_bytes() + bh * n * 8 + bh * tiles * bt * 2 * d * e,
            p.qkv_bytes(),
            3,
            format!(
                "dQ: a workgroup of {threads} threads per {bt} rows walks the key blocks{walk}; \
                 S, P, dP, dS recomputed on chip"
            ),
        ),
    };
    let shader = shader(which, tile, st, mask_slot(&b), drop);
    Ok(Dispatch {
        name: name.into(),
        phase: Phase::Backward,
        saved: vec![],
        shader,
        entry: "main",
        overrides: overrides(p),
        params: Params::of(p),
        bindings: b,
        workgroups: [
            match which {
                Fused::Kv | Fused::KvDq => {
                    check_grid("M / BT key blocks", (p.kv_seq as u64).div_ceil(bt), caps)?
                }
                Fused::Q => check_grid("N / BT row blocks", n.div_ceil(bt), caps)?,
            },
            check_grid("B*H (B*Hkv for bwd_kv)", heads, caps)?,
            1,
        ],
        reads_bytes: reads + mask,
        writes_bytes: writes,
        flops: bh * pairs * d * 2 * products,
        // dQ walks the M keys; dK/dV the N query rows of each of the group's heads.
        loop_iters: match which {
            Fused::Q => bwd_loops(tile, p.head_dim, p.kv_seq as u64, 0),
            Fused::Kv | Fused::KvDq => bwd_loops(tile, p.head_dim, p.group() as u64 * n, 1),
        },
        note,
    })
}
