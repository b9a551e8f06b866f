//! Encoding and submitting forwards: one compute pass per dispatch, with begin/end timestamps
//! through wgpu-profiler (the profiled forwards) or without (the host-only ones).

use std::time::Instant;

use super::resources::Prepared;
use super::{ForwardSample, Runner};
use crate::plan::Plan;
use crate::{Error, Result};

impl Runner<'_> {
    /// One forward: one compute pass per dispatch, each with begin/end timestamps; submit; wait.
    pub(super) fn forward(&mut self, plan: &Plan, prep: &Prepared) -> Result<ForwardSample> {
        let gpu = self.gpu;
        let t0 = Instant::now();
        // No label: wgpu-core would copy it into a new String on every forward.
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for (i, d) in plan.dispatches.iter().enumerate() {
            // wgpu-profiler stores every query's label as an owned String (`impl Into<String>`):
            // an empty one allocates nothing. Results come back in the order the queries were
            // ended (one level, no nesting), which is dispatch order; see below.
            let query = self.profiler.begin_pass_query("", &mut encoder);
            record_pass(
                &mut encoder,
                d,
                prep,
                i,
                query.compute_pass_timestamp_writes(),
            );
            self.profiler.end_query(&mut encoder, query);
        }
        self.profiler.resolve_queries(&mut encoder);
        let cmd = encoder.finish();
        let t_sub = Instant::now();
        gpu.submit([cmd]);
        let t1 = Instant::now();
        self.profiler.end_frame().map_err(|e| Error::Gpu {
            stage: "closing the profiler frame".into(),
            message: e.to_string(),
        })?;
        gpu.wait("running a forward")
            .map_err(|e| super::in_flight(e, plan))?;
        let t2 = Instant::now();

        let n = plan.dispatches.len();
        let mut ranges: Vec<Option<(f64, f64)>> = vec![None; n];
        if let Some(results) = self
            .profiler
            .process_finished_frame(gpu.queue.get_timestamp_period())
        {
            // One top-level result per `end_query`, in call order: the i-th is dispatch i. A
            // count that does not match leaves every dispatch without a time rather than guess.
            if results.len() == n {
                for (slot, r) in ranges.iter_mut().zip(results) {
                    *slot = r.time.map(|t| (t.start, t.end));
                }
            }
        }
        let begin = ranges
            .iter()
            .flatten()
            .map(|r| r.0)
            .fold(f64::INFINITY, f64::min);
        let end = ranges
            .iter()
            .flatten()
            .map(|r| r.1)
            .fold(f64::NEG_INFINITY, f64::max);
        let complete = ranges.iter().all(|r| r.is_some());
        Ok(ForwardSample {
            dispatch_gpu_us: ranges
                .iter()
                .map(|r| r.map(|(a, b)| (b - a) * 1e6))
                .collect(),
            dispatch_offsets_us: ranges
                .iter()
                .map(|r| r.map(|(a, b)| ((a - begin) * 1e6, (b - begin) * 1e6)))
                .collect(),
            gpu_span_us: complete.then_some((end - begin) * 1e6),
            host_encode_submit_us: (t1 - t0).as_secs_f64() * 1e6,
            host_wait_us: (t2 - t1).as_secs_f64() * 1e6,
            host_start_us: (t0 - self.epoch).as_secs_f64() * 1e6,
            host_submit_us: (t1 - t_sub).as_secs_f64() * 1e6,
            gpu_begin_s: begin.is_finite().then_some(begin),
        })
    }

    /// One forward as production code would record it: the same passes, pipelines and bind groups
    /// as [`Self::forward`], but no timestamp writes, no profiler and no query resolve. Returns the
    /// host µs from creating the encoder to `finish` (encoding) and to the return of
    /// `Queue::submit`, and does not wait: the caller decides whether the next forward starts from
    /// an idle queue or queues behind it.
    pub(super) fn encode_submit_unprofiled(&self, plan: &Plan, prep: &Prepared) -> (f64, f64) {
        let gpu = self.gpu;
        let t0 = Instant::now();
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for (i, d) in plan.dispatches.iter().enumerate() {
            record_pass(&mut encoder, d, prep, i, None);
        }
        let cmd = encoder.finish();
        let encoded = t0.elapsed().as_secs_f64() * 1e6;
        gpu.submit([cmd]);
        (encoded, t0.elapsed().as_secs_f64() * 1e6)
    }
}

/// Records dispatch `i` of a plan as one compute pass (with `timestamps` written at its begin and
/// end when given).
fn record_pass(
    encoder: &mut wgpu::CommandEncoder,
    d: &crate::plan::Dispatch,
    prep: &Prepared,
    i: usize,
    timestamps: Option<wgpu::ComputePassTimestampWrites>,
) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(&d.name),
        timestamp_writes: timestamps,
    });
    pass.set_pipeline(&prep.pipelines[i]);
    pass.set_bind_group(0, &prep.bind_groups[i], &[]);
    let [x, y, z] = d.workgroups;
    pass.dispatch_workgroups(x, y, z);
}
