//! `attn-wgpu report` and `run --html`: one self-contained HTML page over any number of result
//! files (attn-wgpu runs, sweeps, bench/torch_sdpa.py). Inline CSS and inline SVG only: no script,
//! no font or image from the network, readable in print (dark text on white, colours only as
//! accents).
//!
//! Per attn-wgpu run file: the environment (tool, commit, wgpu, adapter, driver, backend,
//! command), a table per variant (GPU median/p10/p90, dispatches predicted vs observed, bytes
//! moved, memory, verdict and worst element), the predicted-vs-observed dispatch table, one
//! forward as a timeline (CPU lane: encode + submit, wait; GPU lane: a bar per dispatch), and a
//! roofline (the probed ceilings, each dispatch a point) when the file has one. Per sweep file its
//! time, bytes and memory plots; per PyTorch file its table; then the cross-file comparison
//! (as `compare`).

use std::fmt::Write;
use std::path::Path;

use serde_json::Value;

use crate::report::compare::{self, Entry};
use crate::report::lesson;
use crate::sweep::{plot_svg, Series};

/// A result file, read and parsed.
pub struct Input {
    pub name: String,
    pub value: Value,
}

fn esc(s: &str) -> String {
    html_escape::encode_text(s).into_owned()
}

fn num(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("–".into(), |x| format!("{x:.digits$}"))
}

/// A count from a result file (a dimension, an index, FLOPs): digits, or "?" for anything else
/// (a hostile file's string or array must not reach the page as raw text).
fn int(v: &Value) -> String {
    v.as_u64().map_or("?".into(), |x| x.to_string())
}

fn bytes(v: &Value) -> String {
    v.as_u64().map_or("–".into(), crate::report::table::bytes)
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#111;\
background:#fff;line-height:1.4}h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:2px solid \
#345;padding-bottom:.2em;margin-top:2em}h3{font-size:1.05em;margin-top:1.4em}table{border-collapse:\
collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #999;padding:.2em .5em;text-align:\
right}th{background:#e8ecf0}td.l,th.l{text-align:left}.pass{color:#060;font-weight:bold}.fail{color:\
#a00;font-weight:bold}.muted{color:#555}svg{max-width:100%;height:auto;border:1px solid #ccc;\
margin:.4em 0}code{font-size:.9em}@media print{h2{break-before:page}}";

/// The whole page.
pub fn page(inputs: &[Input]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>attn-wgpu report</title><style>{STYLE}</style></head><body>\n\
         <h1>attn-wgpu report</h1>\n<p class=\"muted\">{} result file(s); written by attn-wgpu {} \
         (commit {}). Times are GPU timestamps (attn-wgpu) or CUDA events (PyTorch), medians \
         over the recorded forwards; bytes are the plan's estimates.</p>\n",
        inputs.len(),
        env!("CARGO_PKG_VERSION"),
        esc(option_env!("ATTN_WGPU_GIT_COMMIT").unwrap_or("unknown"))
    );
    let entries = entries(inputs);
    lesson(&mut s, &entries);
    for i in inputs {
        match i.value["tool"].as_str() {
            Some("attn-wgpu") => run_section(&mut s, i),
            Some("attn-wgpu sweep") => sweep_section(&mut s, i),
            Some("torch_sdpa.py") => torch_section(&mut s, i),
            _ => {}
        }
    }
    comparison(&mut s, &entries);
    s.push_str("</body></html>\n");
    s
}

fn env_table(s: &mut String, v: &Value) {
    let a = &v["adapter"];
    let ver = &v["versions"];
    let rows = [
        (
            "tool",
            format!("{} {}", str_of(&v["tool"]), str_of(&ver["attn_wgpu"])),
        ),
        ("commit", str_of(&ver["git_commit"])),
        ("wgpu", str_of(&ver["wgpu"])),
        (
            "adapter",
            format!("{} ({})", str_of(&a["name"]), str_of(&a["device_type"])),
        ),
        (
            "driver",
            format!("{} {}", str_of(&a["driver"]), str_of(&a["driver_info"])),
        ),
        ("backend", str_of(&a["backend"])),
        (
            "command",
            crate::report::json::binary_by_name(&str_of(&v["command"])),
        ),
    ];
    s.push_str("<table>");
    for (k, x) in rows {
        let _ = write!(
            s,
            "<tr><th class=\"l\">{k}</th><td class=\"l\"><code>{}</code></td></tr>",
            esc(&x)
        );
    }
    s.push_str("</table>\n");
}

fn str_of(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Null => "–".into(),
        other => other.to_string(),
    }
}

fn verdict_cell(v: &Value) -> String {
    match v["verdict"].as_str() {
        Some("PASS") => "<td class=\"pass\">PASS</td>".into(),
        Some(x) => format!("<td class=\"fail\">{}</td>", esc(x)),
        None => "<td>–</td>".into(),
    }
}

fn worst(v: &Value) -> String {
    let w = &v["worst"];
    if w.is_null() {
        return "–".into();
    }
    format!(
        "(b={}, h={}, i={}, d={}): {} vs {}; max abs err {}",
        int(&w["b"]),
        int(&w["h"]),
        int(&w["i"]),
        int(&w["d"]),
        num(&w["gpu"], 6),
        num(&w["ref"], 6),
        v["max_abs_err"]
            .as_f64()
            .map_or("–".into(), |x| format!("{x:.3e}"))
    )
}

fn run_section(s: &mut String, i: &Input) {
    let v = &i.value;
    let p = &v["problem"];
    let _ = writeln!(
        s,
        "<h2>{} / {} — B{} H{} N{} D{} {} {}</h2>\n<p class=\"muted\">{}</p>",
        esc(&str_of(&v["adapter"]["name"])),
        esc(&str_of(&v["adapter"]["backend"])),
        int(&p["batch"]),
        int(&p["heads"]),
        int(&p["seq"]),
        int(&p["head_dim"]),
        esc(&str_of(&v["dtype"])),
        if p["causal"].as_bool() == Some(true) {
            "causal"
        } else {
            "non-causal"
        },
        esc(&i.name)
    );
    env_table(s, v);
    let empty = vec![];
    let runs = v["runs"].as_array().unwrap_or(&empty);
    s.push_str(
        "<h3>Variants</h3><table><tr><th class=\"l\">variant</th><th>dispatches (plan / timed)</th>\
         <th>GPU median µs</th><th>p10 µs</th><th>p90 µs</th><th>bytes moved</th><th>memory</th>\
         <th>verdict</th><th class=\"l\">worst element</th></tr>\n",
    );
    for r in runs {
        if r["status"] != "ok" {
            let _ = writeln!(
                s,
                "<tr><td class=\"l\">{}</td><td class=\"l\" colspan=\"8\">{}: {}</td></tr>",
                esc(&str_of(&r["variant"])),
                esc(&str_of(&r["status"])),
                esc(&str_of(&r["reason"]))
            );
            continue;
        }
        let f = &r["forward"]["gpu_span_us"];
        let t = &r["traffic"];
        let moved = match (t["reads_bytes"].as_u64(), t["writes_bytes"].as_u64()) {
            (Some(a), Some(b)) => crate::report::table::bytes(a + b),
            _ => "–".into(),
        };
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td>{}<td class=\"l\">{}</td></tr>",
            esc(&str_of(&r["variant"])),
            int(&r["predicted_dispatches"]), int(&r["observed_dispatches"]),
            num(&f["median"], 1), num(&f["p10"], 1), num(&f["p90"], 1),
            moved,
            bytes(&r["memory"]["total_bytes"]),
            verdict_cell(&r["validation"]),
            esc(&worst(&r["validation"]))
        );
    }
    s.push_str("</table>\n");
    for r in runs.iter().filter(|r| r["status"] == "ok") {
        dispatch_table(s, r);
        timeline(s, r);
    }
    roofline(s, v, runs);
}

/// Predicted (plan) against observed (timestamps), per dispatch.
fn dispatch_table(s: &mut String, r: &Value) {
    let _ = writeln!(
        s,
        "<h3>{}: dispatches, predicted and observed</h3><table><tr><th class=\"l\">dispatch</th>\
         <th>workgroups</th><th>workgroup memory</th><th>bytes read + written (plan)</th>\
         <th>FLOPs (plan)</th><th>GPU median µs</th><th>GB/s</th><th>GFLOP/s</th></tr>",
        esc(&str_of(&r["variant"]))
    );
    for d in r["dispatches"].as_array().into_iter().flatten() {
        let rw = d["reads_bytes"].as_u64().unwrap_or(0) + d["writes_bytes"].as_u64().unwrap_or(0);
        // One grid per chunk of heads: 8×8×128, or 8×8×64 + 8×8×64.
        let wg = d["workgroups"]
            .as_array()
            .map(|chunks| {
                chunks
                    .iter()
                    .map(|g| {
                        g.as_array()
                            .map(|xyz| {
                                xyz.iter()
                                    .map(|x| x.to_string())
                                    .collect::<Vec<_>>()
                                    .join("×")
                            })
                            .unwrap_or_else(|| g.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(" + ")
            })
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&str_of(&d["name"])),
            wg,
            // Files written before the field existed have none.
            d["workgroup_storage_bytes"]
                .as_u64()
                .map_or("–".to_string(), crate::report::table::bytes),
            crate::report::table::bytes(rw),
            int(&d["flops"]),
            num(&d["gpu_us"]["median"], 1),
            num(&d["achieved_gbps"], 1),
            num(&d["achieved_gflops"], 1)
        );
    }
    s.push_str("</table>\n");
}

const PALETTE: [&str; 6] = [
    "#1f5fa8", "#c4561d", "#2e8540", "#7b3fa0", "#a8861f", "#1f8a8a",
];

/// One recorded forward (the one with the median GPU span) as two lanes: the CPU (encode +
/// submit, then the wait) and the GPU (a bar per dispatch, from its timestamps), the GPU lane
/// starting at the end of the submit (the two clocks are not otherwise aligned).
fn timeline(s: &mut String, r: &Value) {
    let Some(reps) = r["measurement"]["reps"]
        .as_array()
        .filter(|x| !x.is_empty())
    else {
        return;
    };
    let mut sorted: Vec<&Value> = reps.iter().collect();
    sorted.sort_by(|a, b| {
        let x = a["gpu_span_us"].as_f64().unwrap_or(0.0);
        let y = b["gpu_span_us"].as_f64().unwrap_or(0.0);
        x.total_cmp(&y)
    });
    let rep = sorted[sorted.len() / 2];
    let enc = rep["host_encode_submit_us"].as_f64().unwrap_or(0.0);
    let wait = rep["host_wait_us"].as_f64().unwrap_or(0.0);
    let offsets = rep["dispatch_offsets_us"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let gpu_end = offsets
        .iter()
        .filter_map(|o| o[1].as_f64())
        .fold(0.0, f64::max);
    let total = (enc + wait).max(enc + gpu_end).max(1e-3);
    let (w, left) = (1000.0, 90.0);
    let x = |t: f64| left + t / total * (w - left - 10.0);
    let names: Vec<String> = r["dispatches"]
        .as_array()
        .map(|d| d.iter().map(|d| str_of(&d["name"])).collect())
        .unwrap_or_default();
    let _ = write!(
        s,
        "<h3>{}: one forward (the median of the recorded ones)</h3>\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"150\" viewBox=\"0 0 {w} 150\" \
         role=\"img\"><rect width=\"{w}\" height=\"150\" fill=\"#fff\"/>\
         <text x=\"5\" y=\"40\" font-size=\"13\">CPU</text><text x=\"5\" y=\"95\" font-size=\"13\">GPU</text>\
         <rect x=\"{}\" y=\"25\" width=\"{:.2}\" height=\"22\" fill=\"#555\"><title>encode + submit {enc:.1} µs</title></rect>\
         <rect x=\"{:.2}\" y=\"25\" width=\"{:.2}\" height=\"22\" fill=\"#bbb\"><title>wait {wait:.1} µs</title></rect>",
        esc(&str_of(&r["variant"])),
        x(0.0),
        (x(enc) - x(0.0)).max(1.0),
        x(enc),
        (x(enc + wait) - x(enc)).max(1.0)
    );
    for (k, o) in offsets.iter().enumerate() {
        let (b, e) = (o[0].as_f64().unwrap_or(0.0), o[1].as_f64().unwrap_or(0.0));
        let name = names.get(k).cloned().unwrap_or_default();
        let _ = write!(
            s,
            "<rect x=\"{:.2}\" y=\"80\" width=\"{:.2}\" height=\"22\" fill=\"{}\"><title>{} {:.1} µs</title></rect>",
            x(enc + b),
            (x(enc + e) - x(enc + b)).max(1.0),
            PALETTE[k % PALETTE.len()],
            esc(&name),
            e - b
        );
        if x(enc + e) - x(enc + b) > 8.0 * name.len() as f64 {
            let _ = write!(
                s,
                "<text x=\"{:.2}\" y=\"120\" font-size=\"11\">{}</text>",
                x(enc + b),
                esc(&name)
            );
        }
    }
    let _ = writeln!(
        s,
        "<text x=\"{left}\" y=\"143\" font-size=\"11\" fill=\"#333\">0 µs</text>\
         <text x=\"{}\" y=\"143\" font-size=\"11\" fill=\"#333\" text-anchor=\"end\">{total:.1} µs</text></svg>",
        w - 10.0
    );
}

/// The probed roof (min(peak, bandwidth · intensity)) and each dispatch as a point.
fn roofline(s: &mut String, v: &Value, runs: &[Value]) {
    let roof = &v["roofline"];
    let (Some(bw), Some(peak)) = (
        roof["bandwidth_gbps"].as_f64(),
        roof["peak_gflops"].as_f64(),
    ) else {
        return;
    };
    let mut data: Series = Vec::new();
    let mut lo = f64::INFINITY;
    let mut hi: f64 = 0.0;
    for r in runs {
        for d in r["dispatches"].as_array().into_iter().flatten() {
            let (Some(i), Some(a)) = (
                d["roofline"]["intensity"].as_f64(),
                d["roofline"]["achieved"].as_f64(),
            ) else {
                continue;
            };
            if i <= 0.0 || a <= 0.0 {
                continue;
            }
            lo = lo.min(i);
            hi = hi.max(i);
            data.push((
                format!("{} {}", str_of(&r["variant"]), str_of(&d["name"])),
                vec![(i, a)],
            ));
        }
    }
    if data.is_empty() {
        return;
    }
    let ridge = peak / bw;
    let (a, b) = ((lo.min(ridge) / 4.0).max(1e-3), hi.max(ridge) * 4.0);
    let roof_pts: Vec<(f64, f64)> = (0..=40)
        .map(|k| {
            let i = a * (b / a).powf(k as f64 / 40.0);
            (i, peak.min(bw * i))
        })
        .collect();
    data.insert(0, ("roof (probe)".into(), roof_pts));
    let title = format!(
        "Roofline: {:.0} GB/s, {:.0} GFLOP/s ({})",
        bw,
        peak,
        str_of(&roof["peak_fma"])
    );
    if let Ok(svg) = plot_svg(&title, "FLOP per byte (log)", "GFLOP/s (log)", &data, &[]) {
        let _ = writeln!(s, "<h3>Roofline</h3>{}", strip_xml_header(&svg));
    }
}

fn strip_xml_header(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(k) => &svg[k..],
        None => svg,
    }
}

fn sweep_section(s: &mut String, i: &Input) {
    let v = &i.value;
    let p = &v["problem"];
    let _ = writeln!(
        s,
        "<h2>Sweep: {} / {} — B{} H{} D{} {}</h2><p class=\"muted\">{}</p>",
        esc(&str_of(&v["adapter"]["name"])),
        esc(&str_of(&v["adapter"]["backend"])),
        int(&p["batch"]),
        int(&p["heads"]),
        int(&p["head_dim"]),
        esc(&str_of(&p["dtype"])),
        esc(&i.name)
    );
    env_table(s, v);
    let points = v["points"].as_array().cloned().unwrap_or_default();
    for (key, title, y) in [
        (
            "gpu_median_us",
            "GPU time per forward vs N",
            "median GPU µs (log)",
        ),
        (
            "bytes_moved",
            "Estimated bytes moved per forward vs N",
            "bytes (log)",
        ),
        (
            "memory_bytes",
            "Device memory allocated vs N",
            "bytes (log)",
        ),
    ] {
        let mut data: Series = Vec::new();
        for pt in &points {
            let (Some(n), Some(y)) = (pt["seq"].as_f64(), pt[key].as_f64()) else {
                continue;
            };
            let name = str_of(&pt["variant"]);
            match data.iter_mut().find(|(x, _)| *x == name) {
                Some((_, d)) => d.push((n, y)),
                None => data.push((name, vec![(n, y)])),
            }
        }
        if let Ok(svg) = plot_svg(title, "sequence length N", y, &data, &[]) {
            s.push_str(strip_xml_header(&svg));
            s.push('\n');
        }
    }
}

fn torch_section(s: &mut String, i: &Input) {
    let v = &i.value;
    let p = &v["problem"];
    let _ = writeln!(
        s,
        "<h2>PyTorch: {} — B{} H{} N{} D{} {} {}</h2><p class=\"muted\">{}</p>",
        esc(&str_of(&v["adapter"]["name"])),
        int(&p["batch"]),
        int(&p["heads"]),
        int(&p["seq"]),
        int(&p["head_dim"]),
        esc(&str_of(&p["dtype"])),
        if p["causal"].as_bool() == Some(true) {
            "causal"
        } else {
            "non-causal"
        },
        esc(&i.name)
    );
    let _ = writeln!(
        s,
        "<table><tr><th class=\"l\">command</th><td class=\"l\"><code>{}</code></td></tr></table>",
        esc(&str_of(&v["command"]))
    );
    s.push_str(
        "<table><tr><th class=\"l\">variant</th><th class=\"l\">status</th><th>median µs</th>\
         <th>kernels</th><th>peak memory</th><th>verdict</th></tr>\n",
    );
    for r in v["runs"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
            esc(&str_of(&r["variant"])),
            esc(&str_of(&r["status"])),
            num(&r["forward"]["gpu_us"]["median"], 1),
            int(&r["kernels_per_forward"]),
            bytes(&r["memory"]["peak_allocated_bytes"]),
            verdict_cell(&r["validation"])
        );
    }
    s.push_str("</table>\n");
}

/// Every row of every file, as `compare` reads them.
fn entries(inputs: &[Input]) -> Vec<Entry> {
    inputs
        .iter()
        .filter_map(|i| compare::parse_value(&i.name, &i.value).ok())
        .flatten()
        .collect()
}

/// The most lesson charts the page opens with; the rest of the problems are in the tables.
const LESSON_CHARTS: usize = 8;

/// The page's first picture ([`lesson`]): time beside bytes per variant, per problem.
fn lesson(s: &mut String, entries: &[Entry]) {
    let groups = lesson::groups(entries);
    if groups.is_empty() {
        return;
    }
    s.push_str(
        "<h2>Where the time goes: GPU time beside bytes moved</h2>\n<p class=\"muted\">Every \
         variant does the same FLOPs; the materialized ones (orange) write the N×N scores to \
         device memory and read them back, the fused ones (blue) keep them on chip. PyTorch's \
         rows, on the same GPU, are paler.</p>\n",
    );
    for g in groups.iter().take(LESSON_CHARTS) {
        s.push_str(&lesson::svg(g));
        s.push('\n');
    }
    if groups.len() > LESSON_CHARTS {
        let _ = writeln!(
            s,
            "<p class=\"muted\">{} more problems in the comparison table at the end.</p>",
            groups.len() - LESSON_CHARTS
        );
    }
}

/// `compare`'s table ([`compare::grid`]): a row per (variant, shape, dtype), a column per
/// adapter / backend, the median forward time in each cell.
fn comparison(s: &mut String, entries: &[Entry]) {
    if entries.is_empty() {
        return;
    }
    let g = compare::grid(entries);
    s.push_str(
        "<h2>Comparison (median forward time)</h2><table><tr><th class=\"l\">variant</th>\
         <th class=\"l\">shape</th><th class=\"l\">dtype</th>",
    );
    for c in &g.cols {
        let _ = write!(s, "<th>{}</th>", esc(c));
    }
    s.push_str("</tr>\n");
    for (r, (v, sh, dt)) in g.rows.iter().enumerate() {
        let _ = write!(
            s,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>",
            esc(v),
            esc(sh),
            esc(dt)
        );
        for c in 0..g.cols.len() {
            let text = g
                .cell
                .get(&(r, c))
                .map_or(String::new(), |e| match e.median_us {
                    Some(m) => format!("{m:.1} µs"),
                    None => e.status.clone(),
                });
            let _ = write!(s, "<td>{}</td>", esc(&text));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
}

/// Reads result files for the report: a missing, unreadable or non-JSON file, one that is no
/// result file of a known tool or of a newer schema, one `compare` cannot read, or one with no
/// run, is an error naming it.
pub fn read_inputs(files: &[impl AsRef<Path>]) -> Result<Vec<Input>, String> {
    let mut out = Vec::new();
    for f in files {
        let name = f.as_ref().display().to_string();
        let text = crate::infile::read_to_string(f.as_ref()).map_err(|e| format!("{name}: {e}"))?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| format!("{name}: not JSON: {e}"))?;
        match value["tool"].as_str() {
            Some("attn-wgpu" | "attn-wgpu sweep" | "torch_sdpa.py") => {}
            other => {
                return Err(format!(
                    "{name}: not a result file (tool {}; expected attn-wgpu, attn-wgpu sweep or \
                     torch_sdpa.py)",
                    other.map_or("missing".to_string(), |t| format!("`{t}`"))
                ))
            }
        }
        match value["schema_version"].as_u64() {
            Some(k) if k <= compare::KNOWN_SCHEMA => {}
            other => {
                return Err(format!(
                    "{name}: schema_version {} is not one this tool reads (1..={})",
                    other.map_or("missing".to_string(), |k| k.to_string()),
                    compare::KNOWN_SCHEMA
                ))
            }
        }
        // What `compare` refuses, the report refuses too; a file with no run is nothing to report.
        let rows = compare::parse_value(&name, &value).map_err(|e| e.to_string())?;
        if rows.is_empty() {
            return Err(format!(
                "{name}: nothing to report (the file holds no runs or points)"
            ));
        }
        out.push(Input { name, value });
    }
    Ok(out)
}
