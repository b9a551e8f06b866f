//! One run of one variant: plan, execute, measure, validate. The CLI and the tests both go through
//! here, so what the tests check is what users run.

use serde::Serialize;

use crate::gpu::runner::{Measurement, Runner, Schedule};
use crate::gpu::Gpu;
use crate::mask::Semantics;
use crate::plan::{Plan, Role};
use crate::problem::{Inputs, Problem};
use crate::report::stats::Stats;
use crate::validate::{rows_to_check, validate, Validation};
use crate::{variants, Error, Result};

/// Per-dispatch measured figures, aggregated by dispatch name as torch.profiler's key_averages is.
#[derive(Debug, Clone, Serialize)]
pub struct DispatchRow {
    pub name: String,
    /// Forward or backward (training runs).
    pub phase: crate::plan::Phase,
    pub shader: String,
    pub entry: String,
    /// Calls over the recorded forwards.
    pub calls: u64,
    pub workgroups: Vec<[u32; 3]>,
    pub overrides: Vec<(String, f64)>,
    pub reads_bytes: u64,
    pub writes_bytes: u64,
    pub flops: u64,
    pub note: String,
    /// Whether the kernel runs on cooperative matrices, as it declares itself
    /// (`Shader::on_matrix_units`): its roofline ceiling is the matrix units' peak where probed.
    pub matrix_units: bool,
    /// Workgroup memory one workgroup declares (`kernels::workgroup_bytes`): on chip, not
    /// traffic. None where naga could not read the kernel.
    pub workgroup_storage_bytes: Option<u64>,
    /// GPU µs per forward spent in dispatches of this name.
    pub gpu_us: Option<Stats>,
    pub achieved_gbps: Option<f64>,
    pub achieved_gflops: Option<f64>,
    /// Raw per-rep GPU µs of this row.
    pub samples_us: Vec<Option<f64>>,
    /// Where this dispatch sits under the probed roofline (`run` with a probe file; the probe is
    /// named by the results file's top-level `roofline`). None without a probe, or when the plan
    /// estimates neither bytes nor FLOPs for it.
    pub roofline: Option<crate::probe::RooflinePoint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ForwardStats {
    pub gpu_span_us: Option<Stats>,
    pub gpu_sum_us: Option<Stats>,
    /// Recorded forwards: encoder creation to the return of submit, timestamp queries included.
    pub host_encode_submit_us: Option<Stats>,
    pub host_wait_us: Option<Stats>,
    pub host_total_us: Option<Stats>,
    /// The same span for the host-only forwards without timestamp queries (`Schedule::host_reps`);
    /// None when there were none.
    pub host_unprofiled_encode_submit_us: Option<Stats>,
    /// The same span again for `Schedule::host_reps` forwards submitted back to back (one wait at
    /// the end): the host cost per forward without the wake-up after a GPU wait; None when there
    /// were none.
    pub host_pipelined_encode_submit_us: Option<Stats>,
    /// The encoding part of those (before `Queue::submit`).
    pub host_pipelined_encode_us: Option<Stats>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    pub input_bytes: u64,
    pub intermediate_bytes: u64,
    pub output_bytes: u64,
    pub total_bytes: u64,
    pub n_by_n_buffers: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Traffic {
    pub reads_bytes: u64,
    pub writes_bytes: u64,
    pub flops: u64,
    pub achieved_gbps: Option<f64>,
    pub achieved_gflops: Option<f64>,
}

/// Whether a variant ran: `ok`; `unsupported` here (its plan refused, the reason in
/// [`VariantRun::reason`]); or `error`: its plan was accepted but the GPU refused or failed it
/// (a driver rejecting a kernel, say), the error in the reason, in a run of several variants
/// where the others still run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Ok,
    Unsupported,
    Error,
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Unsupported => "unsupported",
            RunStatus::Error => "error",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything one variant produced.
#[derive(Debug, Clone, Serialize)]
pub struct VariantRun {
    pub variant: String,
    pub status: RunStatus,
    pub reason: Option<String>,
    pub dispatches: Vec<DispatchRow>,
    pub predicted_dispatches: usize,
    pub observed_dispatches: usize,
    pub config: Vec<(String, f64)>,
    /// The tile choice (`tiled` only) and where it came from: `default`, `--tile`,
    /// `tuned: <cache path>`.
    pub tile: Option<crate::tile::TileUsed>,
    pub notes: Vec<String>,
    pub forward: Option<ForwardStats>,
    pub memory: Option<Memory>,
    pub traffic: Option<Traffic>,
    pub validation: Option<Validation>,
    /// What this variant returns for a row in which no key takes part.
    pub fully_masked_rows: Option<Semantics>,
    pub measurement: Option<Measurement>,
    /// Training runs (`--backward`): the two passes, the saved tensors, the gradients' checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training: Option<Training>,
    #[serde(skip)]
    pub plan: Option<Plan>,
}

/// What a training step of one variant did: the forward in training mode and the backward, each
/// with its dispatches (predicted from the plan, observed in the timestamps), GPU time (the sum
/// of its dispatches per step, median and percentiles) and bytes moved (the traffic model); the
/// tensors the forward saves for the backward; the step's peak memory; dQ, dK, dV validated.
#[derive(Debug, Clone, Serialize)]
pub struct Training {
    pub forward_dispatches: usize,
    pub backward_dispatches: usize,
    pub observed_forward_dispatches: usize,
    pub observed_backward_dispatches: usize,
    pub forward_gpu_us: Option<Stats>,
    pub backward_gpu_us: Option<Stats>,
    pub forward_bytes: u64,
    pub backward_bytes: u64,
    pub backward_flops: u64,
    /// (buffer, bytes) the backward reads as saved, inputs included.
    pub saved: Vec<(String, u64)>,
    /// The saved bytes beyond the inputs Q, K, V and the mask: P (N x N) for the materialized
    /// variants, L (B*H*N floats) and O for the fused ones.
    pub saved_beyond_inputs_bytes: u64,
    /// Peak device memory of the training step: every buffer of the plan, which the runner
    /// allocates at once and holds for the whole step (predicted = allocated).
    pub peak_bytes: u64,
    /// Whether the variant's in-place steps are safe for training, and why.
    pub in_place: Option<String>,
    pub grads: Vec<crate::validate::GradValidation>,
}

impl Training {
    pub fn passed(&self) -> bool {
        !self.grads.is_empty()
            && self
                .grads
                .iter()
                .all(|g| g.verdict == crate::validate::Verdict::Pass)
    }
}

impl VariantRun {
    /// A variant that could not run here, with its reason.
    pub fn unsupported(variant: &str, reason: String) -> Self {
        Self::not_run(variant, RunStatus::Unsupported, reason)
    }

    /// A variant whose run the GPU refused or failed, with the error.
    pub fn errored(variant: &str, error: String) -> Self {
        Self::not_run(variant, RunStatus::Error, error)
    }

    fn not_run(variant: &str, status: RunStatus, reason: String) -> Self {
        VariantRun {
            variant: variant.into(),
            status,
            reason: Some(reason),
            dispatches: vec![],
            predicted_dispatches: 0,
            observed_dispatches: 0,
            config: vec![],
            tile: None,
            notes: vec![],
            forward: None,
            memory: None,
            traffic: None,
            validation: None,
            fully_masked_rows: variants::find(variant).ok().map(|v| v.fully_masked),
            measurement: None,
            training: None,
            plan: None,
        }
    }

    /// True when it ran (status `ok`), validated or not.
    pub fn ran(&self) -> bool {
        self.status == RunStatus::Ok
    }

    /// O passes and, in a training run, dQ, dK and dV too.
    pub fn passed(&self) -> bool {
        self.validation
            .as_ref()
            .is_some_and(|v| v.verdict == crate::validate::Verdict::Pass)
            && self.training.as_ref().is_none_or(|t| t.passed())
    }
}

fn rate(amount: u64, us: Option<f64>, per: f64) -> Option<f64> {
    us.filter(|t| *t > 0.0)
        .map(|t| amount as f64 / (t * 1e-6) / per)
}

/// Builds the statistics the reports print from a plan and its measurement.
pub fn summarize(
    plan: &Plan,
    m: &Measurement,
) -> (Vec<DispatchRow>, ForwardStats, Memory, Traffic) {
    let mut rows: Vec<DispatchRow> = Vec::new();
    for (i, d) in plan.dispatches.iter().enumerate() {
        let idx = match rows.iter().position(|r| r.name == d.name) {
            Some(k) => k,
            None => {
                rows.push(DispatchRow {
                    name: d.name.clone(),
                    phase: d.phase,
                    shader: d.shader.label(),
                    entry: d.entry.into(),
                    calls: 0,
                    workgroups: vec![],
                    overrides: d.overrides.clone(),
                    reads_bytes: 0,
                    writes_bytes: 0,
                    flops: 0,
                    note: d.note.clone(),
                    matrix_units: d.shader.on_matrix_units(),
                    workgroup_storage_bytes: crate::kernels::workgroup_bytes(
                        &d.shader,
                        d.entry,
                        &d.overrides,
                    ),
                    gpu_us: None,
                    achieved_gbps: None,
                    achieved_gflops: None,
                    samples_us: vec![None; m.reps.len()],
                    roofline: None,
                });
                rows.len() - 1
            }
        };
        let r = &mut rows[idx];
        r.calls += m.reps.len() as u64;
        r.workgroups.push(d.workgroups);
        r.reads_bytes += d.reads_bytes;
        r.writes_bytes += d.writes_bytes;
        r.flops += d.flops;
        for (k, rep) in m.reps.iter().enumerate() {
            let t = rep.dispatch_gpu_us[i];
            r.samples_us[k] = if r.calls == m.reps.len() as u64 {
                t
            } else {
                r.samples_us[k].zip(t).map(|(a, b)| a + b)
            };
        }
    }
    for r in rows.iter_mut() {
        r.gpu_us = Stats::of_all(r.samples_us.iter().copied());
        let med = r.gpu_us.map(|s| s.median);
        r.achieved_gbps = rate(r.reads_bytes + r.writes_bytes, med, 1e9);
        r.achieved_gflops = if r.flops > 0 {
            rate(r.flops, med, 1e9)
        } else {
            None
        };
    }
    let fwd = ForwardStats {
        gpu_span_us: Stats::of_all(m.reps.iter().map(|r| r.gpu_span_us)),
        gpu_sum_us: Stats::of_all(m.reps.iter().map(|r| r.gpu_sum_us())),
        host_encode_submit_us: Stats::of(
            &m.reps
                .iter()
                .map(|r| r.host_encode_submit_us)
                .collect::<Vec<_>>(),
        ),
        host_wait_us: Stats::of(&m.reps.iter().map(|r| r.host_wait_us).collect::<Vec<_>>()),
        host_total_us: Stats::of(
            &m.reps
                .iter()
                .map(|r| r.host_encode_submit_us + r.host_wait_us)
                .collect::<Vec<_>>(),
        ),
        host_unprofiled_encode_submit_us: Stats::of(&m.host_unprofiled_encode_submit_us),
        host_pipelined_encode_submit_us: Stats::of(&m.host_pipelined_encode_submit_us),
        host_pipelined_encode_us: Stats::of(&m.host_pipelined_encode_us),
    };
    let mem = memory(plan);
    let med = fwd.gpu_span_us.map(|s| s.median);
    let traffic = Traffic {
        reads_bytes: plan.reads_bytes(),
        writes_bytes: plan.writes_bytes(),
        flops: plan.flops(),
        achieved_gbps: rate(plan.reads_bytes() + plan.writes_bytes(), med, 1e9),
        achieved_gflops: rate(plan.flops(), med, 1e9),
    };
    (rows, fwd, mem, traffic)
}

pub fn memory(plan: &Plan) -> Memory {
    Memory {
        input_bytes: plan.bytes_by_role(Role::Input),
        intermediate_bytes: plan.bytes_by_role(Role::Intermediate),
        output_bytes: plan.bytes_by_role(Role::Output),
        total_bytes: plan.total_bytes(),
        n_by_n_buffers: plan
            .buffers
            .iter()
            .filter(|b| b.n_by_n)
            .map(|b| (b.name.clone(), b.bytes))
            .collect(),
    }
}

/// Plans, runs and validates one variant. Incompatibility is a `VariantRun` with status
/// "unsupported" when `skip_incompatible`, an error otherwise.
pub fn run_variant(
    gpu: &Gpu,
    runner: &mut Runner,
    p: &Problem,
    x: &Inputs,
    variant: &str,
    schedule: Schedule,
    skip_incompatible: bool,
) -> Result<VariantRun> {
    let plan = match variants::plan(variant, p, &gpu.caps) {
        Ok(plan) => plan,
        Err(Error::Incompatible { reason, .. }) if skip_incompatible => {
            return Ok(VariantRun::unsupported(variant, reason))
        }
        Err(e) => return Err(e),
    };
    let sem = variants::find(variant)?.fully_masked;
    run_plan(runner, p, x, variant, plan, sem, schedule)
}

/// Runs and validates a plan built outside the variant table (the tests' emulated
/// `tiled-coop-vk`), exactly as [`run_variant`] runs a variant's: `sem` is what its rows with no
/// allowed key return.
pub fn run_plan(
    runner: &mut Runner,
    p: &Problem,
    x: &Inputs,
    variant: &str,
    plan: Plan,
    sem: Semantics,
    schedule: Schedule,
) -> Result<VariantRun> {
    let m = runner.execute(&plan, x, schedule)?;
    Ok(assemble(p, x, variant, plan, sem, m))
}

/// The [`VariantRun`] of `plan`'s measurement `m`, wherever it ran (the native runner, or a
/// browser's page through `attn-wgpu browser`): its rows, traffic, validation and training figures.
pub fn assemble(
    p: &Problem,
    x: &Inputs,
    variant: &str,
    plan: Plan,
    sem: Semantics,
    m: Measurement,
) -> VariantRun {
    let (rows, fwd, mem, traffic) = summarize(&plan, &m);
    let validation = validate(p, x, &m.output, &rows_to_check(p), sem);
    let observed = m.reps.first().map_or(0, |r| {
        r.dispatch_gpu_us.iter().filter(|t| t.is_some()).count()
    });
    let training = p.backward.then(|| training(p, x, &plan, &m, sem));
    VariantRun {
        variant: variant.into(),
        status: RunStatus::Ok,
        reason: None,
        dispatches: rows,
        predicted_dispatches: plan.dispatches.len(),
        observed_dispatches: observed,
        config: plan.config.clone(),
        tile: plan.tile.clone(),
        notes: plan.notes.clone(),
        forward: Some(fwd),
        memory: Some(mem),
        traffic: Some(traffic),
        validation: Some(validation),
        fully_masked_rows: Some(sem),
        measurement: Some(m),
        training,
        plan: Some(plan),
    }
}

/// The training figures of a run of a training plan (see [`Training`]).
fn training(p: &Problem, x: &Inputs, plan: &Plan, m: &Measurement, sem: Semantics) -> Training {
    use crate::plan::Phase;
    let of = |phase: Phase| -> Vec<usize> {
        (0..plan.dispatches.len())
            .filter(|i| plan.dispatches[*i].phase == phase)
            .collect()
    };
    let (fwd, bwd) = (of(Phase::Forward), of(Phase::Backward));
    let time = |idx: &[usize]| {
        Stats::of_all(m.reps.iter().map(|r| {
            idx.iter()
                .map(|&i| r.dispatch_gpu_us[i])
                .sum::<Option<f64>>()
        }))
    };
    let observed = |idx: &[usize]| {
        m.reps.first().map_or(0, |r| {
            idx.iter()
                .filter(|&&i| r.dispatch_gpu_us[i].is_some())
                .count()
        })
    };
    let bytes = |idx: &[usize]| -> u64 {
        idx.iter()
            .map(|&i| plan.dispatches[i].reads_bytes + plan.dispatches[i].writes_bytes)
            .sum()
    };
    let saved = plan.saved_tensors();
    let inputs = ["Q", "K", "V", crate::kernels::MASK];
    let heads = crate::validate::heads_to_check(p);
    Training {
        forward_dispatches: fwd.len(),
        backward_dispatches: bwd.len(),
        observed_forward_dispatches: observed(&fwd),
        observed_backward_dispatches: observed(&bwd),
        forward_gpu_us: time(&fwd),
        backward_gpu_us: time(&bwd),
        forward_bytes: bytes(&fwd),
        backward_bytes: bytes(&bwd),
        backward_flops: bwd.iter().map(|&i| plan.dispatches[i].flops).sum(),
        saved_beyond_inputs_bytes: saved
            .iter()
            .filter(|(n, _)| !inputs.contains(&n.as_str()))
            .map(|(_, b)| b)
            .sum(),
        saved,
        peak_bytes: plan.total_bytes(),
        in_place: plan.training_note.clone(),
        grads: crate::validate::validate_grads(p, x, &m.grads, &heads, sem),
    }
}
