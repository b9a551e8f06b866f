//! What the runner measures: the schedule it runs and the samples it returns (all serialized into
//! result files as they are).

use serde::Serialize;

/// How many forwards to run after the cold call.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Schedule {
    pub warmup: u32,
    pub reps: u32,
    /// Host-only forwards after the recorded ones: the same passes without timestamp queries,
    /// timed on the host only, twice over: `host_reps` each submitted and waited for
    /// (`Measurement::host_unprofiled_*`), then `host_reps` submitted back to back with one wait
    /// at the end (`Measurement::host_pipelined_*`). 0 skips both.
    pub host_reps: u32,
    /// The least time (ms) the warm-up lasts: after the `warmup` forwards, more run (unrecorded)
    /// until this much wall time has passed since the first. None: [`Schedule::GPU_WARMUP_MS`]
    /// on a GPU, 0 on a CPU adapter.
    pub warmup_ms: Option<f64>,
}

impl Schedule {
    /// The CLI's default count of unprofiled host-only forwards.
    pub const DEFAULT_HOST_REPS: u32 = 20;
    /// The default least warm-up time on a GPU adapter. On the H200, split-kv at B16 M16384 (1 GiB
    /// of new K/V buffers) ran its first ~85 forwards (~190 ms) at 2210 µs and every later one at
    /// ~500 µs; at M65536 the first 20 (~200 ms) at 10.2 ms, then 2.32 ms
    /// (results/EXPERIMENTS.md, v30-decode-warmup): a warm-up counted in forwards alone measured
    /// the transient as the steady state.
    pub const GPU_WARMUP_MS: f64 = 500.0;
    /// The most unrecorded warm-up forwards the time floor adds.
    pub const MAX_FLOOR_FORWARDS: u32 = 100_000;

    /// The warm-up's time floor in force on an adapter of `device_type` (wgpu's name for it:
    /// "Cpu" for lavapipe and llvmpipe).
    pub fn floor_ms(&self, device_type: &str) -> f64 {
        self.warmup_ms.unwrap_or(if device_type == "Cpu" {
            0.0
        } else {
            Self::GPU_WARMUP_MS
        })
    }
}

/// A warning when the recorded forwards' GPU spans drift: the median of the first half and of the
/// second half differ by more than 25 % (at least 8 spans). A transient the warm-up did not
/// cover looks like this (results/EXPERIMENTS.md, v30-decode-warmup: 2210 µs, then 500 µs from
/// one forward to the next); noise alone moves both halves alike.
pub fn drift_warning(spans: &[f64]) -> Option<String> {
    if spans.len() < 8 {
        return None;
    }
    let half = spans.len() / 2;
    let a = crate::report::stats::Stats::of(&spans[..half])?.median;
    let b = crate::report::stats::Stats::of(&spans[spans.len() - half..])?.median;
    if a.min(b) <= 0.0 || a.max(b) / a.min(b) <= 1.25 {
        return None;
    }
    Some(format!(
        "the recorded forwards drift: GPU median {a:.1} µs over the first {half}, {b:.1} µs over \
         the last {half} (a transient the warm-up did not cover? raise --warmup-ms)"
    ))
}

#[cfg(test)]
mod tests {
    use super::drift_warning;

    #[test]
    fn drift_is_a_change_between_the_halves_not_noise() {
        // The H200's decode transient: slow forwards, then fast ones.
        let mut v = vec![2210.0; 10];
        v.extend([500.0; 10]);
        let w = drift_warning(&v).expect("a drift");
        assert!(
            w.contains("2210.0") && w.contains("500.0") && w.contains("--warmup-ms"),
            "{w}"
        );
        // Noise, even wide, in both halves alike: no warning.
        let noisy: Vec<f64> = (0..20)
            .map(|i| if i % 2 == 0 { 100.0 } else { 180.0 })
            .collect();
        assert!(drift_warning(&noisy).is_none());
        // A 20 % change is within the threshold; too few samples say nothing.
        let mut v = vec![100.0; 10];
        v.extend([120.0; 10]);
        assert!(drift_warning(&v).is_none());
        assert!(drift_warning(&[1.0, 1.0, 1.0, 9.0, 9.0, 9.0]).is_none());
    }
}

/// What the warm-up's time floor ([`Schedule::warmup_ms`]) added.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WarmupFloor {
    /// The floor in force (ms).
    pub floor_ms: f64,
    /// Forwards run past the `warmup` ones to reach it (not recorded).
    pub extra_forwards: u32,
    /// Wall time of the whole warm-up (ms).
    pub elapsed_ms: f64,
}

/// What one forward call cost.
#[derive(Debug, Clone, Serialize)]
pub struct ForwardSample {
    /// GPU time of each dispatch (end - begin timestamp), µs; None without timestamps.
    pub dispatch_gpu_us: Vec<Option<f64>>,
    /// GPU begin/end of each dispatch in µs since the forward's first timestamp.
    pub dispatch_offsets_us: Vec<Option<(f64, f64)>>,
    /// First begin to last end on the GPU, µs: dispatches plus the gaps between them.
    pub gpu_span_us: Option<f64>,
    /// Host: recording all passes + submit, µs.
    pub host_encode_submit_us: f64,
    /// Host: from submit until the GPU signalled completion, µs.
    pub host_wait_us: f64,
    /// Host start of this forward, µs since the runner's epoch (for traces).
    pub host_start_us: f64,
    /// Host: the part of `host_encode_submit_us` spent inside `Queue::submit`, µs.
    pub host_submit_us: f64,
    /// Device clock of the first dispatch's begin timestamp, seconds (raw ticks × period); lets a
    /// trace place all forwards on one GPU time axis and calibrate it against the host clock.
    pub gpu_begin_s: Option<f64>,
}

impl ForwardSample {
    /// Sum of the dispatch times (None if any is missing).
    pub fn gpu_sum_us(&self) -> Option<f64> {
        self.dispatch_gpu_us.iter().copied().sum()
    }
}

/// The first call, timed apart: resource creation, shader compilation, pipeline creation.
#[derive(Debug, Clone, Serialize)]
pub struct ColdCall {
    pub buffers_ms: f64,
    pub upload_ms: f64,
    pub pipelines_ms: f64,
    pub bind_groups_ms: f64,
    /// The first forward itself (host wall clock, submit to completion).
    pub first_forward_ms: f64,
    /// Everything from the first buffer to the first result.
    pub total_ms: f64,
    pub first: ForwardSample,
    /// Host start of the cold call (first buffer), µs since the runner's epoch; the phases above
    /// follow each other without gaps from here (buffers, upload, pipelines, bind groups, forward).
    pub start_us: f64,
    /// One entry per dispatch's pipeline lookup, in plan order (inside `pipelines_ms`).
    pub compiles: Vec<CompileSample>,
}

/// Host cost of getting one dispatch's pipeline: shader module creation (WGSL parse, validation,
/// translation) when the module was not cached yet, then pipeline creation (the driver compile).
#[derive(Debug, Clone, Serialize)]
pub struct CompileSample {
    pub dispatch: String,
    pub shader: String,
    pub entry: String,
    /// True when the runner's cache already held this pipeline (no work done).
    pub cached: bool,
    /// Start, µs since the runner's epoch.
    pub start_us: f64,
    /// `create_shader_module`, µs; None when the module was cached.
    pub module_us: Option<f64>,
    /// `create_compute_pipeline`, µs; 0 when cached.
    pub pipeline_us: f64,
}

/// A host-side phase outside the forwards (e.g. the read-back), µs since the runner's epoch.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct HostSpan {
    pub start_us: f64,
    pub dur_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub cold: ColdCall,
    pub warmup: Vec<ForwardSample>,
    pub warmup_floor: WarmupFloor,
    pub reps: Vec<ForwardSample>,
    #[serde(skip)]
    pub output: Vec<f32>,
    /// Training plans: the gradients named by `Plan::grads` (dQ, dK, dV), read back after O.
    #[serde(skip)]
    pub grads: Vec<Vec<f32>>,
    pub timestamps: bool,
    pub warnings: Vec<String>,
    /// Copy of the output to a mappable buffer, map and wait (after the last rep).
    pub readback: HostSpan,
    /// Host µs per forward of `Schedule::host_reps` unprofiled forwards (after the read-back):
    /// from creating the encoder to the return of `Queue::submit`, with plain compute passes (no
    /// timestamp writes, no query resolve). What a production forward costs the CPU, next to
    /// `ForwardSample::host_encode_submit_us`, which includes the measurement's own queries.
    pub host_unprofiled_encode_submit_us: Vec<f64>,
    /// Host µs per forward of another `Schedule::host_reps` unprofiled forwards, encoded and
    /// submitted back to back without waiting in between (one wait after the last), as a
    /// production loop runs them. The same span as `host_unprofiled_encode_submit_us`, but the
    /// thread never sleeps on the GPU between forwards, so it measures the host work rather than
    /// the host work plus the CPU waking up (and clocking up) after a wait.
    pub host_pipelined_encode_submit_us: Vec<f64>,
    /// The encoding part of those (creating the encoder to `finish`): a driver whose submit blocks
    /// until the previous submission finished (lavapipe does) shows GPU time in the submit part.
    pub host_pipelined_encode_us: Vec<f64>,
}
