//! A plan: the buffers and dispatches a variant declares for one problem on one adapter.
//!
//! Nothing here touches the GPU. The runner executes any plan; the traffic model, the report and the
//! JSON results all read the same structure, so "predicted" and "observed" can be printed side by side.

use serde::Serialize;

/// What a buffer is for. `Input` buffers are uploaded from [`crate::problem::Inputs`] by name
/// (`Q`, `K`, `V`); the `Output` buffer is read back and validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    Input,
    Intermediate,
    Output,
}

#[derive(Debug, Clone, Serialize)]
pub struct BufferDecl {
    pub name: String,
    pub bytes: u64,
    pub role: Role,
    /// True for a materialized N x N score / probability matrix: the thing fusion removes.
    pub n_by_n: bool,
}

/// A kernel embedded in the binary: WGSL (every kernel but one), or SPIR-V compiled at build time
/// from GLSL (`spirv` non-empty; `source` then holds the GLSL it was compiled from, for reading
/// and reports only), which the runner hands to Vulkan through PASSTHROUGH_SHADERS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shader {
    /// File name under `shaders/`, e.g. `qk.wgsl`.
    pub file: &'static str,
    pub source: &'static str,
    /// The preludes it was composed with (e.g. `f16+mask`), empty for plain `shader!` kernels.
    pub tag: &'static str,
    /// The SPIR-V module (little-endian words) of a GLSL kernel; empty for WGSL.
    pub spirv: &'static [u8],
}

impl Shader {
    /// Whether this is a SPIR-V (GLSL) kernel rather than WGSL.
    pub fn is_spirv(&self) -> bool {
        !self.spirv.is_empty()
    }

    /// Whether the kernel runs its products on cooperative matrices (matrix units), as it
    /// declares itself: a SPIR-V module with the CooperativeMatrixKHR capability (the emulated
    /// builds have none), or WGSL that enables `wgpu_cooperative_matrix`.
    pub fn on_matrix_units(&self) -> bool {
        if self.is_spirv() {
            // OpCapability (opcode 17, two words) CooperativeMatrixKHR (6022), among the
            // module's leading capability instructions (after the 5-word header).
            let words: Vec<u32> = self
                .spirv
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect();
            return words
                .get(5..)
                .unwrap_or_default()
                .chunks_exact(2)
                .take_while(|op| op[0] == (2 << 16) | 17)
                .any(|op| op[1] == 6022);
        }
        self.source
            .lines()
            .any(|l| l.trim_start().starts_with("enable wgpu_cooperative_matrix"))
    }

    /// What names this kernel in caches: sources (composed ones are leaked) and SPIR-V live for
    /// the whole process, so their addresses and the source's length do; one GLSL source has
    /// several SPIR-V builds, hence the SPIR-V's address too.
    pub fn identity(&self) -> (usize, usize, usize) {
        (
            self.source.as_ptr() as usize,
            self.source.len(),
            self.spirv.as_ptr() as usize,
        )
    }

    /// What reports print: `qk.wgsl` or `qk.wgsl[f16+mask]`.
    pub fn label(&self) -> String {
        if self.tag.is_empty() {
            self.file.to_string()
        } else {
            format!("{}[{}]", self.file, self.tag)
        }
    }
}

impl Serialize for Shader {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

/// The uniform block every kernel reads at `@group(0) @binding(0)` (see `shaders/*.wgsl`, struct
/// `Params`). Per-dispatch, so one kernel can be dispatched over a slice of the heads.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Serialize)]
pub struct Params {
    /// Number of heads this dispatch covers (B*H, or a chunk of it).
    pub heads: u32,
    pub seq: u32,
    pub head_dim: u32,
    /// 1 when causal.
    pub causal: u32,
    pub scale: f32,
    /// Bit pattern of -inf, handed in at run time (WGSL has no infinite literal).
    pub neg_inf_bits: u32,
    /// First global head (b*H + h) of this dispatch: chunked plans process heads
    /// `head_offset .. head_offset + heads`, their N x N buffers holding only those heads.
    pub head_offset: u32,
    /// H: heads per batch element (global head `g` is batch `g / H`, head `g % H`).
    pub heads_per_batch: u32,
    /// Strides of the mask bias buffer `[Bm, Hm, N, N]` in N x N blocks, per batch element and per
    /// head: `(b * mask_bstride + h * mask_hstride) * N * N + i * N + j` (0 broadcasts).
    pub mask_bstride: u32,
    pub mask_hstride: u32,
    /// A kernel-specific factor (e.g. sqrt(scale) for `math`'s scaling of q and k).
    pub factor: f32,
    /// Dropout (src/dropout.rs): a probability is dropped iff its Philox word < drop_threshold
    /// (0: no dropout), kept ones are multiplied by drop_scale = 1 / (1 - p).
    pub drop_threshold: u32,
    pub drop_scale: f32,
    /// The Philox key: the run's seed, low word first.
    pub drop_key: [u32; 2],
    /// H / Hkv: global query head g reads K/V head g / kv_group (grouped-query attention).
    pub kv_group: u32,
    /// M: keys per head (`seq` is N, the query rows).
    pub kv_seq: u32,
    /// The causal rule: key j takes part in row i iff j <= i + causal_off (0 top-left, M - N
    /// bottom-right).
    pub causal_off: i32,
    pub _pad: [u32; 2],
}

impl Params {
    pub fn new(heads: u32, seq: u32, head_dim: u32, causal: bool, scale: f32) -> Self {
        Params {
            heads,
            seq,
            head_dim,
            causal: causal as u32,
            scale,
            neg_inf_bits: f32::NEG_INFINITY.to_bits(),
            head_offset: 0,
            heads_per_batch: heads.max(1),
            mask_bstride: 0,
            mask_hstride: 0,
            factor: 1.0,
            drop_threshold: 0,
            drop_scale: 1.0,
            drop_key: [0, 0],
            kv_group: 1,
            kv_seq: seq,
            causal_off: 0,
            _pad: [0; 2],
        }
    }

    /// Params of a problem: all its heads, its mask layout.
    pub fn of(p: &crate::problem::Problem) -> Self {
        let mut x = Params::new(p.bh() as u32, p.seq, p.head_dim, p.causal, p.scale);
        x.heads_per_batch = p.heads;
        x.kv_group = p.group();
        x.kv_seq = p.kv_seq;
        x.causal_off = p.causal_offset() as i32;
        if let Some(l) = p.mask.bias {
            x.mask_hstride = if l.heads == 1 { 0 } else { 1 };
            x.mask_bstride = if l.batch == 1 { 0 } else { l.heads };
        }
        if let Some(d) = p.dropout() {
            x.drop_threshold = d.threshold;
            x.drop_scale = d.scale as f32;
            x.drop_key = d.key;
        }
        x
    }

    /// The same, restricted to `count` heads from global head `first`.
    pub fn chunk(mut self, first: u32, count: u32) -> Self {
        self.head_offset = first;
        self.heads = count;
        self
    }
}

/// How a kernel accesses one of its storage buffers; bindings are numbered from 1 in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Access {
    Read,
    ReadWrite,
}

/// Offsets of ranged bindings are multiples of this (wgpu's default
/// min_storage_buffer_offset_alignment, the largest any adapter asks for).
pub const BINDING_OFFSET_ALIGN: u64 = 256;

#[derive(Debug, Clone, Serialize)]
pub struct BindingDecl {
    pub buffer: String,
    pub access: Access,
    /// A byte range (offset, size) of the buffer instead of all of it: how a kernel reaches a
    /// buffer larger than one storage binding (split-KV's K and V, one range per dispatch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<(u64, u64)>,
}

/// Which pass of a training step a dispatch belongs to (inference plans are all `Forward`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    #[default]
    Forward,
    Backward,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
        }
    }
}

/// A tensor the forward saves for the backward, as autograd's saved variables: the buffer and the
/// version it had when saved. Every dispatch that may write a buffer (a `ReadWrite` binding,
/// counted as a write even where the kernel only reads it: conservative) bumps its version; [`Plan::check`] refuses a backward dispatch that reads a saved buffer whose
/// version moved since (an in-place step overwrote what the backward needs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Saved {
    pub buffer: String,
    /// Writes to the buffer before it was saved.
    pub version: u32,
    /// The forward dispatch whose backward needs it (or the dispatch after which it was saved).
    pub by: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Dispatch {
    /// Dispatch name as it appears in the trace (`qk`, `scale`, `mask`, ...).
    pub name: String,
    /// Forward or backward pass.
    #[serde(default)]
    pub phase: Phase,
    /// For a backward dispatch: the saved tensors it reads (each must still have its version).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub saved: Vec<Saved>,
    pub shader: Shader,
    pub entry: &'static str,
    /// WGSL `override` constants, sorted by name.
    pub overrides: Vec<(String, f64)>,
    pub params: Params,
    /// Storage bindings `@binding(1..)`, in order; `@binding(0)` is always `params`.
    pub bindings: Vec<BindingDecl>,
    pub workgroups: [u32; 3],
    /// Estimated bytes this dispatch reads from / writes to device memory (docs/architecture.md: traffic model).
    pub reads_bytes: u64,
    pub writes_bytes: u64,
    /// Floating-point operations counted as in docs/architecture.md (a multiply-add is 2).
    pub flops: u64,
    /// An upper bound of the loop iterations one invocation runs, over all its loops (each loop
    /// counted as its trips plus the exit test, as if none were unrolled). Checked against
    /// [`crate::gpu::AdapterCaps::max_loop_iterations`] where a driver caps it (Mesa's llvmpipe:
    /// 65535, then every loop is left silently: docs/backends.md).
    #[serde(skip)]
    pub loop_iters: u64,
    /// What the dispatch does, in words (e.g. what `mask` does with no mask).
    pub note: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub variant: String,
    pub buffers: Vec<BufferDecl>,
    pub dispatches: Vec<Dispatch>,
    /// Name of the buffer read back as O.
    pub output: String,
    /// Tile configuration (variant-specific, e.g. `BR`, `BC`), as written to result files.
    pub config: Vec<(String, f64)>,
    pub notes: Vec<String>,
    /// The `tiled` variant's tile choice and where it came from (`default`, `--tile`,
    /// `tuned: <cache path>`); `None` for variants without one.
    pub tile: Option<crate::tile::TileUsed>,
    /// Training plans: the gradient buffers read back after O (`dQ`, `dK`, `dV`); empty for
    /// inference.
    pub grads: Vec<String>,
    /// Training plans: whether the variant's in-place steps are safe for training, and why (for
    /// `explain` and the report).
    pub training_note: Option<String>,
}

impl Dispatch {
    /// This dispatch as a step of the backward: renamed, phase `Backward`, reading `saved`.
    pub fn backward(mut self, name: &str, saved: Vec<Saved>) -> Dispatch {
        self.name = name.into();
        self.phase = Phase::Backward;
        self.saved = saved;
        self
    }
}

/// The version of every buffer after running `dispatches` (each `ReadWrite` binding a write).
pub fn versions(dispatches: &[Dispatch]) -> std::collections::HashMap<String, u32> {
    let mut v = std::collections::HashMap::new();
    for d in dispatches {
        for b in d.bindings.iter().filter(|b| b.access == Access::ReadWrite) {
            *v.entry(b.buffer.clone()).or_insert(0) += 1;
        }
    }
    v
}

/// `buffer` saved right after the last forward dispatch named `at` in `dispatches` (after all of
/// them when none is), for the backward of `by`.
pub fn save_after(dispatches: &[Dispatch], at: &str, buffer: &str, by: &str) -> Saved {
    let upto = dispatches
        .iter()
        .rposition(|d| d.name == at && d.phase == Phase::Forward)
        .map_or(dispatches.len(), |i| i + 1);
    save(&dispatches[..upto], buffer, by)
}

/// `buffer` saved now, after `dispatches` (its current version), for the backward of `by`.
pub fn save(dispatches: &[Dispatch], buffer: &str, by: &str) -> Saved {
    Saved {
        buffer: buffer.into(),
        version: versions(dispatches).get(buffer).copied().unwrap_or(0),
        by: by.into(),
    }
}

impl Plan {
    pub fn buffer(&self, name: &str) -> Option<&BufferDecl> {
        self.buffers.iter().find(|b| b.name == name)
    }
    pub fn n_by_n_buffers(&self) -> usize {
        self.buffers.iter().filter(|b| b.n_by_n).count()
    }
    pub fn bytes_by_role(&self, role: Role) -> u64 {
        self.buffers
            .iter()
            .filter(|b| b.role == role)
            .map(|b| b.bytes)
            .sum()
    }
    pub fn total_bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.bytes).sum()
    }
    pub fn reads_bytes(&self) -> u64 {
        self.dispatches.iter().map(|d| d.reads_bytes).sum()
    }
    pub fn writes_bytes(&self) -> u64 {
        self.dispatches.iter().map(|d| d.writes_bytes).sum()
    }
    pub fn flops(&self) -> u64 {
        self.dispatches.iter().map(|d| d.flops).sum()
    }

    /// Internal consistency: every binding names a declared buffer, workgroup counts are non-zero.
    /// A plan builder bug shows up here as a message, not as a wgpu validation error later.
    pub fn check(&self) -> Result<(), String> {
        if self.buffer(&self.output).is_none() {
            return Err(format!("output buffer `{}` is not declared", self.output));
        }
        for d in &self.dispatches {
            for b in &d.bindings {
                let Some(buf) = self.buffer(&b.buffer) else {
                    return Err(format!(
                        "dispatch `{}` binds undeclared buffer `{}`",
                        d.name, b.buffer
                    ));
                };
                if let Some((offset, size)) = b.range {
                    if size == 0
                        || offset + size > buf.bytes
                        || !offset.is_multiple_of(BINDING_OFFSET_ALIGN)
                    {
                        return Err(format!(
                            "dispatch `{}` binds bytes {offset}..{} of `{}` ({} bytes; offsets \
                             must be multiples of {BINDING_OFFSET_ALIGN})",
                            d.name,
                            offset + size,
                            b.buffer,
                            buf.bytes
                        ));
                    }
                }
            }
            if d.workgroups.contains(&0) {
                return Err(format!(
                    "dispatch `{}` has zero workgroups {:?}",
                    d.name, d.workgroups
                ));
            }
        }
        for g in &self.grads {
            if self.buffer(g).is_none() {
                return Err(format!("gradient buffer `{g}` is not declared"));
            }
        }
        self.check_saved().map_err(|h| h.to_string())
    }

    /// The in-place hazard check (autograd's version counter): walks the dispatches in order,
    /// bumping a buffer's version at every write; a backward dispatch whose saved tensor's buffer
    /// no longer has the saved version would read overwritten values.
    pub fn check_saved(&self) -> Result<(), Hazard> {
        let mut version: std::collections::HashMap<&str, u32> = Default::default();
        // The last dispatch that wrote each buffer, by version.
        let mut writers: std::collections::HashMap<(&str, u32), &str> = Default::default();
        for d in &self.dispatches {
            for s in &d.saved {
                let now = version.get(s.buffer.as_str()).copied().unwrap_or(0);
                if now != s.version {
                    let by = writers
                        .get(&(s.buffer.as_str(), s.version + 1))
                        .copied()
                        .unwrap_or("?");
                    return Err(Hazard {
                        backward: d.name.clone(),
                        buffer: s.buffer.clone(),
                        saved_by: s.by.clone(),
                        saved_version: s.version,
                        overwritten_by: by.to_string(),
                        version: now,
                    });
                }
            }
            for b in d.bindings.iter().filter(|b| b.access == Access::ReadWrite) {
                let v = version.entry(b.buffer.as_str()).or_insert(0);
                *v += 1;
                writers.insert((b.buffer.as_str(), *v), d.name.as_str());
            }
        }
        Ok(())
    }

    /// The distinct tensors the forward saves for the backward, with their bytes (inputs too;
    /// not what the backward itself computes and reads, like `tiled`'s D).
    pub fn saved_tensors(&self) -> Vec<(String, u64)> {
        let forward_written: std::collections::HashSet<&str> = self
            .dispatches
            .iter()
            .filter(|d| d.phase == Phase::Forward)
            .flat_map(|d| d.bindings.iter())
            .filter(|b| b.access == Access::ReadWrite)
            .map(|b| b.buffer.as_str())
            .collect();
        let mut out: Vec<(String, u64)> = Vec::new();
        for s in self.dispatches.iter().flat_map(|d| &d.saved) {
            let input = self
                .buffer(&s.buffer)
                .is_some_and(|b| b.role == Role::Input);
            if !input && !forward_written.contains(s.buffer.as_str()) {
                continue;
            }
            if !out.iter().any(|(n, _)| *n == s.buffer) {
                out.push((
                    s.buffer.clone(),
                    self.buffer(&s.buffer).map_or(0, |b| b.bytes),
                ));
            }
        }
        out
    }

    /// Dispatches of one phase.
    pub fn phase_len(&self, phase: Phase) -> usize {
        self.dispatches.iter().filter(|d| d.phase == phase).count()
    }
}

/// A backward dispatch that would read a saved tensor overwritten after it was saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hazard {
    pub backward: String,
    pub buffer: String,
    pub saved_by: String,
    pub saved_version: u32,
    pub overwritten_by: String,
    pub version: u32,
}

impl std::fmt::Display for Hazard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "in-place hazard: backward dispatch `{}` needs `{}` as saved for `{}` (version {}), \
             but the in-place dispatch `{}` overwrote it (now version {}): autograd would raise \
             \"one of the variables needed for gradient computation has been modified by an \
             inplace operation\"",
            self.backward,
            self.buffer,
            self.saved_by,
            self.saved_version,
            self.overwritten_by,
            self.version
        )
    }
}

/// Splits `groups` workgroups over x and y so neither exceeds `max_per_dim` (a 1-D index is then
/// rebuilt in WGSL as `wg.x + wg.y * num_workgroups.x`).
pub fn grid_2d(groups: u64, max_per_dim: u32) -> [u32; 3] {
    let max = max_per_dim.max(1) as u64;
    let groups = groups.max(1);
    if groups <= max {
        [groups as u32, 1, 1]
    } else {
        let y = groups.div_ceil(max);
        let x = groups.div_ceil(y);
        [x as u32, y as u32, 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_2d_covers_and_respects_limit() {
        assert_eq!(grid_2d(10, 65535), [10, 1, 1]);
        let g = grid_2d(131072, 65535);
        assert!(g[0] <= 65535 && g[1] <= 65535);
        assert!(g[0] as u64 * g[1] as u64 >= 131072);
        assert_eq!(grid_2d(0, 65535), [1, 1, 1]);
    }

    #[test]
    fn params_is_80_bytes() {
        assert_eq!(std::mem::size_of::<Params>(), 80);
    }
}
