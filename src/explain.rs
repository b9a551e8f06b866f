//! `explain`, the teaching demo: for each variant the plan's predicted dispatch list beside what the
//! timestamps observed (mismatches called out), the differences between plans (what an
//! out-of-place mask costs), six questions answered with this run's numbers, and fusion vs
//! materialization (unfused vs tiled).

use crate::variants::{VariantId, MATERIALIZED};
use std::fmt::Write;

use crate::problem::Problem;
use crate::report::table::bytes;
use crate::run::VariantRun;

/// Host work outside the runner, timed by the caller (ms).
#[derive(Debug, Clone, Default)]
pub struct HostExtras {
    pub device_setup_ms: f64,
    pub inputs_ms: f64,
    /// Per variant: wall time of plan + execute + summarize + validate, ms.
    pub variant_wall_ms: Vec<(String, f64)>,
}

fn med(x: Option<crate::report::stats::Stats>) -> Option<f64> {
    x.map(|s| s.median)
}

fn us(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1} µs"))
}

/// Predicted vs observed for one variant.
pub fn predicted_vs_observed(r: &VariantRun) -> String {
    let mut s = String::new();
    let (Some(plan), Some(m)) = (&r.plan, &r.measurement) else {
        let _ = writeln!(
            s,
            "== {}: {} — {}",
            r.variant,
            r.status,
            r.reason.as_deref().unwrap_or("")
        );
        return s;
    };
    let _ = writeln!(
        s,
        "== {}: predicted (plan) | observed (timestamps, median over {} reps)",
        r.variant,
        m.reps.len()
    );
    let _ = writeln!(
        s,
        "  {:>2} {:<9} {:<16} {:>11} {:>11} {:>10} | {:>5} {:>11} {:>19}",
        "#",
        "dispatch",
        "workgroups",
        "reads",
        "writes",
        "GFLOP",
        "timed",
        "median",
        "begin..end µs"
    );
    let mut mismatches = Vec::new();
    let n = plan.dispatches.len();
    let med_of = |i: usize| -> Option<f64> {
        let v: Vec<f64> = m.reps.iter().filter_map(|f| f.dispatch_gpu_us[i]).collect();
        crate::report::stats::Stats::of(&v).map(|x| x.median)
    };
    let off_of = |i: usize| -> Option<(f64, f64)> {
        let a: Vec<f64> = m
            .reps
            .iter()
            .filter_map(|f| f.dispatch_offsets_us[i].map(|o| o.0))
            .collect();
        let b: Vec<f64> = m
            .reps
            .iter()
            .filter_map(|f| f.dispatch_offsets_us[i].map(|o| o.1))
            .collect();
        Some((
            crate::report::stats::Stats::of(&a)?.median,
            crate::report::stats::Stats::of(&b)?.median,
        ))
    };
    let mut last_begin = f64::NEG_INFINITY;
    for (i, d) in plan.dispatches.iter().enumerate() {
        let timed = m
            .reps
            .iter()
            .filter(|f| f.dispatch_gpu_us[i].is_some())
            .count();
        let off = off_of(i);
        let _ = writeln!(
            s,
            "  {:>2} {:<9} {:<16} {:>11} {:>11} {:>10.4} | {:>5} {:>11} {:>19}",
            i + 1,
            d.name,
            format!("{:?}", d.workgroups),
            bytes(d.reads_bytes),
            bytes(d.writes_bytes),
            d.flops as f64 / 1e9,
            format!("{timed}/{}", m.reps.len()),
            us(med_of(i)),
            off.map_or("-".into(), |(a, b)| format!("{a:.1}..{b:.1}")),
        );
        if timed < m.reps.len() {
            mismatches.push(format!(
                "dispatch `{}` has timestamps in {timed} of {} forwards",
                d.name,
                m.reps.len()
            ));
        }
        if let Some((a, _)) = off {
            if a + 1e-9 < last_begin {
                mismatches.push(format!(
                    "dispatch `{}` began before the one planned ahead of it",
                    d.name
                ));
            }
            last_begin = a;
        }
        if d.reads_bytes == 0 && d.writes_bytes == 0 && d.flops == 0 {
            mismatches.push(format!(
                "dispatch `{}` is predicted to touch no memory and do no arithmetic, yet costs {} \
                 (launch + pass overhead)",
                d.name,
                us(med_of(i))
            ));
        }
    }
    let _ = writeln!(
        s,
        "  predicted {n} dispatch(es) per forward, observed {} timed{}",
        r.observed_dispatches,
        if r.observed_dispatches == n {
            " — match"
        } else {
            " — MISMATCH"
        }
    );
    if r.observed_dispatches != n {
        mismatches.push(format!(
            "plan has {n} dispatches, timestamps show {}",
            r.observed_dispatches
        ));
    }
    for mm in &mismatches {
        let _ = writeln!(s, "  ! {mm}");
    }
    for note in &plan.notes {
        let _ = writeln!(s, "  note: {note}");
    }
    if let Some(t) = &plan.tile {
        let _ = writeln!(s, "  tile: {} (source: {})", t.choice, t.source);
    }
    s
}

/// What `a` does beyond `b` when `b`'s dispatches are a strict subset of `a`'s (e.g. unfused vs
/// unfused-inplace), in dispatches, bytes and buffers, with the measured cost.
pub fn plan_difference(p: &Problem, a: &VariantRun, b: &VariantRun) -> Option<String> {
    let (pa, pb) = (a.plan.as_ref()?, b.plan.as_ref()?);
    let names_b: Vec<&str> = pb.dispatches.iter().map(|d| d.name.as_str()).collect();
    if !names_b
        .iter()
        .all(|n| pa.dispatches.iter().any(|d| d.name == *n))
        || pa.dispatches.len() <= pb.dispatches.len()
    {
        return None;
    }
    let extra: Vec<&crate::plan::Dispatch> = pa
        .dispatches
        .iter()
        .filter(|d| !names_b.contains(&d.name.as_str()))
        .collect();
    let dr = pa.reads_bytes() as i64 - pb.reads_bytes() as i64;
    let dw = pa.writes_bytes() as i64 - pb.writes_bytes() as i64;
    let extra_bufs: Vec<String> = pa
        .buffers
        .iter()
        .filter(|x| pb.buffer(&x.name).is_none())
        .map(|x| format!("{} ({})", x.name, bytes(x.bytes)))
        .collect();
    let nn = p.scores_elems() * p.dtype.bytes();
    let in_nn = |v: i64| {
        if nn > 0 && v != 0 && v.unsigned_abs().is_multiple_of(nn) {
            format!(" = {}×B·H·N×N×{}", v / nn as i64, p.dtype.bytes())
        } else {
            String::new()
        }
    };
    let ta = a.forward.as_ref().and_then(|f| med(f.gpu_span_us));
    let tb = b.forward.as_ref().and_then(|f| med(f.gpu_span_us));
    let what = if extra.iter().any(|d| d.name == "copy") {
        "mask applied out of place"
    } else {
        "extra work"
    };
    Some(format!(
        "{} vs {}: {what}: +{} dispatch{} ({}), {:+} bytes read{}, {:+} bytes written{}, +{} buffer(s) {}; \
         measured {} vs {} per forward ({})",
        a.variant,
        b.variant,
        extra.len(),
        if extra.len() == 1 { "" } else { "es" },
        extra.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "),
        dr,
        in_nn(dr),
        dw,
        in_nn(dw),
        extra_bufs.len(),
        extra_bufs.join(", "),
        us(ta),
        us(tb),
        match (ta, tb) {
            (Some(x), Some(y)) => format!("{:+.1} µs, {:.2}×", x - y, x / y),
            _ => "-".into(),
        }
    ))
}

/// The six questions, answered with the numbers of `runs`.
pub fn six_questions(runs: &[VariantRun], x: &HostExtras) -> String {
    let ok: Vec<&VariantRun> = runs.iter().filter(|r| r.measurement.is_some()).collect();
    let mut s = String::new();
    let _ = writeln!(s, "== Six questions, answered with this run's numbers");

    // 1. Region.
    let _ = writeln!(s, "1. Which region was measured?");
    for r in &ok {
        let m = r.measurement.as_ref().unwrap();
        let f = r.forward.as_ref().unwrap();
        let _ = writeln!(
            s,
            "   {}: GPU time = first dispatch's begin timestamp to last dispatch's end timestamp of one \
             submit ({}), median of {} after {}: {} \
             (dispatches alone {}); host encode/submit/wait, the read-back and the cold call are outside it",
            r.variant,
            crate::report::table::count(r.predicted_dispatches as u64, "compute pass", "compute passes"),
            crate::report::table::count(m.reps.len() as u64, "recorded forward", "recorded forwards"),
            crate::report::table::count(m.warmup.len() as u64, "warm-up", "warm-ups"),
            us(med(f.gpu_span_us)),
            us(med(f.gpu_sum_us)),
        );
    }

    // 2. Warm-up.
    let _ = writeln!(s, "2. Was it warmed up (cold vs warm)?");
    for r in &ok {
        let m = r.measurement.as_ref().unwrap();
        let f = r.forward.as_ref().unwrap();
        let c = &m.cold;
        let warm_host = med(f.host_total_us);
        let reused = if c.compiles.iter().all(|x| x.cached) {
            " (every pipeline reused from the runner's cache: compiled for an earlier variant)"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "   {}: yes — cold call {:.2} ms (shader compile + pipelines {:.2} ms{reused}, buffers {:.2}, upload {:.2}, \
             first forward {:.2} ms wall) vs warm forward {} wall; first forward's GPU span {} vs warm median {}{}",
            r.variant,
            c.total_ms,
            c.pipelines_ms,
            c.buffers_ms,
            c.upload_ms,
            c.first_forward_ms,
            us(warm_host),
            us(c.first.gpu_span_us),
            us(med(f.gpu_span_us)),
            match warm_host {
                Some(w) if w > 0.0 => format!("; the cold call costs {:.0}× a warm forward", c.total_ms * 1e3 / w),
                _ => String::new(),
            }
        );
    }

    // 3. Dominant dispatch.
    let _ = writeln!(s, "3. Which dispatch dominates GPU time?");
    for r in &ok {
        let total: f64 = r.dispatches.iter().filter_map(|d| med(d.gpu_us)).sum();
        if let Some(d) = r
            .dispatches
            .iter()
            .filter(|d| d.gpu_us.is_some())
            .max_by(|a, b| {
                med(a.gpu_us)
                    .partial_cmp(&med(b.gpu_us))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
        {
            let t = med(d.gpu_us).unwrap_or(0.0);
            let _ = writeln!(
                s,
                "   {}: `{}` — {} of {} ({:.0}%), {} moved, {:.4} GFLOP",
                r.variant,
                d.name,
                us(Some(t)),
                us(Some(total)),
                if total > 0.0 { 100.0 * t / total } else { 0.0 },
                bytes(d.reads_bytes + d.writes_bytes),
                d.flops as f64 / 1e9
            );
        } else {
            let _ = writeln!(s, "   {}: no timestamps on this adapter", r.variant);
        }
    }

    // 4. Dominant host phase.
    let _ = writeln!(s, "4. Which host phase dominates host time?");
    let mut phases: Vec<(String, f64)> = vec![
        ("device creation".into(), x.device_setup_ms),
        ("input generation".into(), x.inputs_ms),
    ];
    for r in &ok {
        let m = r.measurement.as_ref().unwrap();
        let c = &m.cold;
        let v = &r.variant;
        let fwd: Vec<_> = m.warmup.iter().chain(&m.reps).collect();
        let enc: f64 = fwd.iter().map(|f| f.host_encode_submit_us).sum::<f64>() / 1e3;
        let wait: f64 = fwd.iter().map(|f| f.host_wait_us).sum::<f64>() / 1e3;
        let runner_ms = c.total_ms + enc + wait + m.readback.dur_us / 1e3;
        phases.push((format!("{v}: shader compile + pipelines"), c.pipelines_ms));
        phases.push((format!("{v}: buffers + upload"), c.buffers_ms + c.upload_ms));
        phases.push((format!("{v}: first forward"), c.first_forward_ms));
        phases.push((
            format!("{v}: encode + submit ({} forwards)", fwd.len()),
            enc,
        ));
        phases.push((
            format!("{v}: wait for the GPU ({} forwards)", fwd.len()),
            wait,
        ));
        phases.push((format!("{v}: read-back"), m.readback.dur_us / 1e3));
        if let Some((_, wall)) = x.variant_wall_ms.iter().find(|(n, _)| n == v) {
            phases.push((
                format!("{v}: f64 reference + validation + summary"),
                (wall - runner_ms).max(0.0),
            ));
        }
    }
    let total: f64 = phases.iter().map(|p| p.1).sum();
    phases.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal));
    for (i, (name, ms)) in phases.iter().take(3).enumerate() {
        let _ = writeln!(
            s,
            "   {}{name}: {ms:.2} ms ({:.0}% of {total:.1} ms host time)",
            if i == 0 { "-> " } else { "   " },
            100.0 * ms / total.max(1e-9)
        );
    }

    // 5. Copies and gaps.
    let _ = writeln!(s, "5. Do copies or gaps appear?");
    for r in &ok {
        let plan = r.plan.as_ref().unwrap();
        let f = r.forward.as_ref().unwrap();
        let copies: Vec<String> = plan
            .dispatches
            .iter()
            .filter(|d| d.flops == 0 && d.reads_bytes > 0 && d.reads_bytes == d.writes_bytes)
            .map(|d| {
                let t = r
                    .dispatches
                    .iter()
                    .find(|x| x.name == d.name)
                    .and_then(|x| med(x.gpu_us));
                format!(
                    "`{}` ({} read + written, {})",
                    d.name,
                    bytes(d.reads_bytes),
                    us(t)
                )
            })
            .collect();
        let gap = match (med(f.gpu_span_us), med(f.gpu_sum_us)) {
            (Some(a), Some(b)) => format!(
                "gaps between dispatches {:.1} µs ({:.1}% of the span)",
                a - b,
                if a > 0.0 { 100.0 * (a - b) / a } else { 0.0 }
            ),
            _ => "gaps unknown (no timestamps)".into(),
        };
        let _ = writeln!(
            s,
            "   {}: {}; {gap}",
            r.variant,
            if copies.is_empty() {
                "no copy dispatch".to_string()
            } else {
                format!("copies: {}", copies.join(", "))
            }
        );
    }

    // 6. CPU work.
    let _ = writeln!(s, "6. What work sits on the CPU?");
    let _ = writeln!(
        s,
        "   once: device creation {:.1} ms, input generation {:.2} ms; per variant:",
        x.device_setup_ms, x.inputs_ms
    );
    for r in &ok {
        let m = r.measurement.as_ref().unwrap();
        let f = r.forward.as_ref().unwrap();
        let enc = med(f.host_encode_submit_us);
        let gpu = med(f.gpu_span_us);
        let verdict = match (enc, gpu) {
            (Some(e), Some(g)) if e > g => format!(
                "encoding takes longer than the GPU runs ({:.1}×): the CPU lane bounds this forward",
                e / g
            ),
            (Some(e), Some(g)) => format!("encoding is {:.0}% of the GPU span", 100.0 * e / g.max(1e-9)),
            _ => String::new(),
        };
        let compiled = m.cold.compiles.iter().filter(|c| !c.cached).count();
        let _ = writeln!(
            s,
            "   {}: shader compile {:.2} ms once ({} new pipeline{}); per forward encode + submit {} \
             (recording {} passes), wait {}; {verdict}; plus the f64 reference on the CPU",
            r.variant,
            m.cold.pipelines_ms,
            compiled,
            if compiled == 1 { "" } else { "s" },
            us(enc),
            r.predicted_dispatches,
            us(med(f.host_wait_us)),
        );
    }
    s
}

/// Fusion vs materialization: unfused (or unfused-inplace) against tiled.
pub fn fusion(runs: &[VariantRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "== Fusion vs materialization");
    let find = |id: VariantId| {
        runs.iter()
            .find(|r| VariantId::of(&r.variant) == Some(id) && r.measurement.is_some())
    };
    let Some(t) = find(VariantId::Tiled) else {
        let _ = writeln!(s, "   (needs `tiled` and an unfused variant in --variant)");
        return s;
    };
    for u in MATERIALIZED.into_iter().filter_map(find) {
        let bytes_of = |r: &VariantRun| {
            r.traffic
                .as_ref()
                .map_or(0, |t| t.reads_bytes + t.writes_bytes)
        };
        let time = |r: &VariantRun| r.forward.as_ref().and_then(|f| med(f.gpu_span_us));
        let mem = |r: &VariantRun| r.memory.as_ref().map_or(0, |m| m.total_bytes);
        let nn = |r: &VariantRun| r.memory.as_ref().map_or(0, |m| m.n_by_n_buffers.len());
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("{:.2}×", a / b)
            } else {
                "-".into()
            }
        };
        let _ = writeln!(
            s,
            "   {:<16} {:>2} dispatches, bytes moved {:>10}, GPU {:>12}, memory {:>10}, {} N×N buffer(s)",
            u.variant, u.predicted_dispatches, bytes(bytes_of(u)), us(time(u)), bytes(mem(u)), nn(u)
        );
        let _ = writeln!(
            s,
            "   {:<16} {:>2} dispatches, bytes moved {:>10}, GPU {:>12}, memory {:>10}, {} N×N buffer(s)",
            t.variant, t.predicted_dispatches, bytes(bytes_of(t)), us(time(t)), bytes(mem(t)), nn(t)
        );
        let _ = writeln!(
            s,
            "   -> {} moves {} the bytes, takes {} the time and holds {} the memory of tiled",
            u.variant,
            ratio(bytes_of(u) as f64, bytes_of(t) as f64),
            match (time(u), time(t)) {
                (Some(a), Some(b)) => ratio(a, b),
                _ => "-".into(),
            },
            ratio(mem(u) as f64, mem(t) as f64),
        );
    }
    let _ = writeln!(
        s,
        "   The fused kernel does the same FLOPs (or fewer when causal blocks are skipped) but never writes \
         the N×N scores to device memory: its traffic grows like N·D·N/BR, not N². On a software adapter \
         compute, not bandwidth, often bounds both, so the time ratio can be smaller than the bytes ratio."
    );
    s
}

/// The whole report.
pub fn report(p: &Problem, runs: &[VariantRun], x: &HostExtras) -> String {
    let mut s = String::new();
    for r in runs {
        s.push_str(&predicted_vs_observed(r));
        s.push('\n');
    }
    let mut diffs = Vec::new();
    for a in runs {
        for b in runs {
            if let Some(d) = plan_difference(p, a, b) {
                diffs.push(d);
            }
        }
    }
    if !diffs.is_empty() {
        let _ = writeln!(s, "== Plan differences");
        for d in diffs {
            let _ = writeln!(s, "   {d}");
        }
        s.push('\n');
    }
    s.push_str(&six_questions(runs, x));
    s.push('\n');
    s.push_str(&fusion(runs));
    s.push('\n');
    if p.backward {
        s.push_str(&training(runs));
        s.push('\n');
    }
    s.push_str(&verdicts(runs));
    s
}

/// `explain --dropout P`: the eval-mode pitfall shown on the GPU. `with` ran with the problem's
/// dropout, `without` is the same variant, inputs and seed with dropout 0 (what evaluation should
/// run): how far the two outputs differ, which elements changed, what dropout cost in time.
pub fn dropout_pitfall(p: &Problem, with: &VariantRun, without: &VariantRun) -> String {
    let mut s = String::from("== Dropout: the eval-mode pitfall\n");
    let (Some(a), Some(b)) = (&with.measurement, &without.measurement) else {
        return s;
    };
    let (mut worst, mut at, mut changed) = (0.0f32, 0usize, 0usize);
    for (e, (x, y)) in a.output.iter().zip(&b.output).enumerate() {
        let d = (x - y).abs();
        if d > 0.0 {
            changed += 1;
        }
        if d > worst {
            worst = d;
            at = e;
        }
    }
    let d = p.head_dim as usize;
    let n = p.seq as usize;
    let (row, col) = (at / d, at % d);
    let (g, i) = (row / n, row % n);
    let _ = writeln!(
        s,
        "   {} with --dropout {} vs --dropout 0, same inputs and seed: {} of {} output elements \
         differ, the largest by {:.4} at (b={}, h={}, i={}, d={col}).",
        with.variant,
        p.dropout,
        changed,
        a.output.len(),
        worst,
        g / p.heads as usize,
        g % p.heads as usize,
        i
    );
    let _ = writeln!(
        s,
        "   {} against the f64 reference with its own dropout ({} with dropout, {} without): \
         the difference is the dropout itself. In {} mode SDPA still drops: \
         F.scaled_dot_product_attention(..., dropout_p={}) never sees module.eval(), so an \
         evaluation that forgets `dropout_p=self.p if self.training else 0.0` gets the first \
         output, not the second.",
        if with.passed() && without.passed() {
            "Each passes"
        } else {
            "NOT both pass"
        },
        if with.passed() { "PASS" } else { "FAIL" },
        if without.passed() { "PASS" } else { "FAIL" },
        p.mode.name(),
        p.dropout
    );
    let med = |r: &VariantRun| {
        r.forward
            .as_ref()
            .and_then(|f| f.gpu_sum_us.as_ref())
            .map(|x| x.median)
    };
    if let (Some(x), Some(y)) = (med(with), med(without)) {
        let _ = writeln!(
            s,
            "   Time: {x:.1} µs with dropout, {y:.1} µs without ({:+.1} %): the Philox4x32-10 \
             keep mask is computed on the fly{}.",
            (x / y - 1.0) * 100.0,
            if with.dispatches.iter().any(|d| d.name == "dropout") {
                ", in a dispatch of its own over the N x N probabilities"
            } else {
                " inside the fused kernel"
            }
        );
    }
    s
}

/// PyTorch's autograd kernels per backward at B8 H16 N1024 D64 causal on the H200 (PyTorch 2.11,
/// `bench/torch_sdpa.py --backward`, results/EXPERIMENTS.md, v20-backward/torch_bwd_*_N1024.json):
/// (code, f32, f16).
pub const TORCH_BACKWARD_KERNELS: &[(&str, u32, u32)] = &[
    ("naive (q@kᵀ, *scale, masked_fill, softmax, @v)", 9, 9),
    ("naive-inplace", 9, 9),
    ("math (SDPA MATH backend)", 9, 13),
    ("flash", 0, 5),
    ("efficient", 9, 6),
    ("cudnn", 0, 3),
];

/// `explain --backward`: per variant the dispatches of the two passes, the tensors the forward
/// saves for the backward and their bytes (side by side), the step's peak memory and whether its
/// in-place steps are safe for training; then PyTorch's autograd kernel counts for comparison.
pub fn training(runs: &[VariantRun]) -> String {
    let mut s = String::from("== Training: what the forward keeps for the backward\n");
    for r in runs {
        match &r.training {
            Some(t) => {
                let saved: Vec<String> = t
                    .saved
                    .iter()
                    .map(|(n, b)| format!("{n} {}", crate::report::table::bytes(*b)))
                    .collect();
                let _ = writeln!(
                    s,
                    "   {:<16} {} forward + {} backward dispatches; saves {}; beyond the inputs {}; \
                     training-step peak {}",
                    r.variant,
                    t.forward_dispatches,
                    t.backward_dispatches,
                    saved.join(", "),
                    crate::report::table::bytes(t.saved_beyond_inputs_bytes),
                    crate::report::table::bytes(t.peak_bytes)
                );
                if let Some(n) = &t.in_place {
                    let _ = writeln!(s, "   {:<16} {n}", "");
                }
            }
            None => {
                let _ = writeln!(
                    s,
                    "   {:<16} no training step here: {}",
                    r.variant,
                    r.reason.as_deref().unwrap_or("-")
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "   The materialized variants keep P (N x N per head) for the backward; the fused ones keep \
         only L (one float per row) and recompute P, trading FLOPs for bytes as in the forward."
    );
    let _ = writeln!(
        s,
        "   PyTorch autograd kernels per backward (H200, PyTorch 2.11, B8 H16 N1024 D64 causal; \
         0 = backend unavailable at f32):"
    );
    for (code, f32k, f16k) in TORCH_BACKWARD_KERNELS {
        let _ = writeln!(s, "     {code:<48} f32 {f32k:>2}   f16 {f16k:>2}");
    }
    s
}

/// Each variant's validation against the f64 reference: the last word of the demo is whether the
/// numbers it explained were right.
fn verdicts(runs: &[VariantRun]) -> String {
    let mut s = String::from("== Validation against the f64 reference\n");
    for r in runs {
        let line = match &r.validation {
            Some(v) => {
                let mut line = format!(
                    "{}: max abs err {:.3e}, {} NaN, {} rows checked",
                    v.verdict, v.max_abs_err, v.nan_count, v.rows_checked
                );
                if let Some(t) = &r.training {
                    for g in &t.grads {
                        line += &format!(
                            "; {} {} {:.3e} ({} of {} heads)",
                            g.tensor, g.verdict, g.max_abs_err, g.heads_checked, g.heads_total
                        );
                    }
                }
                line
            }
            None => format!(
                "not run: {}",
                r.reason.as_deref().unwrap_or("no measurement")
            ),
        };
        let _ = writeln!(s, "   {:<16} {line}", r.variant);
    }
    s
}
