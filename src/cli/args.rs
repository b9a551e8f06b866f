//! The argument groups several subcommands share, defined once (clap `flatten`), and their
//! validation in one place. Each subcommand supplies its own defaults ([`Defaults`]), which its
//! `--help` states.

use std::path::PathBuf;

use clap::Args;

use attn_wgpu::gpu::runner::Schedule;
use attn_wgpu::gpu::AdapterSelection;
use attn_wgpu::problem::{CausalAlign, DType, Mode, Problem, ToleranceMode};
use attn_wgpu::tile::TileChoice;

use super::bad;

/// Which adapter, and how long to wait for it.
#[derive(Args)]
pub struct AdapterSel {
    /// vulkan, metal, dx12, gl or all (default: WGPU_BACKEND, else all).
    #[arg(long)]
    pub backend: Option<String>,
    /// Case-insensitive substring of the adapter name (default: WGPU_ADAPTER_NAME).
    #[arg(long)]
    pub adapter: Option<String>,
    /// Seconds to wait for submitted GPU work before giving up with an error naming what was in
    /// flight (exit 1): a hung GPU must not hang the tool.
    #[arg(long, allow_negative_numbers = true, default_value_t = 600.0)]
    pub gpu_timeout: f64,
}

/// The longest `--gpu-timeout`: a day.
pub const MAX_GPU_TIMEOUT: f64 = 86_400.0;

impl AdapterSel {
    pub fn selection(&self) -> AdapterSelection {
        AdapterSelection {
            backend: self.backend.clone(),
            name: self.adapter.clone(),
        }
    }

    /// The device-wait limit, checked (exit 2 outside 0.001 to [`MAX_GPU_TIMEOUT`] seconds: one
    /// that rounds to no wait, or one no clock holds, is no limit).
    pub fn timeout(&self) -> anyhow::Result<std::time::Duration> {
        if !(self.gpu_timeout.is_finite() && (0.001..=MAX_GPU_TIMEOUT).contains(&self.gpu_timeout))
        {
            return Err(bad(format!(
                "--gpu-timeout must be between 0.001 and {MAX_GPU_TIMEOUT} seconds (got {})",
                self.gpu_timeout
            )));
        }
        Ok(std::time::Duration::from_secs_f64(self.gpu_timeout))
    }

    /// Opens the selected adapter with these features and the wait limit.
    pub fn open(&self, wanted: wgpu::Features) -> anyhow::Result<attn_wgpu::gpu::Gpu> {
        let timeout = self.timeout()?;
        let mut gpu = attn_wgpu::device::open(&self.selection(), wanted)?;
        gpu.wait_timeout = timeout;
        Ok(gpu)
    }
}

/// A subcommand's defaults for the shared groups.
pub struct Defaults {
    pub batch: u32,
    pub heads: u32,
    pub head_dim: u32,
    pub warmup: u32,
    pub reps: u32,
}

/// The run shape: `run`'s and `adapters`' (also what `tune` defaults to).
pub const RUN: Defaults = Defaults {
    batch: 1,
    heads: 4,
    head_dim: 64,
    warmup: 3,
    reps: 20,
};
/// The default run sequence length (with [`RUN`]: the shape `adapters` checks variants against).
pub const RUN_SEQ: u32 = 256;

/// The shape of the problem except N (whose form differs: one length, or a list for `sweep`),
/// and what it computes.
#[derive(Args)]
pub struct ShapeArgs {
    /// B (default 1; `run`: taken from --q when given).
    #[arg(long, allow_negative_numbers = true)]
    pub batch: Option<u32>,
    /// H (default 4 for run and tune, 2 for sweep and explain; `run`: taken from --q when given).
    #[arg(long, allow_negative_numbers = true)]
    pub heads: Option<u32>,
    /// K/V heads Hkv (default H): grouped-query attention, H a multiple of Hkv; query head h
    /// reads K/V head h / (H / Hkv) (SDPA's enable_gqa=True); 1 is multi-query attention (`run`:
    /// taken from --k when given).
    #[arg(long, allow_negative_numbers = true)]
    pub kv_heads: Option<u32>,
    /// Keys M (default N): Q is [B, H, N, D], K and V [B, Hkv, M, D] (cross-attention, decode with
    /// a KV cache; `run`: taken from --k when given).
    #[arg(long, allow_negative_numbers = true)]
    pub kv_seq: Option<u32>,
    /// Head dimension D (default 64; `run`: taken from --q when given).
    #[arg(long, allow_negative_numbers = true)]
    pub head_dim: Option<u32>,
    /// Causal mask (the default). With --mask / --key-padding: their intersection. When N != M
    /// (--kv-seq) say where the diagonal sits: `--causal top-left` (SDPA's is_causal: key j in
    /// row i iff j <= i) or `--causal bottom-right` (causal_lower_right: j <= i + M - N, what
    /// FlashAttention and KV-cache decode use); plain --causal refuses to guess then.
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "ALIGN", overrides_with = "no_causal")]
    pub causal: Option<String>,
    /// No causal mask.
    #[arg(long)]
    pub no_causal: bool,
    /// Softmax scale (default 1/sqrt(D)).
    #[arg(long, allow_hyphen_values = true)]
    pub scale: Option<f32>,
    /// Storage dtype: f32, f16 or bf16 (default f32; `run`: the dtype of the --q/--k/--v files).
    #[arg(long)]
    pub dtype: Option<String>,
    /// Seed of the input generator (see docs/correctness.md: same seed, same bits everywhere).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
    pub seed: u64,
    /// How outputs are judged: `pytorch` (PyTorch's method: 4 x the error of a low-precision
    /// twin, with the dtype's default as a floor; the rule bench/torch_sdpa.py applies to
    /// PyTorch) or `strict` (attn-wgpu's fixed per-dtype tolerances). Both verdicts are reported.
    #[arg(long, default_value = "pytorch")]
    pub tolerance: String,
    /// Training mode: the forward in training mode, then the backward for a seeded random upstream
    /// gradient dO (`run`: or --do FILE); dQ, dK and dV validated against the f64 oracle, each
    /// pass timed, the saved tensors and the step's peak memory reported.
    #[arg(long)]
    pub backward: bool,
    /// Dropout on the attention probabilities after softmax, as SDPA's dropout_p: 0 <= P < 1
    /// (default 0: none, and no dropout work in any kernel). Kept ones are scaled by 1/(1-P);
    /// the keep mask is Philox4x32-10 of the seed over (b, h, i, j) (docs/training.md, "Dropout"), the
    /// same in every variant and in the f64 reference.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.0)]
    pub dropout: f64,
    /// train or eval (default: train with --backward, else eval). Dropout applies in both, as
    /// SDPA's does; eval with --dropout > 0 prints a warning saying what to pass instead.
    #[arg(long)]
    pub mode: Option<String>,
}

impl ShapeArgs {
    pub fn causal(&self) -> bool {
        !self.no_causal
    }

    /// `--tolerance`, parsed (exit 2 naming the value).
    pub fn tolerance(&self) -> anyhow::Result<ToleranceMode> {
        Ok(ToleranceMode::parse(&self.tolerance)?)
    }

    /// `--dtype`, parsed (exit 2 naming the value).
    pub fn dtype(&self) -> anyhow::Result<Option<DType>> {
        Ok(self.dtype.as_deref().map(DType::parse).transpose()?)
    }

    /// The problem of sequence length `seq` with this shape, `d`'s defaults for what is not
    /// given, validated (exit 2 naming the bad value).
    pub fn problem(&self, seq: u32, d: &Defaults) -> anyhow::Result<Problem> {
        let mut p = Problem::new(
            self.batch.unwrap_or(d.batch),
            self.heads.unwrap_or(d.heads),
            seq,
            self.head_dim.unwrap_or(d.head_dim),
            self.causal(),
            self.seed,
        );
        p.dtype = self.dtype()?.unwrap_or(DType::F32);
        p.tolerance = self.tolerance()?;
        p.kv_heads = self.kv_heads.unwrap_or(p.heads);
        p.kv_seq = self.kv_seq.unwrap_or(seq);
        self.align(&mut p)?;
        self.training(&mut p)?;
        if let Some(s) = self.scale {
            p.scale = s;
        }
        p.validate()?;
        Ok(p)
    }

    /// The causal alignment into `p` (N and M already set): `--causal top-left|bottom-right`, or
    /// plain causal, which is fine for N = M and refused for N != M (exit 2 naming the choices).
    pub fn align(&self, p: &mut Problem) -> anyhow::Result<()> {
        match self.causal.as_deref() {
            Some(a) if !a.is_empty() && !self.no_causal => {
                p.causal_align = CausalAlign::parse(a)?;
            }
            _ if p.causal && p.seq != p.kv_seq => {
                return Err(bad(format!(
                    "causal attention with N={} query rows and M={} keys: say where the diagonal \
                     sits: --causal top-left (SDPA's is_causal: key j in row i iff j <= i) or \
                     --causal bottom-right (causal_lower_right: j <= i + M - N, as FlashAttention \
                     and KV-cache decode), or --no-causal",
                    p.seq, p.kv_seq
                )));
            }
            _ => {}
        }
        Ok(())
    }

    /// `--backward`, `--dropout` and `--mode` into `p` (exit 2 naming a bad value).
    pub fn training(&self, p: &mut Problem) -> anyhow::Result<()> {
        p.backward = self.backward;
        attn_wgpu::dropout::check_p(self.dropout).map_err(bad)?;
        p.dropout = self.dropout;
        p.mode = match &self.mode {
            Some(m) => Mode::parse(m)?,
            None if self.backward => Mode::Train,
            None => Mode::Eval,
        };
        Ok(())
    }
}

/// The most forwards of one kind a command may ask for: every sample is kept on the host.
pub const MAX_REPS: u32 = 1_000_000;

/// How many forwards to run.
#[derive(Args)]
pub struct ScheduleArgs {
    /// Forwards run after the cold call and before the recorded ones (default 3 for run, 1 for
    /// sweep, 2 for explain and tune).
    #[arg(long, allow_negative_numbers = true)]
    pub warmup: Option<u32>,
    /// Recorded forwards (default 20 for run, 5 for sweep, 10 for explain and tune; tune ranks by
    /// their median).
    #[arg(long, allow_negative_numbers = true)]
    pub reps: Option<u32>,
    /// The least wall time (ms) of the warm-up: after the --warmup forwards, more run (not
    /// recorded) until this much time has passed (default 500 on a GPU adapter, where a large
    /// new buffer can stream several times slower for its first ~200 ms; 0 on a CPU adapter)
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub warmup_ms: Option<f64>,
}

impl ScheduleArgs {
    /// The schedule with `host_reps` host-only forwards, checked in one place: at least one
    /// recorded forward, and no count above [`MAX_REPS`] (exit 2).
    pub fn schedule(&self, d: &Defaults, host_reps: u32) -> anyhow::Result<Schedule> {
        let reps = self.reps.unwrap_or(d.reps);
        let warmup = self.warmup.unwrap_or(d.warmup);
        if reps == 0 {
            return Err(bad("--reps must be at least 1 (got 0)".into()));
        }
        for (flag, v) in [
            ("--reps", reps),
            ("--warmup", warmup),
            ("--host-reps", host_reps),
        ] {
            if v > MAX_REPS {
                return Err(bad(format!(
                    "{flag} {v} is above the limit of {MAX_REPS} (every sample is kept on the host)"
                )));
            }
        }
        if let Some(ms) = self.warmup_ms {
            if !(0.0..=600_000.0).contains(&ms) {
                return Err(bad(format!(
                    "--warmup-ms must be between 0 and 600000 ms (got {ms})"
                )));
            }
        }
        Ok(Schedule {
            warmup,
            reps,
            host_reps,
            warmup_ms: self.warmup_ms,
        })
    }
}

/// The tile of the variants that have one (`tiled`), forced or from a tune cache.
#[derive(Args)]
pub struct TileArgs {
    /// Force the `tiled` variant's tile configuration: `rt2` or `rt2:64` (the v2 kernel with key
    /// blocks of 32 or 64: subgroups, D a multiple of 8 up to 64), `rt3` (the chunked kernel for
    /// D a multiple of 8 from 72 to 256: subgroups), `rt` (the first register-tiled kernel) or
    /// `row:BR` (one row per thread, BR rows a workgroup, e.g. `row:32`). Wins over the tune
    /// cache; one that does not fit this adapter is refused with its reason (exit 4).
    #[arg(long)]
    pub tile: Option<String>,
    /// Tune cache to use (default: this adapter's file in the per-user cache, written by
    /// `attn-wgpu tune`); an entry of the run's shape class sets the `tiled` tile.
    #[arg(long)]
    pub tune: Option<PathBuf>,
    /// Set a fused kernel's pipeline constant, e.g. `--override LO=0` (repeatable): it replaces
    /// the value of that WGSL `override` in every dispatch declaring it, and is recorded in the
    /// config. For A/B runs of a kernel's knobs; a plan without it is refused with the names it has.
    #[arg(long = "override", value_name = "NAME=VALUE")]
    pub overrides: Vec<String>,
    /// Force the rows (and keys) per tile of `tiled`'s fused backward (`--backward`): 32 (D <= 64;
    /// f16/bf16: D <= 128; D <= 256 with D walked in four chunks), 16 (64 < D <= 128), 8
    /// (D <= 256) or 4 (128 < D <= 256). Default: the
    /// largest that fits the adapter's workgroup memory; one this D has not, or that does not
    /// fit, is refused (exit 4).
    #[arg(long, value_name = "ROWS", value_parser = parse_bwd_tile)]
    pub bwd_tile: Option<u32>,
    /// How `tiled`'s fused backward (`--backward`) computes dQ: `pass` (the default: a pass of
    /// its own, `bwd_q`, recomputing S and dP; deterministic, on every adapter) or `atomic`
    /// (FlashAttention-2's one pass: the dK/dV pass adds each block's dS·K into an f32 dQ with
    /// float atomics, five products instead of seven; needs SHADER_FLOAT32_ATOMIC (Vulkan,
    /// Metal) and a 32 x 32 tile with whole rows staged; not bitwise deterministic). Where it
    /// cannot run it is refused with the reason (exit 4).
    #[arg(long, value_name = "pass|atomic", value_parser = parse_bwd_dq)]
    pub bwd_dq: Option<BwdDq>,
}

/// `--bwd-dq`: how `tiled`'s fused backward computes dQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwdDq {
    Pass,
    Atomic,
}

/// `--bwd-dq`: pass or atomic.
fn parse_bwd_dq(s: &str) -> Result<BwdDq, String> {
    match s.trim() {
        "pass" => Ok(BwdDq::Pass),
        "atomic" => Ok(BwdDq::Atomic),
        _ => Err(format!("`{s}`: expected pass or atomic")),
    }
}

/// `--bwd-tile`: 32, 16, 8 or 4.
fn parse_bwd_tile(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(x @ (32 | 16 | 8 | 4)) => Ok(x),
        _ => Err(format!("`{s}`: expected 32, 16, 8 or 4 rows")),
    }
}

impl TileArgs {
    /// `--override NAME=VALUE`, parsed and checked against the knobs (exit 2 naming the value and
    /// what is allowed). `ATTN_WGPU_FAULT=NAME=VALUE` in the environment adds one constant with no
    /// check: fault injection for the tests of the failure paths (a validation FAIL, `.failed`
    /// files), never for measurements.
    pub fn overrides(&self) -> anyhow::Result<Vec<(String, f64)>> {
        let mut out = self.knobs()?;
        if let Ok(f) = std::env::var("ATTN_WGPU_FAULT") {
            let parsed = f
                .split_once('=')
                .and_then(|(k, v)| Some((k.trim().to_string(), v.trim().parse::<f64>().ok()?)));
            match parsed {
                Some((k, v)) if v.is_finite() => out.push((k, v)),
                _ => return Err(bad(format!("ATTN_WGPU_FAULT `{f}`: expected NAME=VALUE"))),
            }
        }
        Ok(out)
    }

    fn knobs(&self) -> anyhow::Result<Vec<(String, f64)>> {
        self.overrides
            .iter()
            .map(|s| attn_wgpu::tile::parse_override(s).map_err(bad))
            .collect()
    }

    /// `--tile`, parsed (exit 2 when malformed).
    pub fn forced(&self) -> anyhow::Result<Option<TileChoice>> {
        self.tile
            .as_deref()
            .map(|s| TileChoice::parse(s).map_err(bad))
            .transpose()
    }
}
