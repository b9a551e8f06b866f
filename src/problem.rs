//! The attention problem: shape, dtype, causal flag, scale, seed, and the deterministic inputs.
//!
//! Layout of Q and O: `[B, H, N, D]`, row-major, contiguous (element `(b, h, i, d)` lives at
//! `((b * H + h) * N + i) * D + d`); K and V: `[B, Hkv, M, D]` the same way (Hkv = H and M = N
//! unless `--kv-heads` / `--kv-seq`).
//!
//! # Input generator (same seed, same bits, on every machine)
//! Q, K and V are drawn in that order from one `Pcg32` stream (`rand_pcg::Pcg32::seed_from_u64(seed)`,
//! the PCG-XSH-RR 64/32 generator, whose output is specified bit-for-bit). Each element takes one
//! `u32` `x` and becomes `((x >> 8) as f32) * 2^-23 - 1.0`: a uniform value in `[-1, 1)` with 24
//! significant bits, exactly representable in f32.

use rand_core::{RngCore, SeedableRng};
use serde::Serialize;

use crate::{Error, Result};

/// Storage type of Q, K, V and O on the GPU. Accumulation and softmax statistics are always f32.
///
/// - `f16`: IEEE half, stored as WGSL `f16` (needs `SHADER_F16`).
/// - `bf16`: bfloat16, stored as 16-bit patterns two per `u32` and widened in the shader
///   (`bits << 16` bitcast to f32), so it runs on every adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    BF16,
}

impl DType {
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    pub fn bytes(self) -> u64 {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }
    pub fn parse(s: &str) -> Result<DType> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" => Ok(DType::F32),
            "f16" | "float16" | "half" => Ok(DType::F16),
            "bf16" | "bfloat16" => Ok(DType::BF16),
            _ => Err(Error::InvalidProblem(format!(
                "--dtype `{s}` is not supported (supported: f32, f16, bf16)"
            ))),
        }
    }
    /// Rounds one value to this dtype (round to nearest even, as `half` does) and widens it back.
    pub fn round(self, x: f32) -> f32 {
        match self {
            DType::F32 => x,
            DType::F16 => half::f16::from_f32(x).to_f32(),
            DType::BF16 => half::bf16::from_f32(x).to_f32(),
        }
    }
    /// Bytes of `values` as stored on the GPU (little-endian; 16-bit dtypes pair up in u32 words,
    /// element 2k in the low half).
    pub fn encode(self, values: &[f32]) -> Vec<u8> {
        match self {
            DType::F32 => bytemuck::cast_slice(values).to_vec(),
            DType::F16 => values
                .iter()
                .flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes())
                .collect(),
            DType::BF16 => values
                .iter()
                .flat_map(|v| half::bf16::from_f32(*v).to_bits().to_le_bytes())
                .collect(),
        }
    }
    /// Inverse of [`DType::encode`]: the first `elems` values of `bytes`.
    pub fn decode(self, bytes: &[u8], elems: usize) -> Vec<f32> {
        match self {
            DType::F32 => bytes
                .chunks_exact(4)
                .take(elems)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            DType::F16 => bytes
                .chunks_exact(2)
                .take(elems)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            DType::BF16 => bytes
                .chunks_exact(2)
                .take(elems)
                .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
        }
    }
}

/// How a boolean mask is read: `sdpa` (True = takes part, SDPA's boolean `attn_mask`) or `mha`
/// (True = blocked, `nn.MultiheadAttention`'s masks and `masked_fill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Convention {
    Sdpa,
    Mha,
}

impl Convention {
    pub fn parse(s: &str) -> Result<Convention> {
        match s.to_ascii_lowercase().as_str() {
            "sdpa" => Ok(Convention::Sdpa),
            "mha" => Ok(Convention::Mha),
            _ => Err(Error::InvalidProblem(format!(
                "--mask-convention `{s}` is unknown (expected sdpa: True = takes part, or mha: True = blocked)"
            ))),
        }
    }
}

/// What the GPU sees of the masks besides the causal index test: one additive f32 bias buffer
/// `MASK` of shape `[Bm, Hm, N, M]` (Bm in {1, B}, Hm in {1, H}; broadcast over the others), built
/// on the host from `--mask` and `--key-padding` (0 = takes part, -inf = blocked, a float mask's
/// own values otherwise). `None` when neither is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BiasLayout {
    pub batch: u32,
    pub heads: u32,
}

/// How a run's output is judged (`--tolerance`; `validate` holds both rules).
/// - `pytorch` (the default): PyTorch's method (`test/test_transformers.py`, `get_tolerances`):
///   the allowed absolute error is a fudge factor times the error a low-precision reference
///   makes on the same inputs, with the dtype's default as a floor; the same rule judges the
///   PyTorch rows of `bench/torch_sdpa.py`.
/// - `strict`: the fixed per-dtype tolerances of attn-wgpu before that rule (inputs exact in the
///   dtype, everything else f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ToleranceMode {
    #[default]
    Pytorch,
    Strict,
}

impl ToleranceMode {
    pub fn parse(s: &str) -> Result<ToleranceMode> {
        match s.to_ascii_lowercase().as_str() {
            "pytorch" => Ok(ToleranceMode::Pytorch),
            "strict" => Ok(ToleranceMode::Strict),
            _ => Err(Error::InvalidProblem(format!(
                "--tolerance `{s}` is unknown (expected pytorch or strict)"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            ToleranceMode::Pytorch => "pytorch",
            ToleranceMode::Strict => "strict",
        }
    }
}

/// The kind of explicit mask a problem has (`--mask`): none, a boolean or an additive float mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MaskKind {
    #[default]
    None,
    Bool,
    Float,
}

impl MaskKind {
    pub fn name(self) -> &'static str {
        match self {
            MaskKind::None => "none",
            MaskKind::Bool => "bool",
            MaskKind::Float => "float",
        }
    }
}

/// The masks of a problem, as described by the user (for plans and reports; the values are in
/// [`Inputs::bias`]).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct MaskDesc {
    /// The explicit mask's kind.
    pub kind: MaskKind,
    /// Where the explicit mask came from (a path, or `generated`).
    pub source: Option<String>,
    pub convention: Option<Convention>,
    /// Shape of the explicit mask as given.
    pub shape: Vec<u64>,
    /// Valid keys per batch element (`--key-padding`).
    pub key_padding: Option<Vec<u32>>,
    /// Layout of the normalized bias buffer, when there is one.
    pub bias: Option<BiasLayout>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub batch: u32,
    /// Query heads H (Hq).
    pub heads: u32,
    /// K/V heads Hkv (`--kv-heads`, default H): H a multiple of Hkv; query head h reads K/V head
    /// h / (H / Hkv), as SDPA's `enable_gqa=True` (grouped-query attention; Hkv = 1 is MQA).
    pub kv_heads: u32,
    /// N: query rows.
    pub seq: u32,
    /// M: keys (`--kv-seq`, default N): Q is [B, H, N, D], K and V [B, Hkv, M, D].
    pub kv_seq: u32,
    pub head_dim: u32,
    /// The causal mask: key j takes part in query row i iff j <= i + [`Problem::causal_offset`]
    /// (0 for `causal_align` top-left, SDPA's `is_causal`; M - N for bottom-right).
    pub causal: bool,
    /// Where the causal diagonal sits when N != M (`--causal top-left|bottom-right`).
    pub causal_align: CausalAlign,
    pub scale: f32,
    pub dtype: DType,
    pub seed: u64,
    /// Explicit mask and key padding (the causal mask is `causal`).
    pub mask: MaskDesc,
    /// A tile configuration imposed on the `tiled` variant (`--tile`, a `tune` cache entry, a
    /// `tune` candidate); `None`: the builder's default. Other variants ignore it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tile: Option<crate::tile::TileRequest>,
    /// How the output is judged.
    pub tolerance: ToleranceMode,
    /// Pipeline constants set by hand (`--override NAME=VALUE`): each replaces the value of the
    /// WGSL `override` of that name in every dispatch of the plan that declares it (a plan none
    /// of whose kernels declares it is refused with the names they do declare). For A/B runs of
    /// a kernel's knobs; recorded in the plan's config.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<(String, f64)>,
    /// The rows (and keys) per tile of `tiled`'s fused backward, forced (`--bwd-tile`); `None`:
    /// the largest tile that fits the adapter (src/kernels/tiled_bwd.rs, `Tile::pick`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bwd_tile: Option<u32>,
    /// `tiled`'s fused backward computes dQ in the dK/dV pass with float atomics (`--bwd-dq
    /// atomic`) instead of a pass of its own (src/kernels/tiled_bwd.rs, `check_dq_atomic`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub bwd_dq_atomic: bool,
    /// Training mode (`--backward`): every plan adds the backward pass for the upstream gradient
    /// dO ([`Inputs::d_o`]) after the forward in training mode, and the run validates dQ, dK, dV.
    pub backward: bool,
    /// SDPA's `dropout_p` on the attention probabilities (`--dropout`; 0: none, and no dropout
    /// work in any kernel). See [`crate::dropout`] for the keep mask.
    pub dropout: f64,
    /// `--mode`: train or eval. Dropout applies in both, as SDPA's does (the eval-mode pitfall);
    /// eval with dropout > 0 adds a warning to the report.
    pub mode: Mode,
}

/// Whether the run stands for a module in training or in evaluation mode (`--mode`). SDPA does not
/// know: `F.scaled_dot_product_attention(..., dropout_p=p)` drops with probability p either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Train,
    #[default]
    Eval,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        match s.to_ascii_lowercase().as_str() {
            "train" => Ok(Mode::Train),
            "eval" => Ok(Mode::Eval),
            _ => Err(Error::InvalidProblem(format!(
                "--mode `{s}` is unknown (expected train or eval)"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Mode::Train => "train",
            Mode::Eval => "eval",
        }
    }
}

/// The alignment of the causal mask when N != M, named as PyTorch names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CausalAlign {
    /// `tril` of the N x M matrix: key j takes part in row i iff j <= i (SDPA's `is_causal`).
    #[default]
    TopLeft,
    /// `torch.nn.attention.bias.causal_lower_right`: j <= i + M - N, the last query row sees
    /// every key (FlashAttention's convention, KV-cache decode).
    BottomRight,
}

impl CausalAlign {
    pub fn parse(s: &str) -> Result<CausalAlign> {
        match s.to_ascii_lowercase().as_str() {
            "top-left" => Ok(CausalAlign::TopLeft),
            "bottom-right" => Ok(CausalAlign::BottomRight),
            _ => Err(Error::InvalidProblem(format!(
                "--causal `{s}` is unknown (expected top-left: SDPA's is_causal, or \
                 bottom-right: causal_lower_right)"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            CausalAlign::TopLeft => "top-left",
            CausalAlign::BottomRight => "bottom-right",
        }
    }
}

/// Largest sequence length and head dimension accepted at all (the adapter may refuse smaller ones).
pub const MAX_SEQ: u32 = 1 << 20;
pub const MAX_HEAD_DIM: u32 = 256;

impl Problem {
    /// A problem with the default scale `1/sqrt(D)`.
    pub fn new(batch: u32, heads: u32, seq: u32, head_dim: u32, causal: bool, seed: u64) -> Self {
        Problem {
            batch,
            heads,
            kv_heads: heads,
            seq,
            kv_seq: seq,
            causal_align: CausalAlign::TopLeft,
            head_dim,
            causal,
            scale: 1.0 / (head_dim.max(1) as f32).sqrt(),
            dtype: DType::F32,
            seed,
            mask: MaskDesc::default(),
            tile: None,
            tolerance: ToleranceMode::Pytorch,
            overrides: Vec::new(),
            bwd_tile: None,
            bwd_dq_atomic: false,
            backward: false,
            dropout: 0.0,
            mode: Mode::Eval,
        }
    }

    /// The run's dropout, `None` when `dropout` is 0.
    pub fn dropout(&self) -> Option<crate::dropout::Dropout> {
        crate::dropout::Dropout::new(self.dropout, self.seed)
    }

    /// The eval-mode pitfall, when it applies: a warning for the report.
    pub fn eval_dropout_warning(&self) -> Option<String> {
        (self.mode == Mode::Eval && self.dropout > 0.0).then(|| {
            format!(
                "--mode eval with --dropout {}: dropout is still applied, as SDPA applies \
                 dropout_p even when the module is in eval mode (module.eval() does not reach \
                 F.scaled_dot_product_attention); for evaluation pass --dropout 0 (in PyTorch: \
                 dropout_p=self.p if self.training else 0.0)",
                self.dropout
            )
        })
    }

    /// The same problem with N = `n` query rows, as a sweep over N takes it: self-attention (M = N)
    /// stays self-attention (M = n); keys set apart from N (`--kv-seq`, M != N) stay at M.
    pub fn at_seq(&self, n: u32) -> Problem {
        Problem {
            seq: n,
            kv_seq: if self.kv_seq == self.seq {
                n
            } else {
                self.kv_seq
            },
            ..self.clone()
        }
    }

    /// Checks the sizes; every message names the bad value.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidProblem(m));
        if self.batch == 0 {
            return bad("--batch must be at least 1 (got 0)".into());
        }
        if self.heads == 0 {
            return bad("--heads must be at least 1 (got 0)".into());
        }
        if self.kv_heads == 0 || !self.heads.is_multiple_of(self.kv_heads) {
            return bad(format!(
                "--kv-heads {} must divide --heads {} (grouped-query attention: each K/V head \
                 serves H / Hkv query heads; Hkv = 1 is multi-query attention)",
                self.kv_heads, self.heads
            ));
        }
        if self.seq == 0 {
            return bad("--seq must be at least 1 (got 0)".into());
        }
        if self.seq > MAX_SEQ {
            return bad(format!("--seq {} exceeds the maximum {MAX_SEQ}", self.seq));
        }
        if self.kv_seq == 0 {
            return bad("--kv-seq must be at least 1 (got 0)".into());
        }
        if self.kv_seq > MAX_SEQ {
            return bad(format!(
                "--kv-seq {} exceeds the maximum {MAX_SEQ}",
                self.kv_seq
            ));
        }
        if self.head_dim == 0 {
            return bad("--head-dim must be at least 1 (got 0)".into());
        }
        if self.head_dim > MAX_HEAD_DIM {
            return bad(format!(
                "--head-dim {} exceeds the maximum {MAX_HEAD_DIM}",
                self.head_dim
            ));
        }
        crate::dropout::check_p(self.dropout).map_err(Error::InvalidProblem)?;
        if !self.scale.is_finite() {
            return bad(format!("--scale must be finite (got {})", self.scale));
        }
        let bh = self.batch as u64 * self.heads as u64;
        if bh > u32::MAX as u64 / 2 {
            return bad(format!(
                "--batch {} x --heads {} = {bh} heads in all is too many",
                self.batch, self.heads
            ));
        }
        let elems = bh * self.seq as u64 * self.head_dim as u64;
        if elems > (1u64 << 40) {
            return bad(format!("B*H*N*D = {elems} elements is too large"));
        }
        Ok(())
    }

    /// `[B, H, N, D]`: the shape of Q, K, V, O, dO and the gradients.
    pub fn qkv_shape(&self) -> [u64; 4] {
        [
            self.batch as u64,
            self.heads as u64,
            self.seq as u64,
            self.head_dim as u64,
        ]
    }

    /// `[B, Hkv, M, D]`: the shape of K, V, dK and dV.
    pub fn kv_shape(&self) -> [u64; 4] {
        [
            self.batch as u64,
            self.kv_heads as u64,
            self.kv_seq as u64,
            self.head_dim as u64,
        ]
    }

    /// The causal rule's offset: key j takes part in row i iff j <= i + offset (0 top-left, M - N
    /// bottom-right; 0 without causal, where it is unused).
    pub fn causal_offset(&self) -> i64 {
        match (self.causal, self.causal_align) {
            (true, CausalAlign::BottomRight) => self.kv_seq as i64 - self.seq as i64,
            _ => 0,
        }
    }

    /// Whether the causal rule lets key j take part in row i (always without causal).
    pub fn causal_allows(&self, i: u64, j: u64) -> bool {
        !self.causal || j as i64 <= i as i64 + self.causal_offset()
    }

    /// Keys 0..k that the causal rule lets row i see: M, or i + offset + 1 clamped to 0..=M.
    pub fn keys_for_row(&self, i: u64) -> u64 {
        if self.causal {
            (i as i64 + self.causal_offset() + 1).clamp(0, self.kv_seq as i64) as u64
        } else {
            self.kv_seq as u64
        }
    }

    /// H / Hkv: the query heads that share one K/V head.
    pub fn group(&self) -> u32 {
        self.heads / self.kv_heads.max(1)
    }

    /// Elements in one of K, V (and dK, dV): B*Hkv*M*D.
    pub fn kv_elems(&self) -> u64 {
        self.batch as u64 * self.kv_heads as u64 * self.kv_seq as u64 * self.head_dim as u64
    }
    pub fn kv_bytes(&self) -> u64 {
        self.kv_elems() * self.dtype.bytes()
    }

    /// B*H: the number of independent attention heads.
    pub fn bh(&self) -> u64 {
        self.batch as u64 * self.heads as u64
    }
    /// Elements in one of Q, O (and dO, dQ); also K and V without GQA (see [`Problem::kv_elems`]).
    pub fn qkv_elems(&self) -> u64 {
        self.bh() * self.seq as u64 * self.head_dim as u64
    }
    pub fn qkv_bytes(&self) -> u64 {
        self.qkv_elems() * self.dtype.bytes()
    }
    /// Elements of the N x M score matrices over all heads.
    pub fn scores_elems(&self) -> u64 {
        self.bh() * self.seq as u64 * self.kv_seq as u64
    }
    /// Bytes of the normalized mask bias buffer (0 without one).
    pub fn bias_bytes(&self) -> u64 {
        self.mask.bias.map_or(0, |b| {
            b.batch as u64 * b.heads as u64 * self.seq as u64 * self.kv_seq as u64 * 4
        })
    }
    /// Whether any mask at all applies (causal, explicit or key padding).
    pub fn masked(&self) -> bool {
        self.causal || self.mask.bias.is_some()
    }
    /// Number of (query, key) pairs the causal rule lets take part per head: N·M, or the sum of
    /// each row's keys when causal (N(N+1)/2 for N = M).
    pub fn allowed_pairs_per_head(&self) -> u64 {
        if self.causal {
            (0..self.seq as u64).map(|i| self.keys_for_row(i)).sum()
        } else {
            self.seq as u64 * self.kv_seq as u64
        }
    }
    pub fn shape_string(&self) -> String {
        let mut s = format!(
            "B={} H={} N={} D={} {} {}",
            self.batch,
            self.heads,
            self.seq,
            self.head_dim,
            self.dtype.name(),
            match (self.causal, self.causal_align) {
                (false, _) => "non-causal",
                (true, _) if self.kv_seq == self.seq => "causal",
                (true, CausalAlign::TopLeft) => "causal (top-left)",
                (true, CausalAlign::BottomRight) => "causal (bottom-right)",
            }
        );
        if self.kv_seq != self.seq {
            s += &format!(" M={}", self.kv_seq);
        }
        if self.mask.kind != MaskKind::None {
            s += &format!(
                " mask={}{:?}/{}",
                self.mask.kind.name(),
                self.mask.shape,
                self.mask
                    .convention
                    .map_or("-", |c| if c == Convention::Sdpa { "sdpa" } else { "mha" })
            );
        }
        if let Some(kp) = &self.mask.key_padding {
            s += &format!(" key-padding={kp:?}");
        }
        if self.causal && self.mask.bias.is_some() {
            s += " (causal AND mask: intersection)";
        }
        if self.kv_heads != self.heads {
            s += &format!(
                " Hkv={} ({})",
                self.kv_heads,
                if self.kv_heads == 1 { "MQA" } else { "GQA" }
            );
        }
        if self.dropout > 0.0 {
            s += &format!(" dropout={} ({})", self.dropout, self.mode.name());
        }
        s
    }
}

/// Q, K and V as f32 holding the values the GPU sees (already rounded to `dtype`), and the
/// normalized mask bias. The reference computes on exactly these.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub dtype: DType,
    /// `[Bm, Hm, N, N]` additive bias (see [`BiasLayout`]), when the problem has one.
    pub bias: Option<Vec<f32>>,
    /// The upstream gradient dO (`[B, H, N, D]`, rounded to `dtype`) of a training run
    /// (`--backward`): drawn after V from the same stream, or read from `--do`.
    pub d_o: Option<Vec<f32>>,
}

/// One uniform value in [-1, 1) from one u32 (see the module docs).
pub fn unit_from_u32(x: u32) -> f32 {
    ((x >> 8) as f32) * (1.0 / (1u32 << 23) as f32) - 1.0
}

impl Inputs {
    /// No tensors: the inputs of a plan that uploads none (the probes).
    pub fn none() -> Inputs {
        Inputs {
            q: vec![],
            k: vec![],
            v: vec![],
            dtype: DType::F32,
            bias: None,
            d_o: None,
        }
    }

    /// The documented deterministic generator (module docs).
    pub fn generate(p: &Problem) -> Inputs {
        let n = p.qkv_elems() as usize;
        let nkv = p.kv_elems() as usize;
        let mut rng = rand_pcg::Pcg32::seed_from_u64(p.seed);
        let mut draw =
            |len: usize| -> Vec<f32> { (0..len).map(|_| unit_from_u32(rng.next_u32())).collect() };
        let q = draw(n);
        let k = draw(nkv);
        let v = draw(nkv);
        // dO comes after V, so Q, K and V are the same bits with and without --backward.
        let d_o = p.backward.then(|| draw(n));
        Inputs {
            q,
            k,
            v,
            dtype: DType::F32,
            bias: None,
            d_o,
        }
        .rounded_to(p.dtype)
    }

    /// The generated upstream gradient of `p` alone (the fourth tensor of the seed's stream, as
    /// [`Inputs::generate`] draws it), rounded to the run's dtype: for runs whose Q, K and V come
    /// from files.
    pub fn generate_d_o(p: &Problem) -> Vec<f32> {
        let n = p.qkv_elems() as usize;
        let mut rng = rand_pcg::Pcg32::seed_from_u64(p.seed);
        for _ in 0..n + 2 * p.kv_elems() as usize {
            rng.next_u32();
        }
        (0..n)
            .map(|_| p.dtype.round(unit_from_u32(rng.next_u32())))
            .collect()
    }

    /// Rounds Q, K and V once to `dtype` (the values the GPU and the reference then share).
    pub fn rounded_to(mut self, dtype: DType) -> Inputs {
        for x in [&mut self.q, &mut self.k, &mut self.v]
            .into_iter()
            .chain(self.d_o.as_mut())
        {
            x.iter_mut().for_each(|v| *v = dtype.round(*v));
        }
        self.dtype = dtype;
        self
    }

    /// Bytes to upload into the plan's input buffer `name` (`Q`, `K`, `V` in the run's dtype,
    /// `MASK` as f32), if it is one of them.
    pub fn upload_bytes(&self, name: &str) -> Option<Vec<u8>> {
        match name {
            "Q" => Some(self.dtype.encode(&self.q)),
            "K" => Some(self.dtype.encode(&self.k)),
            "V" => Some(self.dtype.encode(&self.v)),
            "dO" => self.d_o.as_ref().map(|g| self.dtype.encode(g)),
            "MASK" => self.bias.as_ref().map(|b| bytemuck::cast_slice(b).to_vec()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_range_and_determinism() {
        let p = Problem::new(1, 2, 7, 5, true, 42);
        let a = Inputs::generate(&p);
        let b = Inputs::generate(&p);
        assert_eq!(a.q, b.q);
        assert!(a
            .q
            .iter()
            .chain(&a.k)
            .chain(&a.v)
            .all(|x| (-1.0..1.0).contains(x)));
        let c = Inputs::generate(&Problem { seed: 43, ..p });
        assert_ne!(a.q, c.q);
        assert_eq!(unit_from_u32(0), -1.0);
        assert!(unit_from_u32(u32::MAX) < 1.0);
    }

    #[test]
    fn first_values_are_pinned() {
        // Pins the stream so that a dependency bump that changed it would be caught.
        let p = Problem::new(1, 1, 1, 2, false, 0);
        let x = Inputs::generate(&p);
        assert_eq!(x.q, [-0.8609055f32, 0.97278583]);
    }
}
