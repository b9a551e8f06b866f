// tiled_coop_vk_shapes.rs — the builds of shaders/tiled_coop_vk.comp (the `tiled-coop-vk`
// forward) and shaders/tiled_coop_vk_bwd.comp (its backward passes), one per head dimension:
// included both by build.rs, which compiles them, and by src/kernels/tiled_coop_vk.rs, which picks
// one, so that the two cannot disagree.

/// One build of the forward at one head dimension and one ROWS (16-row tiles a subgroup): keys a
/// block (BC), whether the next block is loaded into registers while this one is computed
/// (PREFETCH), whether it has training builds (LSE: also writes L), which only a head
/// dimension with a backward build (BACKWARD_DEVICE) needs, the 32-wide subgroups a workgroup
/// (4, or 8: WG = 256 invocations, BR = 16 ROWS x subgroups rows), whether Q's rows are
/// staged in workgroup memory (QS) instead of held as A matrices in registers, and whether the
/// online softmax is lazy (TAU = 8: a row's maximum moves only when a block's exceeds it by more
/// than 2^8, and O is rescaled only in a block where some row of the subgroup moved; TAU = 0: the
/// classic step, O rescaled every block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardShape {
    pub d: u32,
    pub rows: u32,
    pub bc: u32,
    pub prefetch: bool,
    pub training: bool,
    pub subgroups: u32,
    pub stage_q: bool,
    pub lazy: bool,
}

impl ForwardShape {
    /// Workgroup storage: K and V staged, 2 x BC x (D + 8) f16, and with QS Q's BR x (D + 8)
    /// (the kernel's header).
    pub const fn storage(&self) -> u64 {
        let rows = 2 * self.bc + if self.stage_q { self.br() } else { 0 };
        rows as u64 * (self.d as u64 + 8) * 2
    }

    /// Query rows a workgroup: 16 a row tile, ROWS tiles a subgroup.
    pub const fn br(&self) -> u32 {
        16 * self.rows * self.subgroups
    }

    /// Invocations a workgroup (the kernel's WG).
    pub const fn invocations(&self) -> u32 {
        32 * self.subgroups
    }

    /// This build with the lazy online softmax.
    pub const fn lazy(self) -> ForwardShape {
        ForwardShape { lazy: true, ..self }
    }

    /// The kernel's lazy-rescale threshold TAU (base 2): 8 for a lazy build, 0 otherwise.
    pub const fn tau(&self) -> u32 {
        if self.lazy {
            8
        } else {
            0
        }
    }

    /// The module's name (build.rs adds `_emu` to the emulated build's): bf16 or f16 storage.
    pub fn module(&self, bf16: bool, lse: bool, options: &str) -> String {
        format!(
            "tiled_coop_vk{}_d{}_b{}{}_r{}{}{}{}{}{options}",
            dtype_tag(bf16),
            self.d,
            self.bc,
            if self.prefetch { "" } else { "_np" },
            self.rows,
            if self.subgroups == 4 { String::new() } else { format!("_sg{}", self.subgroups) },
            if self.stage_q { "_qs" } else { "" },
            if self.lazy { "_lazy" } else { "" },
            if lse { "_lse" } else { "" }
        )
    }
}

/// The device builds (NVIDIA's 48 KiB of workgroup memory), none prefetching the next block:
/// D = 64 with blocks of 32 keys, and with two row tiles a subgroup (long sequences) blocks of 64;
/// D = 128 with blocks of 32; D = 256 with blocks of 16 (2 x 64 x 264 f16 = 67584 bytes of
/// prefetch would not fit, and O and Q alone take 192 registers a lane there). Measured on the
/// H100 at B8 H16 causal f16 (results/EXPERIMENTS.md, v41-coop-vk-wide, v45-ab, v46-ab, v48-ab):
/// D = 64 N1024 143.8 µs with blocks of 32 against 170.7 with 64, and 138.5 without prefetch
/// against 144.1 with it; two row tiles at N4096 1507.0 without prefetch against 1750.0 with it
/// (and 1768.4 with blocks of 32); D = 128 282.0 µs with blocks of 32 against 388.0 with 64 (and
/// 307.3 with 16), and 255.3 without prefetch against 283.0 with it; D = 256 753.9 µs without
/// prefetch against 1190.1 with it, and 493.0 with blocks of 16 against 744.8 with 32. The
/// register prefetch costs more in occupancy than it hides in latency at every D.
pub const FORWARD_DEVICE: [ForwardShape; 4] = [
    ForwardShape { d: 64, rows: 1, bc: 32, prefetch: false, training: true, subgroups: 4, stage_q: false, lazy: false },
    ForwardShape { d: 64, rows: 2, bc: 64, prefetch: false, training: true, subgroups: 4, stage_q: false, lazy: false },
    ForwardShape { d: 128, rows: 1, bc: 32, prefetch: false, training: true, subgroups: 4, stage_q: false, lazy: false },
    ForwardShape { d: 256, rows: 1, bc: 16, prefetch: false, training: true, subgroups: 4, stage_q: false, lazy: false },
];

/// The emulated builds (the tests', on lavapipe's 32 KiB beside the emulation's 8704 bytes, 17408
/// with eight subgroups): the device's shapes, which all fit there since D = 256 takes blocks of
/// 16 (tests/coop_vk.rs, `workgroup_memory_is_read_from_the_spirv`, checks both), then shapes no
/// device build has yet, which [`shape`](crate::kernels::tiled_coop_vk::shape) never picks (it
/// takes the first of a (D, ROWS)) and the tests run by name, so that an A/B build (one edit of
/// FORWARD_DEVICE) runs logic CI has checked: D = 64 and 128 with eight subgroups a workgroup,
/// D = 64 with Q staged in workgroup memory (at D = 128 that would not fit lavapipe's 32 KiB;
/// the code is the same at every D), and the lazy online softmax (`lazy`) at D = 64, 128 and 256
/// (written for the v49 A/B, not yet measured on a GPU: results/EXPERIMENTS.md).
/// A device shape that does not fit lavapipe needs an entry of its own here, as BACKWARD_EMULATED
/// has.
pub const FORWARD_EMULATED: [ForwardShape; 10] = [
    FORWARD_DEVICE[0],
    FORWARD_DEVICE[1],
    FORWARD_DEVICE[2],
    FORWARD_DEVICE[3],
    ForwardShape { d: 64, rows: 1, bc: 32, prefetch: true, training: true, subgroups: 8, stage_q: false, lazy: false },
    ForwardShape { d: 128, rows: 1, bc: 16, prefetch: true, training: true, subgroups: 8, stage_q: false, lazy: false },
    ForwardShape { d: 64, rows: 1, bc: 32, prefetch: true, training: true, subgroups: 4, stage_q: true, lazy: false },
    FORWARD_DEVICE[0].lazy(),
    FORWARD_DEVICE[2].lazy(),
    FORWARD_DEVICE[3].lazy(),
];

/// One build of the backward passes at one head dimension: rows (bwd_kv) or keys (bwd_q) a staged
/// block (BLOCK), whether the next block is prefetched into registers (PREFETCH), the parts the
/// gradients' columns are split in, one a workgroup, each recomputing S and dP (SPLIT), and
/// whether a subgroup holds its K and V (bwd_kv) or Q and dO (bwd_q) as A matrices in registers
/// or loads them at each use (HOLD). A workgroup owns 64 keys (bwd_kv) or 64 rows (bwd_q)
/// whatever the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackwardShape {
    pub d: u32,
    pub block: u32,
    pub prefetch: bool,
    pub split: u32,
    pub hold: bool,
}

impl BackwardShape {
    /// Workgroup storage: two staged f16 tiles of BLOCK x (D + 8), and in bwd_kv the rows' L and
    /// D (2 x BLOCK f32).
    pub const fn storage(&self, kv: bool) -> u64 {
        2 * self.block as u64 * (self.d as u64 + 8) * 2 + if kv { 2 * self.block as u64 * 4 } else { 0 }
    }

    /// The module's name (build.rs adds `_emu` to the emulated build's): bf16 or f16 storage.
    pub fn module(&self, bf16: bool, kv: bool, options: &str) -> String {
        format!(
            "tiled_coop_vk_bwd{}_d{}_b{}{}{}{}_{}{options}",
            dtype_tag(bf16),
            self.d,
            self.block,
            if self.prefetch { "" } else { "_np" },
            if self.split > 1 { format!("_s{}", self.split) } else { String::new() },
            if self.hold { "" } else { "_nh" },
            if kv { "kv" } else { "q" }
        )
    }
}

/// The device builds of the backward: D = 64 with blocks of 64 prefetched; D = 128 with blocks of
/// 32 prefetched (K and V as A matrices and dK, dV as accumulators take 192 registers a lane in
/// bwd_kv there; on the H100 at B8 H16 N1024 causal f16, bwd_kv 404.1 and bwd_q 298.7 µs against
/// 459.0 and 353.8 with blocks of 64 and no prefetch: results/EXPERIMENTS.md, v41-coop-vk-wide).
/// D = 256 (those four alone would take 384 there) splits dK, dV and dQ into two column halves,
/// a workgroup each, and loads K and V (Q and dO) at each use: S and dP are computed twice, and
/// its blocks of 32 are not prefetched; not yet run on a GPU.
pub const BACKWARD_DEVICE: [BackwardShape; 3] = [
    BackwardShape { d: 64, block: 64, prefetch: true, split: 1, hold: true },
    BackwardShape { d: 128, block: 32, prefetch: true, split: 1, hold: true },
    BackwardShape { d: 256, block: 32, prefetch: false, split: 2, hold: false },
];

/// The emulated builds of the backward (lavapipe's 32 KiB beside the emulation's 8704 bytes): the
/// device's, but at D = 256 half its block (the device's would not fit).
pub const BACKWARD_EMULATED: [BackwardShape; 3] = [
    BackwardShape { d: 64, block: 64, prefetch: true, split: 1, hold: true },
    BackwardShape { d: 128, block: 32, prefetch: true, split: 1, hold: true },
    BackwardShape { d: 256, block: 16, prefetch: false, split: 2, hold: false },
];

/// The module names' storage tag: `_bf16` for the bf16 builds, nothing for the f16 ones.
pub fn dtype_tag(bf16: bool) -> &'static str {
    if bf16 {
        "_bf16"
    } else {
        ""
    }
}

/// The head dimensions `unfused-coop`'s two products (shaders/gemm_coop_vk.comp) are compiled
/// for, in f16 and in bf16.
pub const GEMM_HEAD_DIMS: [u32; 3] = [64, 128, 256];

/// The module name of one build of those products (build.rs adds `_emu` to the emulated
/// build's): S = Q·Kᵀ (`qk`) or O = P·V, bf16 or f16, at head dimension `d`, with the scores in
/// f32 or (`half`, `_sh`) in the storage dtype.
pub fn gemm_module(bf16: bool, qk: bool, half: bool, d: u32) -> String {
    format!(
        "gemm_coop_vk{}_{}{}_d{d}",
        dtype_tag(bf16),
        if qk { "qk" } else { "pv" },
        if half { "_sh" } else { "" }
    )
}

/// The module name of `probe`'s matrix-unit peak (shaders/probe_coop.comp; build.rs adds `_emu`
/// to the emulated build's): f16 or bf16 operands (BF16 = 1).
pub fn probe_coop_module(bf16: bool) -> String {
    format!("probe_coop{}", dtype_tag(bf16))
}

/// The module name of the element-layout probe (shaders/coop_layout_probe.comp; build.rs adds
/// `_emu` to the emulated build's): of the f16 operands, or of the bf16 A operand (BF16 = 1, a
/// device build only).
pub fn layout_probe_module(bf16: bool) -> String {
    format!("coop_layout_probe{}", dtype_tag(bf16))
}

/// One build of the forward on VK_NV_cooperative_matrix2 (shaders/tiled_cm2.comp) at one head
/// dimension: BR query rows a workgroup of WG invocations, BC keys a block, and how the row sums
/// are taken (ROWSUM_MMA: P times a block of ones on the matrix units, else a row reduction).
/// Workgroup-scope matrices: the driver stages and holds them, so no storage is counted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cm2Shape {
    pub d: u32,
    pub br: u32,
    pub bc: u32,
    pub wg: u32,
    pub rowsum_mma: bool,
}

impl Cm2Shape {
    /// The module's name: bf16 or f16 storage, training (`_lse`), mask and dropout options.
    pub fn module(&self, bf16: bool, lse: bool, options: &str) -> String {
        format!(
            "tiled_cm2{}_d{}_r{}_b{}_w{}{}{}{options}",
            dtype_tag(bf16),
            self.d,
            self.br,
            self.bc,
            self.wg,
            if self.rowsum_mma { "" } else { "_rr" },
            if lse { "_lse" } else { "" }
        )
    }
}

/// The device builds on VK_NV_cooperative_matrix2 (no emulated twin: lavapipe has no such
/// matrices; the builds are checked by spirv-val in the tests and run on the GPU only). Measured
/// on the H100 at B8 H16 N1024 causal f16 (results/EXPERIMENTS.md, v44-cm2): 256 invocations at
/// D = 128 (501.8 µs against 603.2 with 128) and D = 256 (1146.3 against 1764.2), 128 at D = 64
/// (301.7 against 372.6); BR = 128 and row sums by reduction lost at each D.
pub const CM2_DEVICE: [Cm2Shape; 3] = [
    Cm2Shape { d: 64, br: 64, bc: 64, wg: 128, rowsum_mma: true },
    Cm2Shape { d: 128, br: 64, bc: 64, wg: 256, rowsum_mma: true },
    Cm2Shape { d: 256, br: 64, bc: 32, wg: 256, rowsum_mma: true },
];

/// One build of the backward passes on VK_NV_cooperative_matrix2 (shaders/tiled_cm2_bwd.comp) at
/// one head dimension: BQ query rows (bwd_q: a workgroup's own; bwd_kv: a walked block) and BK
/// keys (bwd_kv: a workgroup's own; bwd_q: a walked block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cm2BwdShape {
    pub d: u32,
    pub bq: u32,
    pub bk: u32,
}

impl Cm2BwdShape {
    /// The module's name: bf16 or f16 storage, the pass (`kv` or `q`), mask and dropout options.
    pub fn module(&self, bf16: bool, kv: bool, options: &str) -> String {
        format!(
            "tiled_cm2_bwd{}_d{}_q{}_k{}_{}{options}",
            dtype_tag(bf16),
            self.d,
            self.bq,
            self.bk,
            if kv { "kv" } else { "q" }
        )
    }
}

/// The device builds of the backward on VK_NV_cooperative_matrix2 (first guesses: the
/// workgroup's own K, V, dK and dV (bwd_kv) or Q, dO and dQ (bwd_q) are held as workgroup-scope
/// matrices, so the blocks shrink as D grows).
pub const CM2_BWD_DEVICE: [Cm2BwdShape; 3] = [
    Cm2BwdShape { d: 64, bq: 64, bk: 64 },
    Cm2BwdShape { d: 128, bq: 64, bk: 32 },
    Cm2BwdShape { d: 256, bq: 32, bk: 32 },
];
