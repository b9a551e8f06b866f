//! `tiled` and `tiled-coop`: one fused dispatch, FlashAttention-2 style. The
//! kernels and their tile facts are units of their own (`kernels/tiled.rs` for the register-tiled
//! and row-per-thread kernels, `kernels/tiled_coop.rs` for cooperative matrices); this file checks
//! what each variant needs of the adapter, picks the tile and declares the plan.

use crate::gpu::AdapterCaps;
use crate::kernels::tiled::attention;
pub use crate::kernels::tiled::{all_choices, candidates, choose, config_for, default_choice, BC};
use crate::kernels::tiled_coop_vk::{self, Build, ForwardShape};
use crate::kernels::{buf, check_binding, tiled_bwd, tiled_coop, tiled_coop_bwd};
use crate::plan::{save, Dispatch, Plan, Role};
use crate::problem::Problem;
pub use crate::tile::{TileChoice, TileConfig, TileKernel, TileRequest, TileUsed, RT_PART_STORAGE};

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
    check_binding("Q ([B, H, N, D])", p.qkv_bytes(), caps)?;
    let d = attention(p, caps, &cfg)?;
    let mut plan = fused_plan(p, p.qkv_bytes(), d, cfg.storage_bytes(), &cfg, vec![]);
    plan.tile = Some(TileUsed { choice, source });
    training(plan, p, caps, Backward::Tiled)
}

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
    if p.head_dim > tiled_coop::MAX_HEAD_DIM || !p.head_dim.is_multiple_of(16) {
        return Err(format!(
            "the cooperative-matrix kernel reads Q, K and V in 16 x 16 tiles and keeps at most 16 \
             of them a row: D must be a multiple of 16 up to {} (got --head-dim {})",
            tiled_coop::MAX_HEAD_DIM,
            p.head_dim
        ));
    }
    let tile = tiled_coop::tile(p);
    let storage = tile.storage_bytes();
    if storage > caps.max_workgroup_storage as u64 {
        return Err(format!(
            "needs {storage} bytes of workgroup storage at D={} (key blocks of {}), this adapter \
             allows {}",
            p.head_dim, tile.bc, caps.max_workgroup_storage
        ));
    }
    let d = tiled_coop::attention(p, caps)?;
    let plan = fused_plan(
        p,
        tiled_coop::input_bytes(p),
        d,
        storage,
        &tile,
        tiled_coop::overrides(p),
    );
    training(plan, p, caps, Backward::Coop)
}

/// `tiled-coop-vk`: kernels/tiled_coop_vk.rs (the SPIR-V kernels with the softmax in registers,
/// forward and backward), one or two 16-row tiles a subgroup by N.
pub fn build_coop_vk(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    coop_vk_plan(p, caps, Build::Device, tiled_coop_vk::rows(p))
}

/// `tiled-coop-cm2`: the forward on VK_NV_cooperative_matrix2 (kernels/tiled_coop_vk.rs
/// `cm2_attention`, shaders/tiled_cm2.comp), and in training `tiled-coop-vk`'s backward passes
/// (or its own, [`CM2_BACKWARD`]).
pub fn build_coop_cm2(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    let shape = tiled_coop_vk::cm2_check(p, caps)?;
    let d = tiled_coop_vk::cm2_attention(p, caps, &shape)?;
    let mut plan = fused_plan(
        p,
        tiled_coop::input_bytes(p),
        d,
        0,
        &tiled_coop_vk::cm2_tile(&shape),
        vec![],
    );
    plan.notes.push(
        "workgroup-scope matrices (VK_NV_cooperative_matrix2): the driver stages K and V in \
         workgroup memory of its own choosing, not counted here"
            .into(),
    );
    let bwd = if CM2_BACKWARD {
        Backward::Cm2
    } else {
        Backward::CoopVk(Build::Device)
    };
    training(plan, p, caps, bwd)
}

/// Whether `tiled-coop-cm2` trains with its own backward passes on VK_NV_cooperative_matrix2
/// (shaders/tiled_cm2_bwd.comp) or with `tiled-coop-vk`'s: the latter until the former has run
/// on a GPU (built and valid SPIR-V; no emulated twin checks its logic).
const CM2_BACKWARD: bool = false;

/// `tiled-coop-vk`'s kernels built on shaders/coopmat_emu.glsl: not a variant (it measures
/// nothing worth knowing), the tests' way to run the kernels' logic on lavapipe. With
/// `p.backward`, the training plan with the GLSL backward (kernels/tiled_coop_vk.rs `bwd_pass`),
/// emulated too.
/// `rows`: the kernel's ROWS (1 or 2 16-row tiles a subgroup).
pub fn build_coop_vk_emulated(p: &Problem, caps: &AdapterCaps, rows: u32) -> Result<Plan, String> {
    coop_vk_plan(p, caps, Build::Emulated, rows)
}

/// `tiled-coop-vk`'s emulated plan at `shape`, one of FORWARD_EMULATED: the tests' way to run an
/// emulated build the variant does not pick (eight subgroups a workgroup, an A/B candidate).
pub fn build_coop_vk_emulated_at(
    p: &Problem,
    caps: &AdapterCaps,
    shape: &ForwardShape,
) -> Result<Plan, String> {
    tiled_coop_vk::check(p, caps, Build::Emulated, shape.rows)?;
    tiled_coop_vk::storage_check(shape, Build::Emulated, caps)?;
    coop_vk_plan_at(p, caps, Build::Emulated, shape)
}

fn coop_vk_plan(p: &Problem, caps: &AdapterCaps, build: Build, rows: u32) -> Result<Plan, String> {
    let shape = tiled_coop_vk::check(p, caps, build, rows)?;
    coop_vk_plan_at(p, caps, build, &shape)
}

fn coop_vk_plan_at(
    p: &Problem,
    caps: &AdapterCaps,
    build: Build,
    shape: &ForwardShape,
) -> Result<Plan, String> {
    let d = tiled_coop_vk::attention(p, caps, build, shape)?;
    let mut plan = fused_plan(
        p,
        tiled_coop::input_bytes(p),
        d,
        tiled_coop_vk::storage(shape, build),
        &tiled_coop_vk::tile(shape),
        vec![],
    );
    if build == Build::Emulated {
        plan.variant = "tiled-coop-vk (emulated cooperative matrices)".into();
    }
    training(plan, p, caps, Backward::CoopVk(build))
}

/// Which fused backward a training plan gets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backward {
    /// kernels/tiled_bwd.rs (any dtype, scalar products).
    Tiled,
    /// kernels/tiled_coop_bwd.rs (f16, cooperative matrices).
    Coop,
    /// kernels/tiled_coop_vk.rs's passes (f16, SPIR-V, P and dS in registers), of this build.
    CoopVk(Build),
    /// kernels/tiled_coop_vk.rs's passes on VK_NV_cooperative_matrix2 (`cm2_bwd_pass`).
    Cm2,
}

/// In training mode (`--backward`), FlashAttention-2's backward after the forward (which then
/// also writes the row logsumexp L, shaders/tiled_lse.wgsl): `bwd_dot` (D = rowsum(dO ∘ O)),
/// `bwd_kv` (dK, dV) and `bwd_q` (dQ) from kernels/tiled_bwd.rs, or for `tiled-coop` from
/// kernels/tiled_coop_bwd.rs and for `tiled-coop-vk` from kernels/tiled_coop_vk.rs (their dO
/// padded like Q: the dQ kernels read whole 16-row tiles). The plan unchanged otherwise.
fn training(
    mut plan: Plan,
    p: &Problem,
    caps: &AdapterCaps,
    bwd: Backward,
) -> Result<Plan, String> {
    if !p.backward {
        return Ok(plan);
    }
    // `--bwd-dq atomic`: `tiled`'s one-pass backward (other backwards ignore it, as `--bwd-tile`).
    let dq_atomic = bwd == Backward::Tiled && p.bwd_dq_atomic;
    match bwd {
        // (`--bwd-dq atomic`'s own conditions: tiled_bwd::bwd_kv_dq.)
        Backward::Tiled => tiled_bwd::check(p, caps)?,
        Backward::Coop => tiled_coop_bwd::check(p, caps)?,
        Backward::CoopVk(build) => tiled_coop_vk::check_backward(p, caps, build)?,
        Backward::Cm2 => {
            tiled_coop_vk::cm2_bwd_shape(p.head_dim)?;
        }
    }
    let rows = p.bh() * p.seq as u64 * 4;
    // `split-kv` keeps L in inference too (its combine writes it).
    if plan.buffer("L").is_none() {
        plan.buffers.push(buf("L", rows, Role::Intermediate, false));
    }
    let do_bytes = match bwd {
        Backward::Tiled => p.qkv_bytes(),
        Backward::Coop | Backward::CoopVk(_) | Backward::Cm2 => tiled_coop::input_bytes(p),
    };
    plan.buffers.push(buf("dO", do_bytes, Role::Input, false));
    plan.buffers
        .push(buf("Dl", rows, Role::Intermediate, false));
    plan.buffers
        .push(buf("dQ", p.qkv_bytes(), Role::Output, false));
    if dq_atomic {
        let acc = p.bh() * p.seq as u64 * p.head_dim as u64 * 4;
        plan.buffers
            .push(buf("dQacc", acc, Role::Intermediate, false));
    }
    for g in ["dK", "dV"] {
        plan.buffers.push(buf(g, p.kv_bytes(), Role::Output, false));
    }
    let fwd = plan.dispatches.clone();
    let last = fwd
        .last()
        .map_or("attention", |d| d.name.as_str())
        .to_string();
    let saved = |b: &str| save(&fwd, b, &last);
    let mut inputs = vec![saved("Q"), saved("K"), saved("V"), saved("L")];
    if p.mask.bias.is_some() {
        inputs.push(saved(crate::kernels::MASK));
    }
    let dot = tiled_bwd::bwd_dot(p, ["O", "dO", "Dl"], caps).backward("bwd_dot", vec![saved("O")]);
    plan.dispatches.push(dot);
    inputs.push(save(&plan.dispatches, "Dl", "bwd_dot"));
    if bwd == Backward::Tiled {
        // The fused backward's tile (rows = keys per tile), chosen by workgroup memory or
        // `--bwd-tile`: recorded with the plan's other tile constants.
        let t = tiled_bwd::Tile::for_problem(p, caps)?;
        plan.config.push(("BWD_TILE".into(), t.bt() as f64));
        if t.chunked() {
            plan.config.push(("BWD_CHUNKED".into(), 1.0));
        }
        if dq_atomic {
            plan.config.push(("BWD_DQ_ATOMIC".into(), 1.0));
        }
    }
    if dq_atomic {
        // One pass (FlashAttention-2's): bwd_kv adds dQ into the f32 dQacc, cleared before it and
        // rounded into dQ after it; no bwd_q.
        let zero = tiled_bwd::dq_zero(p, "dQacc", caps).backward("dq_zero", vec![]);
        plan.dispatches.push(zero);
        let kv = tiled_bwd::bwd_kv_dq(p, caps)?;
        plan.dispatches.push(kv.backward("bwd_kv", inputs));
        let out = tiled_bwd::dq_out(p, ["dQacc", "dQ"], caps).backward("dq_out", vec![]);
        plan.dispatches.push(out);
    } else {
        let (kv, q) = match bwd {
            Backward::Tiled => (tiled_bwd::bwd_kv(p, caps)?, tiled_bwd::bwd_q(p, caps)?),
            Backward::Coop => (
                tiled_coop_bwd::bwd_kv(p, caps)?,
                tiled_coop_bwd::bwd_q(p, caps)?,
            ),
            Backward::CoopVk(build) => (
                tiled_coop_vk::bwd_pass(p, caps, build, true)?,
                tiled_coop_vk::bwd_pass(p, caps, build, false)?,
            ),
            Backward::Cm2 => (
                tiled_coop_vk::cm2_bwd_pass(p, caps, true)?,
                tiled_coop_vk::cm2_bwd_pass(p, caps, false)?,
            ),
        };
        plan.dispatches.push(kv.backward("bwd_kv", inputs.clone()));
        plan.dispatches.push(q.backward("bwd_q", inputs));
    }
    plan.grads = vec!["dQ".into(), "dK".into(), "dV".into()];
    plan.training_note = Some(
        "safe for training: the fused forward writes only O and L (the row logsumexp, BH x N \
         floats) and overwrites nothing; the backward recomputes P from Q, K and L instead of \
         saving N x N"
            .into(),
    );
    plan.notes.push(format!(
        "training: the forward keeps L ({rows} bytes) for the backward instead of P"
    ));
    Ok(plan)
}

/// `split-kv`: flash-decoding (kernels/split_kv.rs) for the decode regime only: N <= 16 query
/// rows and keys enough for several slices; refused otherwise with the reason (`auto` then
/// takes the next variant). Training adds `tiled`'s fused backward (the combine writes L).
pub fn build_split_kv(p: &Problem, caps: &AdapterCaps) -> Result<Plan, String> {
    use crate::kernels::split_kv::{self, MAX_ROWS};
    if p.seq > MAX_ROWS {
        return Err(format!(
            "split-KV is a decode kernel: N <= {MAX_ROWS} query rows (got N={}); with more rows \
             one workgroup per block of query rows (`tiled`) already launches B*H*N/64 of them",
            p.seq
        ));
    }
    let lay = split_kv::layout(p, caps)?;
    let (s, step) = (lay.splits, lay.step);
    if s < 2 {
        return Err(format!(
            "M={} keys make a single block of {step} for B*H*N = {} query rows: nothing to split \
             (`tiled` does the same in one pass)",
            p.kv_seq,
            p.bh() * p.seq as u64
        ));
    }
    check_binding("Q ([B, H, N, D])", p.qkv_bytes(), caps)?;
    let rows = p.bh() * p.seq as u64;
    let d = p.head_dim as u64;
    let mut buffers = vec![
        buf("Q", p.qkv_bytes(), Role::Input, false),
        buf("K", p.kv_bytes(), Role::Input, false),
        buf("V", p.kv_bytes(), Role::Input, false),
    ];
    if p.bias_bytes() > 0 {
        buffers.push(buf(
            crate::kernels::MASK,
            p.bias_bytes(),
            Role::Input,
            false,
        ));
    }
    buffers.push(buf("PO", rows * s * d * 4, Role::Intermediate, false));
    buffers.push(buf("PML", rows * s * 8, Role::Intermediate, false));
    buffers.push(buf("L", rows * 4, Role::Intermediate, false));
    buffers.push(buf("O", p.qkv_bytes(), Role::Output, false));
    let plan = Plan {
        variant: String::new(),
        buffers,
        dispatches: {
            let mut v = split_kv::split(p, caps)?;
            v.push(split_kv::combine(p, caps)?);
            v
        },
        output: "O".into(),
        config: vec![
            ("SPLITS".into(), s as f64),
            ("STEP".into(), step as f64),
            ("KW".into(), lay.kw as f64),
            ("UNROLL".into(), lay.unroll as f64),
            ("GROUP".into(), p.group() as f64),
        ],
        notes: vec![
            format!(
                "decode: {s} slices (blocks of {step} keys dealt round-robin) per query row and K/V \
                 head: {} workgroups, \
                 where one per block of 64 query rows would be {}",
                s * p.batch as u64 * p.kv_heads as u64 * p.seq as u64,
                p.bh() * (p.seq as u64).div_ceil(64)
            ),
            "the N x M score matrix never reaches device memory (the slices' partials do: \
             B*H*N*S*(D+2) floats)"
                .into(),
            "a row with no allowed key returns 0 (SDPA's convention)".into(),
        ],
        tile: None,
        grads: vec![],
        training_note: None,
    };
    training(plan, p, caps, Backward::Tiled)
}

/// Backward-compatible names of the cooperative-matrix kernel's facts.
pub use tiled_coop::{PAD_ROWS as COOP_PAD_ROWS, STORAGE as COOP_STORAGE};

/// The plan of one fused dispatch: Q (`input_bytes`, padded where the kernel reads past the end),
/// K and V (B*Hkv heads, the same padding), the mask bias, O; its config as result files record it.
fn fused_plan(
    p: &Problem,
    input_bytes: u64,
    attention: Dispatch,
    storage_bytes: u64,
    cfg: &TileConfig,
    extra_config: Vec<(String, f64)>,
) -> Plan {
    // K and V: B*Hkv heads (grouped-query attention), with the same padding as Q.
    let kv_bytes = p.kv_bytes() + input_bytes.saturating_sub(p.qkv_bytes());
    let mut buffers = vec![
        buf("Q", input_bytes, Role::Input, false),
        buf("K", kv_bytes, Role::Input, false),
        buf("V", kv_bytes, Role::Input, false),
    ];
    let mask_bytes = p.bias_bytes();
    if mask_bytes > 0 {
        buffers.push(buf(crate::kernels::MASK, mask_bytes, Role::Input, false));
    }
    buffers.push(buf("O", p.qkv_bytes(), Role::Output, false));
    let mut notes = vec![
        "the N x N score matrix never reaches device memory".to_string(),
        "a row with no allowed key returns 0 (SDPA's convention)".to_string(),
    ];
    if p.causal && mask_bytes > 0 {
        notes.push("causal AND explicit mask / key padding: their intersection".into());
    }
    let mut config = vec![
        ("register_tiled".into(), cfg.register_tiled() as u8 as f64),
        ("BR".into(), cfg.br as f64),
        ("BC".into(), cfg.bc as f64),
        ("D4".into(), cfg.d4 as f64),
        ("DP".into(), cfg.dp as f64),
        ("workgroup_storage_bytes".into(), storage_bytes as f64),
    ];
    config.extend(extra_config);
    Plan {
        variant: String::new(),
        buffers,
        dispatches: vec![attention],
        output: "O".into(),
        config,
        notes,
        tile: None,
        grads: vec![],
        training_note: None,
    }
}
