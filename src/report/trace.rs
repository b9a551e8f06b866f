//! Chrome trace-event JSON (opens in <https://ui.perfetto.dev> and `chrome://tracing`): a CPU lane
//! with every host phase the runner timed and a GPU lane with one slice per dispatch from the
//! timestamps, on one time axis.
//!
//! # Lanes
//! - pid 1 "CPU (host)", tid 1: device creation; per variant a `variant <name>` region holding the
//!   cold call (buffers, upload, pipelines with one `compile <shader>:<entry>` slice per new
//!   pipeline — `create_shader_module` and `create_compute_pipeline` inside —, bind groups), then
//!   every forward (`forward cold`, `forward warmup #i`, `forward rep #i`) split into `encode`,
//!   `submit` and `wait`, then the read-back.
//! - pid 2 "GPU", tid 1: per forward a slice spanning its first begin to last end timestamp, with
//!   one child slice per dispatch.
//!
//! Categories tell the kinds apart: `cold`, `warmup`, `rep` (plus `forward`, `dispatch`, `setup`).
//!
//! # Calibration (GPU ticks onto the host clock)
//! The GPU clock is read from the timestamps (raw ticks × `Queue::get_timestamp_period`); the host
//! clock is `Instant` since the runner's epoch. For every forward of one variant run, the GPU work
//! cannot start before `queue.submit` was entered and cannot end after the host's wait returned, so
//! the offset `host = gpu + off` lies in `[submit_start − gpu_begin, wait_end − gpu_end]`. The
//! intervals of all forwards of the run are intersected (the clocks' offset is constant, their rates
//! agree to parts per million over a run) and the midpoint is used; the half-width of the
//! intersection is the uncertainty, written to `otherData.calibration`. If the intersection is empty
//! (drifting clocks, a wrong timestamp period) each forward is placed at the midpoint of its own
//! window instead and the method says `per-forward`.

use serde_json::{json, Value};

use crate::gpu::context::AdapterReport;
use crate::gpu::runner::{ForwardSample, HostSpan, Measurement};
use crate::plan::Plan;
use crate::run::VariantRun;

pub const CPU_PID: u32 = 1;
pub const GPU_PID: u32 = 2;
pub const TID: u32 = 1;

/// How the GPU clock of one variant run was mapped onto the host clock.
#[derive(Debug, Clone, PartialEq)]
pub enum Calibration {
    /// One offset for all forwards (µs to add to GPU µs), ± half the width of the feasible interval.
    Global { offset_us: f64, uncertainty_us: f64 },
    /// Per-forward offsets (midpoint of each forward's own submit-to-wait window).
    PerForward,
}

/// Host window (submit start, wait end) of a forward, µs since the runner's epoch.
fn host_window(f: &ForwardSample) -> (f64, f64) {
    let submit_start = f.host_start_us + f.host_encode_submit_us - f.host_submit_us;
    let wait_end = f.host_start_us + f.host_encode_submit_us + f.host_wait_us;
    (submit_start, wait_end)
}

/// Feasible offset interval `[lo, hi]` of one forward, if it has timestamps.
fn feasible(f: &ForwardSample) -> Option<(f64, f64)> {
    let begin = f.gpu_begin_s? * 1e6;
    let span = f.gpu_span_us?;
    let (s, e) = host_window(f);
    Some((s - begin, e - (begin + span)))
}

/// The calibration of a set of forwards (see the module docs); None without timestamps.
pub fn calibrate<'a>(forwards: impl IntoIterator<Item = &'a ForwardSample>) -> Option<Calibration> {
    let mut lo = f64::NEG_INFINITY;
    let mut hi = f64::INFINITY;
    let mut any = false;
    for f in forwards {
        if let Some((a, b)) = feasible(f) {
            any = true;
            lo = lo.max(a);
            hi = hi.min(b);
        }
    }
    if !any {
        return None;
    }
    Some(if lo <= hi {
        Calibration::Global {
            offset_us: 0.5 * (lo + hi),
            uncertainty_us: 0.5 * (hi - lo),
        }
    } else {
        Calibration::PerForward
    })
}

fn offset_for(c: &Calibration, f: &ForwardSample) -> Option<f64> {
    match c {
        Calibration::Global { offset_us, .. } => Some(*offset_us),
        Calibration::PerForward => feasible(f).map(|(a, b)| 0.5 * (a + b)),
    }
}

struct Builder {
    events: Vec<Value>,
    flow: u64,
}

impl Builder {
    fn slice(&mut self, pid: u32, name: &str, cat: &str, ts: f64, dur: f64, args: Value) {
        self.events.push(json!({
            "name": name, "cat": cat, "ph": "X", "pid": pid, "tid": TID,
            "ts": ts, "dur": dur.max(0.0), "args": args,
        }));
    }
    fn cpu(&mut self, name: &str, cat: &str, ts: f64, dur: f64, args: Value) {
        self.slice(CPU_PID, name, cat, ts, dur, args)
    }
}

/// Kind of a forward: `cold`, `warmup` or `rep`, with its index within the kind.
fn forwards(m: &Measurement) -> Vec<(&'static str, usize, &ForwardSample)> {
    let mut v = vec![("cold", 0, &m.cold.first)];
    v.extend(m.warmup.iter().enumerate().map(|(i, f)| ("warmup", i, f)));
    v.extend(m.reps.iter().enumerate().map(|(i, f)| ("rep", i, f)));
    v
}

fn forward_name(kind: &str, i: usize) -> String {
    match kind {
        "cold" => "forward cold".into(),
        k => format!("forward {k} #{i}"),
    }
}

fn variant_events(b: &mut Builder, plan: &Plan, m: &Measurement, calib: &mut Vec<Value>) {
    let v = plan.variant.as_str();
    let c = &m.cold;
    let end = m.readback.start_us + m.readback.dur_us;
    b.cpu(
        &format!("variant {v}"),
        "variant",
        c.start_us,
        end - c.start_us,
        json!({"variant": v, "dispatches_per_forward": plan.dispatches.len(),
               "warmup": m.warmup.len(), "reps": m.reps.len()}),
    );
    b.cpu(
        "cold call",
        "cold",
        c.start_us,
        c.total_ms * 1e3,
        json!({"variant": v, "total_ms": c.total_ms,
               "note": "first call: resource creation, shader compilation, pipelines, first forward"}),
    );
    let mut t = c.start_us;
    for (name, ms) in [
        ("buffers", c.buffers_ms),
        ("upload", c.upload_ms),
        ("pipelines (shader compile)", c.pipelines_ms),
        ("bind groups", c.bind_groups_ms),
    ] {
        b.cpu(
            name,
            "cold,setup",
            t,
            ms * 1e3,
            json!({"variant": v, "ms": ms}),
        );
        t += ms * 1e3;
    }
    for s in c.compiles.iter().filter(|s| !s.cached) {
        let module = s.module_us.unwrap_or(0.0);
        b.cpu(
            &format!("compile {}:{}", s.shader, s.entry),
            "cold,compile",
            s.start_us,
            module + s.pipeline_us,
            json!({"variant": v, "dispatch": s.dispatch, "module_us": s.module_us,
                   "pipeline_us": s.pipeline_us}),
        );
        if let Some(mu) = s.module_us {
            b.cpu(
                "create_shader_module",
                "cold,compile",
                s.start_us,
                mu,
                json!({"shader": s.shader}),
            );
        }
        b.cpu(
            "create_compute_pipeline",
            "cold,compile",
            s.start_us + module,
            s.pipeline_us,
            json!({"shader": s.shader, "entry": s.entry}),
        );
    }

    let all = forwards(m);
    let cal = calibrate(all.iter().map(|(_, _, f)| *f));
    calib.push(match &cal {
        Some(Calibration::Global {
            offset_us,
            uncertainty_us,
        }) => json!({"variant": v, "method": "global: intersection of submit..wait windows",
                     "offset_us": offset_us, "uncertainty_us": uncertainty_us}),
        Some(Calibration::PerForward) => json!({"variant": v,
            "method": "per-forward: midpoint of each submit..wait window (windows did not intersect)"}),
        None => json!({"variant": v, "method": "none: no timestamps, GPU lane empty"}),
    });
    for (kind, i, f) in &all {
        let name = forward_name(kind, *i);
        let cat = format!("forward,{kind}");
        let (_, wait_end) = host_window(f);
        let args = json!({"variant": v, "kind": kind, "index": i, "gpu_span_us": f.gpu_span_us,
                          "host_encode_submit_us": f.host_encode_submit_us, "host_wait_us": f.host_wait_us});
        b.cpu(
            &format!("{v}: {name}"),
            &cat,
            f.host_start_us,
            wait_end - f.host_start_us,
            args.clone(),
        );
        let encode = f.host_encode_submit_us - f.host_submit_us;
        b.cpu(
            "encode",
            &format!("{kind},host"),
            f.host_start_us,
            encode,
            json!({"passes": plan.dispatches.len()}),
        );
        b.cpu(
            "submit",
            &format!("{kind},host"),
            f.host_start_us + encode,
            f.host_submit_us,
            json!({}),
        );
        b.cpu(
            "wait (poll until done)",
            &format!("{kind},host"),
            f.host_start_us + f.host_encode_submit_us,
            f.host_wait_us,
            json!({}),
        );
        let (Some(off), Some(begin_s), Some(span)) = (
            cal.as_ref().and_then(|c| offset_for(c, f)),
            f.gpu_begin_s,
            f.gpu_span_us,
        ) else {
            continue;
        };
        let g0 = begin_s * 1e6 + off;
        // A flow arrow from the host's submit to the forward on the GPU lane.
        b.flow += 1;
        let id = b.flow;
        b.events.push(
            json!({"name": "submit → GPU", "cat": "flow", "ph": "s", "id": id,
                             "pid": CPU_PID, "tid": TID, "ts": f.host_start_us + encode}),
        );
        b.events.push(
            json!({"name": "submit → GPU", "cat": "flow", "ph": "f", "bp": "e", "id": id,
                             "pid": GPU_PID, "tid": TID, "ts": g0}),
        );
        b.slice(GPU_PID, &format!("{v}: {name}"), &cat, g0, span, args);
        for (k, d) in plan.dispatches.iter().enumerate() {
            if let Some(Some((a, e))) = f.dispatch_offsets_us.get(k) {
                b.slice(
                    GPU_PID,
                    &d.name,
                    &format!("dispatch,{kind}"),
                    g0 + a,
                    e - a,
                    json!({"variant": v, "shader": d.shader.file, "entry": d.entry,
                           "workgroups": d.workgroups, "reads_bytes": d.reads_bytes,
                           "writes_bytes": d.writes_bytes, "flops": d.flops, "gpu_us": e - a}),
                );
            }
        }
    }
    b.cpu(
        "read-back (copy, map, wait)",
        "readback",
        m.readback.start_us,
        m.readback.dur_us,
        json!({"variant": v}),
    );
}

/// Builds the trace of `runs` (all timed by one runner, so on one host clock). `device` is device
/// creation on the same clock (µs since the runner's epoch; usually negative).
pub fn chrome_trace(
    adapter: &AdapterReport,
    device: Option<HostSpan>,
    runs: &[VariantRun],
) -> Value {
    let mut b = Builder {
        events: vec![],
        flow: 0,
    };
    if let Some(d) = device {
        b.cpu(
            "device creation",
            "setup",
            d.start_us,
            d.dur_us,
            json!({"adapter": adapter.name, "backend": adapter.backend}),
        );
    }
    let mut calib = Vec::new();
    for r in runs {
        if let (Some(plan), Some(m)) = (&r.plan, &r.measurement) {
            variant_events(&mut b, plan, m, &mut calib);
        }
    }
    // Shift so the trace starts at 0 (device creation precedes the runner's epoch).
    let t0 = b
        .events
        .iter()
        .filter_map(|e| e["ts"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let t0 = if t0.is_finite() { t0 } else { 0.0 };
    for e in b.events.iter_mut() {
        if let Some(ts) = e["ts"].as_f64() {
            e["ts"] = json!(((ts - t0) * 1e3).round() / 1e3);
        }
        if let Some(d) = e["dur"].as_f64() {
            e["dur"] = json!((d * 1e3).round() / 1e3);
        }
    }
    let meta = |pid: u32, name: &str, thread: &str, sort: u32| {
        vec![
            json!({"name": "process_name", "ph": "M", "pid": pid, "tid": TID, "args": {"name": name}}),
            json!({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": TID, "args": {"sort_index": sort}}),
            json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": TID, "args": {"name": thread}}),
        ]
    };
    let mut events = meta(CPU_PID, "CPU (host)", "attn-wgpu main thread", 0);
    events.extend(meta(
        GPU_PID,
        &format!("GPU: {} ({})", adapter.name, adapter.backend),
        "queue (pass timestamps)",
        1,
    ));
    events.extend(b.events);
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "tool": "attn-wgpu",
            "adapter": adapter.name,
            "backend": adapter.backend,
            "driver": format!("{} {}", adapter.driver, adapter.driver_info),
            "time_origin": "µs from the first event (device creation)",
            "calibration": calib,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fwd(host_start: f64, gpu_begin_us: f64, span: f64) -> ForwardSample {
        ForwardSample {
            dispatch_gpu_us: vec![Some(span)],
            dispatch_offsets_us: vec![Some((0.0, span))],
            gpu_span_us: Some(span),
            host_encode_submit_us: 10.0,
            host_wait_us: span + 20.0,
            host_start_us: host_start,
            host_submit_us: 4.0,
            gpu_begin_s: Some(gpu_begin_us * 1e-6),
        }
    }

    #[test]
    fn calibration_intersects_the_windows() {
        // Host = GPU - 1000 µs exactly; GPU starts 5 µs after submit returns.
        let a = fwd(0.0, 1000.0 + 15.0, 100.0);
        let b = fwd(500.0, 1000.0 + 515.0, 100.0);
        let Some(Calibration::Global {
            offset_us,
            uncertainty_us,
        }) = calibrate([&a, &b])
        else {
            panic!("expected a global calibration")
        };
        assert!(
            (offset_us - -1000.0).abs() <= uncertainty_us + 1e-6,
            "{offset_us}"
        );
        assert!(uncertainty_us < 20.0);
        // Clocks that disagree between forwards: no common offset.
        let c = fwd(500.0, 1000.0 + 900.0, 100.0);
        assert_eq!(calibrate([&a, &c]), Some(Calibration::PerForward));
        let mut none = fwd(0.0, 0.0, 1.0);
        none.gpu_begin_s = None;
        assert_eq!(calibrate([&none]), None);
    }
}
