//! The report's first picture, the lesson this tool teaches: per problem (shape, dtype, forward or
//! backward), every variant's median GPU time beside the bytes its plan moves, materialized
//! (the N x N scores reach device memory) against fused, PyTorch's rows in the same chart. The
//! fused kernels do the same FLOPs; their bars are short because their byte bars are.

use std::fmt::Write;

use crate::report::compare::Entry;

/// One chart: the timed rows of one problem, fastest first.
pub struct Group<'a> {
    pub title: String,
    pub rows: Vec<&'a Entry>,
}

const BACKWARD: &str = " (backward)";

/// The problems with at least two timed rows, inference forward first, then a training step's
/// forward, then backward, each in the order its first row appears; sweep points are left to the sweep's own plots. A variant that several
/// files time on one adapter (a training run's forward beside the forward run) shows the later
/// file's figure, as `compare` does.
pub fn groups(entries: &[Entry]) -> Vec<Group<'_>> {
    let mut out: Vec<(bool, Group)> = Vec::new();
    for e in entries {
        if e.tool == "attn-wgpu sweep" || e.median_us.is_none_or(|t| !t.is_finite() || t <= 0.0) {
            continue;
        }
        let bwd = e.variant.ends_with(BACKWARD);
        let title = format!(
            "{} {} — {}",
            e.shape,
            e.dtype,
            if bwd { "backward" } else { "forward" }
        );
        match out.iter_mut().find(|(_, g)| g.title == title) {
            Some((_, g)) => match g
                .rows
                .iter_mut()
                .find(|r| r.variant == e.variant && r.column() == e.column())
            {
                Some(r) => *r = e,
                None => g.rows.push(e),
            },
            None => out.push((
                bwd,
                Group {
                    title,
                    rows: vec![e],
                },
            )),
        }
    }
    out.retain(|(_, g)| g.rows.len() >= 2);
    // Inference forward first, then a training step's forward, then backward.
    out.sort_by_key(|(bwd, g)| (*bwd, g.title.contains(" training ")));
    out.into_iter()
        .map(|(_, mut g)| {
            g.rows
                .sort_by(|a, b| a.median_us.partial_cmp(&b.median_us).expect("finite"));
            g
        })
        .collect()
}

const MATERIALIZED: &str = "#d9822b";
const FUSED: &str = "#2b6cb0";
const UNKNOWN: &str = "#888888";

fn colour(e: &Entry) -> &'static str {
    match e.materialized {
        Some(true) => MATERIALIZED,
        Some(false) => FUSED,
        None => UNKNOWN,
    }
}

fn esc(s: &str) -> String {
    html_escape::encode_text(s).into_owned()
}

/// How a row says where it ran when a chart holds attn-wgpu rows from several adapters or
/// backends: nothing (one place), the backend (one adapter), or adapter / backend.
#[derive(Clone, Copy)]
enum Place {
    One,
    Backend,
    Both,
}

fn place(rows: &[&Entry]) -> Place {
    let ours: Vec<&&Entry> = rows
        .iter()
        .filter(|e| !e.variant.starts_with("torch:"))
        .collect();
    let distinct = |f: &dyn Fn(&Entry) -> String| {
        let mut v: Vec<String> = ours.iter().map(|e| f(e)).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    if distinct(&|e: &Entry| e.column()) <= 1 {
        Place::One
    } else if distinct(&|e: &Entry| e.adapter.clone()) <= 1 {
        Place::Backend
    } else {
        Place::Both
    }
}

/// A row's label: the variant (without the backward suffix), and where it ran when needed.
fn label(e: &Entry, place: Place) -> String {
    let v = e.variant.trim_end_matches(BACKWARD);
    match place {
        _ if v.starts_with("torch:") => v.to_string(),
        Place::One => v.to_string(),
        Place::Backend => format!("{v} ({})", e.backend),
        Place::Both => format!("{v} ({})", e.column()),
    }
}

/// The chart as inline SVG: two panels of horizontal bars (GPU time, bytes moved), one row a
/// variant, fastest first; PyTorch's rows paler, with "not modelled" where it has no byte figure.
pub fn svg(g: &Group) -> String {
    let (lw, tw, bw, row, top) = (200.0, 430.0, 300.0, 18.0, 44.0);
    let w = lw + tw + bw + 40.0;
    let h = top + row * g.rows.len() as f64 + 26.0;
    let tmax = g
        .rows
        .iter()
        .filter_map(|e| e.median_us)
        .fold(0.0, f64::max);
    let bmax = g
        .rows
        .iter()
        .filter_map(|e| e.bytes_moved)
        .map(|b| b as f64)
        .fold(0.0, f64::max);
    let place = place(&g.rows);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"sans-serif\" font-size=\"12\" role=\"img\"><title>{}</title>\
         <text x=\"8\" y=\"16\" font-weight=\"bold\">{}</text>\
         <text x=\"{lw}\" y=\"36\" fill=\"#333\">GPU time, median µs (shorter is faster)</text>\
         <text x=\"{}\" y=\"36\" fill=\"#333\">bytes moved (plan estimate)</text>",
        esc(&g.title),
        esc(&g.title),
        lw + tw + 20.0
    );
    for (i, e) in g.rows.iter().enumerate() {
        let y = top + row * i as f64;
        let torch = e.variant.starts_with("torch:");
        let op = if torch { "0.45" } else { "1" };
        let c = colour(e);
        let t = e.median_us.unwrap_or(0.0);
        let tlen = if tmax > 0.0 {
            (t / tmax) * (tw - 90.0)
        } else {
            0.0
        };
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{lw}\" y=\"{}\" width=\"{tlen:.1}\" height=\"{}\" fill=\"{c}\" fill-opacity=\"{op}\"/>\
             <text x=\"{:.1}\" y=\"{}\">{t:.1}</text>",
            lw - 6.0,
            y + 13.0,
            esc(&label(e, place)),
            y + 3.0,
            row - 5.0,
            lw + tlen + 4.0,
            y + 13.0
        );
        let bx = lw + tw + 20.0;
        match e.bytes_moved {
            Some(b) if bmax > 0.0 => {
                let blen = (b as f64 / bmax) * (bw - 80.0);
                let _ = write!(
                    s,
                    "<rect x=\"{bx}\" y=\"{}\" width=\"{blen:.1}\" height=\"{}\" fill=\"{c}\" fill-opacity=\"{op}\"/>\
                     <text x=\"{:.1}\" y=\"{}\">{}</text>",
                    y + 3.0,
                    row - 5.0,
                    bx + blen + 4.0,
                    y + 13.0,
                    esc(&crate::report::table::bytes(b))
                );
            }
            _ => {
                let _ = write!(
                    s,
                    "<text x=\"{bx}\" y=\"{}\" fill=\"#777\">not modelled</text>",
                    y + 13.0
                );
            }
        }
    }
    let ly = h - 8.0;
    let _ = write!(
        s,
        "<rect x=\"{lw}\" y=\"{}\" width=\"12\" height=\"10\" fill=\"{MATERIALIZED}\"/>\
         <text x=\"{}\" y=\"{ly}\">materialized: N×N scores in device memory</text>\
         <rect x=\"{}\" y=\"{}\" width=\"12\" height=\"10\" fill=\"{FUSED}\"/>\
         <text x=\"{}\" y=\"{ly}\">fused: scores stay on chip</text>\
         <text x=\"{}\" y=\"{ly}\" fill=\"#555\">paler: PyTorch, same GPU</text></svg>",
        ly - 9.0,
        lw + 16.0,
        lw + 290.0,
        ly - 9.0,
        lw + 306.0,
        lw + 480.0
    );
    s
}
