//! `compare`: merges result files — attn-wgpu's own (`run --json`, `sweep`'s sweep.json) and
//! `bench/torch_sdpa.py`'s — into Markdown tables. Rows are variant × shape × dtype, columns are
//! adapter / backend; a cell holds the median forward time in µs and its ratio to the baseline
//! variant measured on the same adapter (same backend first, else any backend of that adapter, so
//! a wgpu Vulkan run on an H200 can be set against PyTorch CUDA on the same H200).
//!
//! The files are read as plain JSON (`serde_json::Value`), field by field, so that both tools'
//! files — and older ones — load; what is missing shows as `-`.
//!
//! Times: attn-wgpu's `forward.gpu_span_us` (first dispatch begin to last dispatch end, timestamps)
//! and torch_sdpa.py's `forward.gpu_us` (CUDA events around the call). PyTorch variants are
//! prefixed `torch:` (`torch:flash`, `torch:naive-inplace`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use serde_json::Value;

use crate::report::table::bytes;

/// One run (one variant at one shape on one adapter) from some file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub file: String,
    pub tool: String,
    /// Display name: attn-wgpu variants as is, PyTorch ones as `torch:<variant>`.
    pub variant: String,
    pub shape: String,
    pub dtype: String,
    pub adapter: String,
    pub backend: String,
    pub status: String,
    pub reason: Option<String>,
    pub median_us: Option<f64>,
    /// Dispatches (attn-wgpu: the plan's count) or kernels (torch.profiler) per forward.
    pub kernels: Option<u64>,
    /// attn-wgpu: all buffers of the plan; torch: peak allocated during one forward.
    pub memory_bytes: Option<u64>,
    pub verdict: Option<String>,
    /// attn-wgpu: the plan's estimated bytes read + written (forward, or backward on a backward
    /// row); None for PyTorch, whose traffic is not modelled.
    pub bytes_moved: Option<u64>,
    /// Whether the N x N scores reach device memory: attn-wgpu plans with N x N buffers, and
    /// PyTorch's naive / naive-inplace / math; fused kernels (and flash, efficient, cuDNN) not.
    pub materialized: Option<bool>,
}

impl Entry {
    pub fn column(&self) -> String {
        format!("{} / {}", self.adapter, self.backend)
    }
}

/// Errors name the file; the CLI prints them and exits 2.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: not valid JSON: {source}")]
    Json {
        file: String,
        source: serde_json::Error,
    },
    #[error("{file}: not a result file: {why}")]
    Schema { file: String, why: String },
}

fn s(v: &Value) -> Option<String> {
    match v {
        Value::String(x) => Some(x.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Parses one result file (already read) into entries.
pub fn parse(file: &str, text: &str) -> Result<Vec<Entry>, CompareError> {
    let v: Value = serde_json::from_str(text).map_err(|source| CompareError::Json {
        file: file.into(),
        source,
    })?;
    parse_value(file, &v)
}

/// [`parse`] of a file already parsed as JSON.
pub fn parse_value(file: &str, v: &Value) -> Result<Vec<Entry>, CompareError> {
    let schema = |why: &str| CompareError::Schema {
        file: file.into(),
        why: why.into(),
    };
    let tool = v["tool"]
        .as_str()
        .ok_or_else(|| schema("no `tool` field (expected attn-wgpu or torch_sdpa.py)"))?
        .to_string();
    let torch = match tool.as_str() {
        "attn-wgpu" => false,
        "torch_sdpa.py" => true,
        "attn-wgpu sweep" => return parse_sweep(file, v),
        other => {
            return Err(schema(&format!(
                "unknown tool `{other}` (expected attn-wgpu, attn-wgpu sweep or torch_sdpa.py)"
            )))
        }
    };
    let runs = v["runs"]
        .as_array()
        .ok_or_else(|| schema("no `runs` array"))?;
    let p = &v["problem"];
    if !p.is_object() {
        return Err(schema("no `problem` object"));
    }
    let num = |k: &str| p[k].as_u64().map_or("?".into(), |x| x.to_string());
    let causal = p["causal"].as_bool().or(v["causal"].as_bool());
    let dropout = dropout_suffix(p, v);
    // A training run's rows (its forward in training mode and its backward) are a shape of their
    // own: its forward time is not the inference forward's.
    let training = if p["backward"].as_bool() == Some(true)
        || runs.iter().any(|r| r["backward"]["gpu_us"].is_object())
    {
        " training"
    } else {
        ""
    };
    let shape = format!(
        "B{} H{}{} N{}{} D{}{}{dropout}{training}",
        num("batch"),
        num("heads"),
        kv_suffix(p),
        num("seq"),
        m_suffix(p),
        num("head_dim"),
        match causal {
            Some(true) => " causal",
            Some(false) => " non-causal",
            None => "",
        }
    );
    let dtype = s(&p["dtype"])
        .or_else(|| s(&v["dtype"]))
        .unwrap_or_else(|| "?".into());
    let adapter = s(&v["adapter"]["name"]).unwrap_or_else(|| "?".into());
    let backend = s(&v["adapter"]["backend"])
        .or_else(|| s(&v["backend"]))
        .unwrap_or_else(|| "?".into());
    let mut out = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let name = r["variant"]
            .as_str()
            .ok_or_else(|| schema(&format!("runs[{i}] has no `variant`")))?;
        let f = &r["forward"];
        // A training run's span covers forward and backward: its forward row is the forward's
        // dispatches alone (the backward gets a row of its own below).
        let median_us = r["training"]["forward_gpu_us"]["median"]
            .as_f64()
            .or_else(|| f["gpu_us"]["median"].as_f64())
            .or_else(|| f["gpu_span_us"]["median"].as_f64());
        let kernels = r["kernels_per_forward"]
            .as_u64()
            .or_else(|| r["predicted_dispatches"].as_u64());
        let m = &r["memory"];
        let memory_bytes = m["peak_allocated_bytes"]
            .as_u64()
            .or_else(|| m["total_bytes"].as_u64());
        let tr = &r["traffic"];
        let bytes_moved = if torch {
            None
        } else {
            r["training"]["forward_bytes"]
                .as_u64()
                .or_else(|| Some(tr["reads_bytes"].as_u64()? + tr["writes_bytes"].as_u64()?))
        };
        let materialized = if torch {
            // PyTorch's fused SDPA backends; its naive code and SDPA's math path materialize.
            Some(!matches!(name, "flash" | "efficient" | "cudnn"))
        } else {
            m["n_by_n_buffers"].as_array().map(|b| !b.is_empty())
        };
        out.push(Entry {
            file: file.into(),
            tool: tool.clone(),
            variant: if torch {
                format!("torch:{name}")
            } else {
                name.to_string()
            },
            shape: shape.clone(),
            dtype: dtype.clone(),
            adapter: adapter.clone(),
            backend: backend.clone(),
            status: r["status"].as_str().unwrap_or("?").to_string(),
            reason: s(&r["reason"]),
            median_us,
            kernels,
            memory_bytes,
            verdict: s(&r["validation"]["verdict"]),
            bytes_moved,
            materialized,
        });
        // A training run's backward as a row of its own, `<variant> (backward)`: attn-wgpu's
        // `training` (backward dispatches' GPU time, the step's peak memory, the gradients'
        // verdicts) or torch_sdpa.py's `backward` (CUDA events around autograd's backward).
        let (t, b) = (&r["training"], &r["backward"]);
        if t.is_object() || b["gpu_us"].is_object() {
            let last = out.last().expect("just pushed").clone();
            let verdict = if t.is_object() {
                t["grads"].as_array().map(|g| {
                    if g.iter().all(|x| x["verdict"] == "PASS") {
                        "PASS".to_string()
                    } else {
                        "FAIL".to_string()
                    }
                })
            } else {
                s(&b["verdict"])
            };
            out.push(Entry {
                variant: format!("{} (backward)", last.variant),
                median_us: t["backward_gpu_us"]["median"]
                    .as_f64()
                    .or_else(|| b["gpu_us"]["median"].as_f64()),
                kernels: t["backward_dispatches"]
                    .as_u64()
                    .or_else(|| b["kernels_per_backward"].as_u64()),
                memory_bytes: t["peak_bytes"]
                    .as_u64()
                    .or_else(|| b["training_peak_allocated_bytes"].as_u64()),
                verdict,
                bytes_moved: t["backward_bytes"].as_u64(),
                ..last
            });
        }
    }
    Ok(out)
}

/// ` M4096` when the keys are not as many as the queries (cross-attention, decode), else empty.
fn m_suffix(problem: &Value) -> String {
    match (problem["kv_seq"].as_u64(), problem["seq"].as_u64()) {
        (Some(m), Some(n)) if m != n => format!(" M{m}"),
        _ => String::new(),
    }
}

/// ` Hkv2` when K/V heads are shared (grouped-query attention), else empty.
fn kv_suffix(problem: &Value) -> String {
    match (problem["kv_heads"].as_u64(), problem["heads"].as_u64()) {
        (Some(kv), Some(h)) if kv != h => format!(" Hkv{kv}"),
        _ => String::new(),
    }
}

/// Runs with dropout are a shape of their own (` dropout 0.1`): their time is not the forward's
/// without it. Empty without dropout (files from before `--dropout` have no field).
fn dropout_suffix(problem: &Value, file: &Value) -> String {
    problem["dropout"]
        .as_f64()
        .or_else(|| file["config"]["dropout_p"].as_f64())
        .filter(|d| *d > 0.0)
        .map_or(String::new(), |d| format!(" dropout {d}"))
}

/// A `sweep.json`: one entry per (variant, N) point.
fn parse_sweep(file: &str, v: &Value) -> Result<Vec<Entry>, CompareError> {
    let schema = |why: &str| CompareError::Schema {
        file: file.into(),
        why: why.into(),
    };
    let points = v["points"]
        .as_array()
        .ok_or_else(|| schema("sweep file without a `points` array"))?;
    let p = &v["problem"];
    let num = |k: &str| p[k].as_u64().map_or("?".into(), |x| x.to_string());
    let causal = match p["causal"].as_bool() {
        Some(true) => " causal",
        Some(false) => " non-causal",
        None => "",
    };
    let dropout = dropout_suffix(p, v);
    let mut out = Vec::new();
    for (i, pt) in points.iter().enumerate() {
        let variant = pt["variant"]
            .as_str()
            .ok_or_else(|| schema(&format!("points[{i}] has no `variant`")))?;
        out.push(Entry {
            file: file.into(),
            tool: "attn-wgpu sweep".into(),
            variant: variant.into(),
            shape: format!(
                "B{} H{}{} N{} D{}{causal}{dropout}",
                num("batch"),
                num("heads"),
                kv_suffix(p),
                pt["seq"].as_u64().map_or("?".into(), |x| x.to_string()),
                num("head_dim")
            ),
            dtype: s(&p["dtype"]).unwrap_or_else(|| "?".into()),
            adapter: s(&v["adapter"]["name"]).unwrap_or_else(|| "?".into()),
            backend: s(&v["adapter"]["backend"]).unwrap_or_else(|| "?".into()),
            status: pt["status"].as_str().unwrap_or("?").into(),
            reason: s(&pt["reason"]),
            median_us: pt["gpu_median_us"].as_f64(),
            kernels: pt["dispatches"].as_u64(),
            memory_bytes: pt["memory_bytes"].as_u64(),
            verdict: s(&pt["verdict"]),
            bytes_moved: pt["bytes_moved"].as_u64(),
            materialized: pt["n_by_n_bytes"].as_u64().map(|b| b > 0),
        });
    }
    Ok(out)
}

/// Reads and parses every file; the first bad one is the error.
pub fn load(files: &[impl AsRef<Path>]) -> Result<Vec<Entry>, CompareError> {
    load_noting(files, &mut Vec::new())
}

/// The newest `schema_version` this reader knows (attn-wgpu, sweep and torch_sdpa.py files).
pub const KNOWN_SCHEMA: u64 = 1;

/// [`load`], noting what a reader should know: a file of a newer schema than [`KNOWN_SCHEMA`]
/// (fields may be misread), and cells that several files fill (the later file's value is shown).
pub fn load_noting(
    files: &[impl AsRef<Path>],
    notes: &mut Vec<String>,
) -> Result<Vec<Entry>, CompareError> {
    let mut all: Vec<Entry> = Vec::new();
    for f in files {
        let name = f.as_ref().display().to_string();
        let text =
            crate::infile::read_to_string(f.as_ref()).map_err(|source| CompareError::Read {
                file: name.clone(),
                source,
            })?;
        let entries = parse(&name, &text)?;
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            match v["schema_version"].as_u64() {
                Some(k) if k > KNOWN_SCHEMA => notes.push(format!(
                    "{name}: schema_version {k} is newer than this tool reads ({KNOWN_SCHEMA}): \
                     fields may be missing or misread"
                )),
                None => notes.push(format!("{name}: no schema_version (read as version 1)")),
                _ => {}
            }
        }
        for e in &entries {
            if let Some(old) = all.iter().find(|o| {
                o.variant == e.variant
                    && o.shape == e.shape
                    && o.dtype == e.dtype
                    && o.column() == e.column()
                    && o.file != e.file
            }) {
                notes.push(format!(
                    "`{}` {} {} on {} is in both {} and {}: the table shows {}'s",
                    e.variant,
                    e.shape,
                    e.dtype,
                    e.column(),
                    old.file,
                    e.file,
                    e.file
                ));
            }
        }
        all.extend(entries);
    }
    Ok(all)
}

/// The variant names present in `entries` (for a baseline that is none of them).
pub fn variant_names(entries: &[Entry]) -> Vec<String> {
    let mut v: Vec<String> = entries.iter().map(|e| e.variant.clone()).collect();
    v.sort();
    v.dedup();
    v
}

/// Whether `e` is the baseline variant `name` (`torch:flash`, or a plain variant name).
fn is_baseline(e: &Entry, name: &str) -> bool {
    e.variant == name
}

/// The baseline's median for `e`: same shape and dtype; same adapter and backend first, else the
/// same adapter on any backend.
pub fn baseline_for<'a>(entries: &'a [Entry], e: &Entry, name: &str) -> Option<&'a Entry> {
    let cands = entries.iter().filter(|b| {
        is_baseline(b, name)
            && b.shape == e.shape
            && b.dtype == e.dtype
            && b.adapter == e.adapter
            && b.median_us.is_some()
    });
    let v: Vec<&Entry> = cands.collect();
    v.iter()
        .find(|b| b.backend == e.backend)
        .or_else(|| v.first())
        .copied()
}

fn time_cell(entries: &[Entry], e: &Entry, baseline: Option<&str>) -> String {
    if e.status != "ok" {
        let r = e
            .reason
            .clone()
            .unwrap_or_default()
            .replace(['\n', '|'], " ");
        let r: String = if r.chars().count() > 80 {
            r.chars().take(77).collect::<String>() + "..."
        } else {
            r
        };
        return format!("{}: {}", e.status, r);
    }
    let Some(t) = e.median_us else {
        return "-".into();
    };
    let mut cell = format!("{t:.1} µs");
    if let Some(b) = baseline.and_then(|name| baseline_for(entries, e, name)) {
        if let Some(bt) = b.median_us.filter(|x| *x > 0.0) {
            let _ = write!(cell, " ({:.2}×)", t / bt);
        }
    }
    if e.verdict.as_deref().is_some_and(|v| v != "PASS") {
        let _ = write!(cell, " {}", e.verdict.as_deref().unwrap_or(""));
    }
    cell
}

fn detail_cell(e: &Entry) -> String {
    if e.status != "ok" {
        return e.status.clone();
    }
    format!(
        "{} · {}",
        e.kernels.map_or("-".into(), |k| k.to_string()),
        e.memory_bytes.map_or("-".into(), bytes)
    )
}

/// Sort key that orders `N64` before `N128`: each token as (letters, number).
fn natural(shape: &str) -> Vec<(String, u64)> {
    shape
        .split_whitespace()
        .map(|t| {
            let letters: String = t.chars().take_while(|c| !c.is_ascii_digit()).collect();
            let digits: String = t.chars().skip(letters.len()).collect();
            (letters, digits.parse().unwrap_or(0))
        })
        .collect()
}

/// The Markdown report: a time table and a dispatches/memory table with the same rows and columns.
/// The comparison's layout: a column per adapter / backend (first-seen order), a row per
/// (variant, shape, dtype) sorted by shape and dtype (variants in first-seen order within), and
/// the entry of each filled cell (a later file wins for a duplicated cell).
pub struct Grid<'a> {
    pub cols: Vec<String>,
    pub rows: Vec<(String, String, String)>,
    pub cell: BTreeMap<(usize, usize), &'a Entry>,
}

pub fn grid(entries: &[Entry]) -> Grid<'_> {
    let mut cols: Vec<String> = Vec::new();
    for e in entries {
        if !cols.contains(&e.column()) {
            cols.push(e.column());
        }
    }
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for e in entries {
        let k = (e.variant.clone(), e.shape.clone(), e.dtype.clone());
        if !rows.contains(&k) {
            rows.push(k);
        }
    }
    rows.sort_by(|a, b| (natural(&a.1), &a.2).cmp(&(natural(&b.1), &b.2)));
    let mut cell: BTreeMap<(usize, usize), &Entry> = BTreeMap::new();
    for e in entries {
        let r = rows
            .iter()
            .position(|k| k.0 == e.variant && k.1 == e.shape && k.2 == e.dtype);
        let c = cols.iter().position(|c| *c == e.column());
        if let (Some(r), Some(c)) = (r, c) {
            cell.insert((r, c), e);
        }
    }
    Grid { cols, rows, cell }
}

/// A string from a result file as one Markdown table cell: HTML's special characters as entities
/// (a Markdown viewer renders raw HTML), `|` escaped and line breaks as spaces (either would break
/// the table).
pub fn md(s: &str) -> String {
    html_escape::encode_text(s)
        .replace(['\n', '\r'], " ")
        .replace('|', "\\|")
}

pub fn markdown(entries: &[Entry], baseline: Option<&str>) -> String {
    let Grid { cols, rows, cell } = grid(entries);
    let cols: Vec<String> = cols.iter().map(|c| md(c)).collect();
    let mut s = String::new();
    let head = |s: &mut String| {
        let _ = writeln!(s, "| variant | shape | dtype | {} |", cols.join(" | "));
        let _ = writeln!(s, "|---|---|---|{}", "---|".repeat(cols.len()));
    };
    let training = entries.iter().any(|e| e.variant.ends_with(" (backward)"));
    let _ = writeln!(
        s,
        "### Median forward time{}{}\n",
        if training {
            " (`… (backward)` rows: the backward)"
        } else {
            ""
        },
        baseline.map_or(String::new(), |b| format!(
            " (ratio to `{b}` on the same adapter)"
        ))
    );
    head(&mut s);
    for (ri, (v, sh, dt)) in rows.iter().enumerate() {
        let cells: Vec<String> = (0..cols.len())
            .map(|ci| {
                cell.get(&(ri, ci))
                    .map_or(String::new(), |e| md(&time_cell(entries, e, baseline)))
            })
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            md(v),
            md(sh),
            md(dt),
            cells.join(" | ")
        );
    }
    let _ = writeln!(s, "\n### Dispatches (kernels) per forward · memory\n");
    head(&mut s);
    for (ri, (v, sh, dt)) in rows.iter().enumerate() {
        let cells: Vec<String> = (0..cols.len())
            .map(|ci| {
                cell.get(&(ri, ci))
                    .map_or(String::new(), |e| md(&detail_cell(e)))
            })
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            md(v),
            md(sh),
            md(dt),
            cells.join(" | ")
        );
    }
    let _ = writeln!(
        s,
        "\nTimes: attn-wgpu = GPU timestamps, first dispatch begin to last end (median); \
         torch_sdpa.py = CUDA events around the call (median). Memory: attn-wgpu = every buffer \
         the plan allocates; torch = peak allocated during one forward. Sources: {}.",
        {
            let mut f: Vec<&str> = entries.iter().map(|e| e.file.as_str()).collect();
            f.dedup();
            md(&f.join(", "))
        }
    );
    if let Some(b) = baseline {
        if !entries.iter().any(|e| is_baseline(e, b)) {
            let _ = writeln!(
                s,
                "\nNote: baseline `{}` appears in none of the files.",
                md(b)
            );
        }
    }
    s
}
