//! The terminal report, modelled on torch.profiler's `key_averages().table()`: one row per dispatch
//! name, then totals, host time, the cold call, memory and the validation verdict.

use std::fmt::Write;

use crate::gpu::context::AdapterReport;
use crate::problem::Problem;
use crate::run::VariantRun;

/// Width of the variant column: the longest registered name (`unfused-inplace-exp`); the test
/// below fails if a longer one is registered.
const NAME_W: usize = 19;

pub use crate::text::count;

pub fn bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

pub fn header(
    adapter: &AdapterReport,
    p: &Problem,
    schedule: &crate::gpu::runner::Schedule,
) -> String {
    let floor = schedule.floor_ms(&adapter.device_type);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Adapter  : {} [{} / {}] driver: {} {}",
        adapter.name, adapter.backend, adapter.device_type, adapter.driver, adapter.driver_info
    );
    let _ = writeln!(
        s,
        "Problem  : {}  scale={}  seed={}",
        p.shape_string(),
        p.scale,
        p.seed
    );
    let _ = writeln!(
        s,
        "Schedule : 1 cold call (timed apart), {}{}, {}; GPU times from timestamps{}",
        count(schedule.warmup, "warm-up", "warm-ups"),
        if floor > 0.0 {
            format!(" (more until {floor} ms have passed)")
        } else {
            String::new()
        },
        count(schedule.reps, "recorded forward", "recorded forwards"),
        if adapter.caps.timestamps {
            ""
        } else {
            " (UNAVAILABLE on this adapter)"
        }
    );
    if let Some(d) = p.dropout() {
        let _ = writeln!(
            s,
            "Dropout  : p={} in {} mode: Philox4x32-10 keep mask (key = seed, counter = (i>>2, j, \
             b*H+h, 0), word i&3 >= {}), kept P scaled by 1/(1-p) = {}",
            d.p,
            p.mode.name(),
            d.threshold,
            d.scale as f32
        );
    }
    if let Some(w) = p.eval_dropout_warning() {
        let _ = writeln!(s, "WARNING  : {w}");
    }
    s
}

pub fn variant(r: &VariantRun) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    if !r.ran() {
        let _ = writeln!(
            s,
            "== {}: {} — {}",
            r.variant,
            r.status.name().to_uppercase(),
            r.reason.as_deref().unwrap_or("")
        );
        return s;
    }
    let _ = writeln!(
        s,
        "== {}  (plan: {} per forward; observed: {} timed)",
        r.variant,
        count(r.predicted_dispatches as u64, "dispatch", "dispatches"),
        r.observed_dispatches
    );
    if !r.config.is_empty() {
        let cfg: Vec<String> = r.config.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "   config: {}", cfg.join(" "));
    }
    if let Some(t) = &r.tile {
        let _ = writeln!(s, "   tile: {} (source: {})", t.choice, t.source);
    }
    let fwd_med = r
        .forward
        .as_ref()
        .and_then(|f| f.gpu_sum_us)
        .map(|x| x.median);
    let _ = writeln!(
        s,
        "{:<14} {:>6} {:>12} {:>10} {:>10} {:>7} {:>12} {:>10} {:>10} {:>10}",
        "Dispatch",
        "Calls",
        "GPU med µs",
        "p10",
        "p90",
        "% fwd",
        "Read+Write",
        "GB/s",
        "GFLOP/s",
        "WG mem"
    );
    for d in &r.dispatches {
        let med = d.gpu_us.map(|x| x.median);
        let pct = med.zip(fwd_med).map(|(a, b)| 100.0 * a / b);
        let _ = writeln!(
            s,
            "{:<14} {:>6} {:>12} {:>10} {:>10} {:>7} {:>12} {:>10} {:>10} {:>10}",
            d.name,
            d.calls,
            opt(med, 1),
            opt(d.gpu_us.map(|x| x.p10), 1),
            opt(d.gpu_us.map(|x| x.p90), 1),
            opt(pct, 1),
            bytes(d.reads_bytes + d.writes_bytes),
            opt(d.achieved_gbps, 1),
            opt(d.achieved_gflops, 1),
            d.workgroup_storage_bytes.map_or("-".to_string(), bytes),
        );
    }
    if let Some(f) = &r.forward {
        if let Some(span) = f.gpu_span_us {
            let gaps = f.gpu_sum_us.map(|s| span.median - s.median);
            let _ = writeln!(
                s,
                "Forward GPU : median {:.1} µs  p10 {:.1}  p90 {:.1}  min {:.1}  max {:.1}  (first begin to last end; gaps between dispatches {} µs)",
                span.median, span.p10, span.p90, span.min, span.max, opt(gaps, 1)
            );
        }
        if let (Some(e), Some(w)) = (f.host_encode_submit_us, f.host_wait_us) {
            // The same span without timestamp queries (`--host-reps`), each forward waited for;
            // then back to back with one wait at the end: what the CPU pays per forward in a
            // production loop, without the wake-up after every GPU wait.
            let unprofiled = match f.host_unprofiled_encode_submit_us {
                Some(u) => format!(
                    "{:.1} µs (p10 {:.1}, p90 {:.1}; {} forwards without timestamp queries, each waited for)",
                    u.median, u.p10, u.p90, u.n
                ),
                None => "- (--host-reps 0)".into(),
            };
            let pipelined = match f.host_pipelined_encode_submit_us {
                Some(p) => format!(
                    "{:.1} µs (p10 {:.1}, p90 {:.1}; {} forwards back to back; encoding alone {})",
                    p.median,
                    p.p10,
                    p.p90,
                    p.n,
                    f.host_pipelined_encode_us
                        .map_or("-".to_string(), |e| format!("{:.1} µs", e.median))
                ),
                None => "-".into(),
            };
            let _ = writeln!(
                s,
                "Forward host: encode+submit profiled median {:.1} µs, unprofiled median {unprofiled}, pipelined median {pipelined}; wait median {:.1} µs (CPU lane)",
                e.median, w.median
            );
        }
    }
    if let Some(t) = &r.traffic {
        let _ = writeln!(
            s,
            "Traffic     : {} read + {} written (estimated), {:.3} GFLOP; achieved {} GB/s, {} GFLOP/s over the forward",
            bytes(t.reads_bytes),
            bytes(t.writes_bytes),
            t.flops as f64 / 1e9,
            opt(t.achieved_gbps, 1),
            opt(t.achieved_gflops, 1)
        );
    }
    if let Some(m) = &r.measurement {
        let c = &m.cold;
        let _ = writeln!(
            s,
            "Cold call   : {:.1} ms (buffers {:.1}, upload {:.1}, shader compile + pipelines {:.1}, bind groups {:.1}, first forward {:.1})",
            c.total_ms, c.buffers_ms, c.upload_ms, c.pipelines_ms, c.bind_groups_ms, c.first_forward_ms
        );
    }
    if let Some(mem) = &r.memory {
        let nn: Vec<String> = mem
            .n_by_n_buffers
            .iter()
            .map(|(n, b)| format!("{n} {}", bytes(*b)))
            .collect();
        let _ = writeln!(
            s,
            "Memory      : inputs {}, intermediates {}, output {}, total {}; N x N buffers: {}",
            bytes(mem.input_bytes),
            bytes(mem.intermediate_bytes),
            bytes(mem.output_bytes),
            bytes(mem.total_bytes),
            if nn.is_empty() {
                "none".into()
            } else {
                nn.join(", ")
            }
        );
    }
    for n in &r.notes {
        let _ = writeln!(s, "Note        : {n}");
    }
    // What a fully-masked row returns: the plan's notes say it already, unless they do not.
    if let Some(sem) = r.fully_masked_rows {
        let d = sem.describe();
        let tail = d.split_once("returns").map_or(d, |x| x.1);
        if !r.notes.iter().any(|n| n.contains(tail)) {
            let _ = writeln!(s, "Masked rows : {d}");
        }
    }
    if let Some(v) = &r.validation {
        let worst = worst_text(v);
        let _ = writeln!(
            s,
            "Validation  : {}  {}max abs err {:.3e}, max rel err {:.3e} (floor {}), {} NaN, {} Inf{}",
            v.verdict,
            nan_first(v),
            v.max_abs_err,
            v.max_rel_err,
            v.rel_err_floor,
            v.nan_count,
            v.inf_count,
            worst
        );
        let _ = writeln!(
            s,
            "              {} of {} rows checked against f64 (atol {:.3e}, rtol {:.3e}); {} fully-masked rows ({} expected NaN)",
            v.rows_checked, v.rows_total, v.atol, v.rtol, v.fully_masked_rows, v.expected_nan_count
        );
        let ratio = v
            .err_ratio_to_lp_ref
            .map_or("-".into(), |r| format!("{r:.2}×"));
        let _ = writeln!(
            s,
            "Tolerance   : rule {} (pytorch: {}, strict: {}); error {ratio} the low-precision twin's ({:.3e})",
            v.tolerance_mode.name(),
            v.pytorch_verdict,
            v.strict_verdict,
            v.lp_ref_max_abs_err
        );
    }
    if let Some(m) = &r.measurement {
        for w in &m.warnings {
            let _ = writeln!(s, "Warning     : {w}");
        }
    }
    s
}

/// "; worst at (b, h, i, d): gpu … vs ref …", or nothing without a worst element.
fn worst_text(v: &crate::validate::Validation) -> String {
    v.worst.as_ref().map_or(String::new(), |w| {
        format!(
            "; worst at (b={}, h={}, i={}, d={}): gpu {:.6e} vs ref {:.6e}",
            w.b, w.h, w.i, w.d, w.gpu, w.reference
        )
    })
}

/// A table row for a variant that did not run: its status and reason.
fn not_run_row(r: &VariantRun) -> String {
    format!(
        "{:<NAME_W$} {} — {}\n",
        r.variant,
        r.status,
        r.reason.as_deref().unwrap_or("")
    )
}

fn memory_cell(r: &VariantRun) -> String {
    r.memory
        .as_ref()
        .map_or("-".into(), |m| bytes(m.total_bytes))
}

fn moved_cell(r: &VariantRun) -> String {
    r.traffic
        .as_ref()
        .map_or("-".into(), |t| bytes(t.reads_bytes + t.writes_bytes))
}

fn verdict_cell(r: &VariantRun) -> String {
    let o = r
        .validation
        .as_ref()
        .map_or("-".into(), |v| v.verdict.to_string());
    match &r.training {
        Some(t) if !t.passed() => format!("{o} (O), FAIL (gradients)"),
        Some(_) => format!("{o} (O, dQ, dK, dV)"),
        None => o,
    }
}

/// The training step of every variant that ran one (`--backward`): dispatches and GPU time of
/// the forward in training mode and of the backward, the saved tensors beyond the inputs, the
/// step's peak memory, each gradient's worst error against the oracle (and its ratio to the
/// low-precision twin's), and whether the variant's in-place steps are safe for training.
pub fn training(runs: &[VariantRun]) -> String {
    let mut s = String::new();
    if !runs.iter().any(|r| r.training.is_some()) {
        return s;
    }
    let _ = writeln!(s, "\ntraining step (forward in training mode + backward):");
    let _ = writeln!(
        s,
        "{:<NAME_W$} {:>9} {:>11} {:>11} {:>12} {:>12} {:>10}  dQ / dK / dV: max abs err (x twin)",
        "variant", "disp f+b", "fwd µs", "bwd µs", "bwd moved", "saved+", "peak mem"
    );
    let us = |x: Option<crate::report::stats::Stats>| opt(x.map(|x| x.median), 1);
    for r in runs {
        let Some(t) = &r.training else {
            continue;
        };
        let grads: Vec<String> = t
            .grads
            .iter()
            .map(|g| {
                format!(
                    "{} {:.1e}{}{}",
                    g.verdict,
                    g.max_abs_err,
                    g.err_ratio_to_lp_ref
                        .map_or(String::new(), |x| format!(" (x{x:.2})")),
                    if g.nan_count + g.inf_count > 0 {
                        format!(" {} NaN/Inf", g.nan_count + g.inf_count)
                    } else {
                        String::new()
                    }
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "{:<NAME_W$} {:>9} {:>11} {:>11} {:>12} {:>12} {:>10}  {}",
            r.variant,
            format!("{}+{}", t.forward_dispatches, t.backward_dispatches),
            us(t.forward_gpu_us),
            us(t.backward_gpu_us),
            bytes(t.backward_bytes),
            bytes(t.saved_beyond_inputs_bytes),
            bytes(t.peak_bytes),
            grads.join(" / ")
        );
        if let Some(w) = t.grads.iter().find_map(|g| {
            (g.verdict == crate::validate::Verdict::Fail)
                .then_some(g)
                .and_then(|g| g.worst.as_ref().map(|w| (g, w)))
        }) {
            let (g, w) = w;
            let _ = writeln!(
                s,
                "   FAIL {}: worst at (b={}, h={}, i={}, d={}): {} vs {} (atol {:.3e}, rtol {:.3e})",
                g.tensor, w.b, w.h, w.i, w.d, w.gpu, w.reference, g.atol, g.rtol
            );
        }
    }
    for r in runs {
        if let Some(note) = r.training.as_ref().and_then(|t| t.in_place.as_ref()) {
            let _ = writeln!(s, "   {}: {note}", r.variant);
        }
    }
    s
}

/// For a failure with unexpected NaN or Inf: that first (the max errors exclude them).
fn nan_first(v: &crate::validate::Validation) -> String {
    if v.verdict == crate::validate::Verdict::Fail && v.nan_count + v.inf_count > 0 {
        format!(
            "{} unexpected NaN and {} Inf (not counted in the errors that follow); ",
            v.nan_count, v.inf_count
        )
    } else {
        String::new()
    }
}

/// `run`'s default report: one row per variant (dispatches, GPU median and p10–p90, memory,
/// estimated bytes moved, verdict), the tile where one was chosen, and for a failure its worst
/// element; `--verbose` prints [`variant`] and [`summary`] instead.
pub fn compact(runs: &[VariantRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<NAME_W$} {:>5} {:>12} {:>21} {:>12} {:>12}  verdict",
        "variant", "disp", "GPU med µs", "p10–p90 µs", "memory", "bytes moved"
    );
    for r in runs {
        if !r.ran() {
            s.push_str(&not_run_row(r));
            continue;
        }
        let span = r.forward.as_ref().and_then(|f| f.gpu_span_us);
        let _ = writeln!(
            s,
            "{:<NAME_W$} {:>5} {:>12} {:>21} {:>12} {:>12}  {}",
            r.variant,
            r.predicted_dispatches,
            opt(span.map(|x| x.median), 1),
            span.map_or("-".into(), |x| format!("{:.1}–{:.1}", x.p10, x.p90)),
            memory_cell(r),
            moved_cell(r),
            verdict_cell(r),
        );
        if let Some(t) = &r.tile {
            let _ = writeln!(s, "   tile: {} (source: {})", t.choice, t.source);
        }
        if let Some(v) = r
            .validation
            .as_ref()
            .filter(|v| v.verdict != crate::validate::Verdict::Pass)
        {
            let worst = worst_text(v);
            let _ = writeln!(
                s,
                "   FAIL: {}max abs err {:.3e} (atol {:.3e}, rtol {:.3e}){worst}",
                nan_first(v),
                v.max_abs_err,
                v.atol,
                v.rtol
            );
        }
        if let Some(m) = &r.measurement {
            for w in &m.warnings {
                let _ = writeln!(s, "   warning: {w}");
            }
        }
    }
    s
}

/// One line per variant, when several ran.
pub fn summary(runs: &[VariantRun]) -> String {
    let mut s = String::new();
    let best = runs
        .iter()
        .filter_map(|r| r.forward.as_ref()?.gpu_span_us.map(|x| x.median))
        .fold(f64::INFINITY, f64::min);
    let _ = writeln!(s, "\n== summary");
    let _ = writeln!(
        s,
        "{:<NAME_W$} {:>10} {:>8} {:>12} {:>9} {:>12} {:>12} {:>12} {:>8}",
        "variant",
        "dispatches",
        "N x N",
        "GPU med µs",
        "vs best",
        "host pipe µs",
        "bytes moved",
        "memory",
        "verdict"
    );
    for r in runs {
        if !r.ran() {
            s.push_str(&not_run_row(r));
            continue;
        }
        let med = r
            .forward
            .as_ref()
            .and_then(|f| f.gpu_span_us)
            .map(|x| x.median);
        // Host encode + submit per forward without timestamp queries, submitted back to back
        // (median): the host cost per forward without the wake-up after a GPU wait.
        let host = r
            .forward
            .as_ref()
            .and_then(|f| f.host_pipelined_encode_submit_us)
            .map(|x| x.median);
        let _ = writeln!(
            s,
            "{:<NAME_W$} {:>10} {:>8} {:>12} {:>9} {:>12} {:>12} {:>12} {:>8}",
            r.variant,
            r.predicted_dispatches,
            r.memory.as_ref().map_or(0, |m| m.n_by_n_buffers.len()),
            opt(med, 1),
            med.map_or("-".into(), |m| format!("{:.2}x", m / best)),
            opt(host, 1),
            moved_cell(r),
            memory_cell(r),
            verdict_cell(r),
        );
    }
    let _ = writeln!(
        s,
        "host pipe µs: median host encode+submit per forward, --host-reps forwards without timestamp queries submitted back to back (`-` with --host-reps 0)"
    );
    s
}

/// What `--variant auto` decided, and why not the others.
pub fn auto(c: &crate::variants::AutoChoice) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Auto     : picked `{}` — rule: {}", c.picked, c.rule);
    for (v, why) in &c.not_picked {
        let _ = writeln!(s, "           not `{v}`: {why}");
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_variant_column_fits_every_name() {
        let longest = crate::variants::names().iter().map(|n| n.len()).max();
        assert_eq!(longest, Some(super::NAME_W));
    }
}
