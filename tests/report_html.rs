//! `attn-wgpu report` and `run --html`: the page is built from real result files of the test
//! adapter (a run with a probe's roofline, a sweep), rendered by a real browser (Debian's
//! chromium, headless; .ci/run installs it), and checked: no console message, the tables hold
//! the expected rows, every SVG has a size, the screenshot is not blank. Bad input is exit 2 with
//! nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::bin;

fn ok(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{:?}\n{}",
        cmd,
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The browser: $ATTN_WGPU_CHROMIUM, else chromium or chromium-browser on PATH. Missing is a
/// failure, not a skip.
fn chromium() -> PathBuf {
    if let Ok(p) = std::env::var("ATTN_WGPU_CHROMIUM") {
        return p.into();
    }
    for name in ["chromium", "chromium-browser"] {
        if let Ok(o) = Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {name}"))
            .output()
        {
            let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if o.status.success() && !p.is_empty() {
                return p.into();
            }
        }
    }
    panic!("no chromium: apt-get install chromium (.ci/run does), or set ATTN_WGPU_CHROMIUM");
}

fn browse(page: &Path, extra: &[&str]) -> Output {
    let url = format!("file://{}", page.display());
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,2400",
        ])
        .args(extra)
        .arg(url)
        .output()
        .unwrap()
}

#[test]
fn the_report_renders_in_a_real_browser() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let probe = d.join("probe.json");
    ok(bin()
        .args(["probe", "--size-mib", "4", "--reps", "1", "--out"])
        .arg(&probe));
    let run = d.join("run.json");
    let html_run = d.join("run.html");
    ok(bin()
        .args([
            "run",
            "--variant",
            "all",
            "--seq",
            "32",
            "--heads",
            "2",
            "--head-dim",
            "16",
            "--reps",
            "2",
            "--probe",
        ])
        .arg(&probe)
        .arg("--json")
        .arg(&run)
        .arg("--html")
        .arg(&html_run));
    let sweep = d.join("sw");
    ok(bin()
        .args([
            "sweep",
            "--seq",
            "16,32",
            "--head-dim",
            "16",
            "--reps",
            "1",
            "--out-dir",
        ])
        .arg(&sweep));
    let page = d.join("report.html");
    ok(bin()
        .arg("report")
        .arg(&run)
        .arg(sweep.join("sweep.json"))
        .arg("-o")
        .arg(&page));
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: no script, nothing fetched.
    for bad in ["<script", "http://", "https://", "@import", "<link"] {
        assert!(
            !html.replace("http://www.w3.org/2000/svg", "").contains(bad),
            "the page has `{bad}`"
        );
    }
    assert!(html.len() < 2 << 20, "{} bytes", html.len());
    assert!(std::fs::read_to_string(&html_run)
        .unwrap()
        .contains("<h1>attn-wgpu report</h1>"));

    // The DOM as the browser built it.
    let o = browse(&page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{log}");
    assert!(!log.contains("CONSOLE"), "console messages:\n{log}");
    assert!(dom.contains("<h1>attn-wgpu report</h1>"), "{dom}");
    for v in common::PORTABLE {
        assert!(
            dom.contains(&format!("<tr><td class=\"l\">{v}</td>")),
            "no row for {v}"
        );
    }
    assert!(dom.contains("tiled-coop") && dom.contains("unsupported"));
    assert!(dom.matches(">PASS<").count() >= 5);
    assert!(dom.contains("one forward (the median of the recorded ones)"));
    assert!(dom.contains("<h3>Roofline</h3>"));
    assert!(dom.contains("GPU time per forward vs N"));
    assert!(dom.contains("Comparison (median forward time)"));
    // Every SVG has a non-zero size.
    let svgs: Vec<&str> = dom.split("<svg").skip(1).collect();
    assert!(svgs.len() >= 8, "{} svgs", svgs.len());
    for s in &svgs {
        let head = &s[..s.find('>').unwrap()];
        let size = |k: &str| -> f64 {
            let at = head
                .find(&format!("{k}=\""))
                .unwrap_or_else(|| panic!("no {k}: {head}"));
            let rest = &head[at + k.len() + 2..];
            rest[..rest.find('"').unwrap()]
                .trim_end_matches("px")
                .parse()
                .unwrap()
        };
        assert!(size("width") > 0.0 && size("height") > 0.0, "{head}");
    }

    // A screenshot that is not blank: many distinct colours, not one.
    let shot = d.join("shot.png");
    let o = browse(&page, &[&format!("--screenshot={}", shot.display())]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert!(info.width >= 1000 && info.height >= 1000, "{info:?}");
    let px = info.color_type.samples();
    let mut colours = std::collections::HashSet::new();
    for p in buf[..info.buffer_size()].chunks(px) {
        colours.insert(p.to_vec());
        if colours.len() > 50 {
            break;
        }
    }
    assert!(colours.len() > 50, "{} colours: blank page?", colours.len());
}

#[test]
fn bad_report_input_is_exit_2_and_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let out = d.join("r.html");
    let check = |files: &[PathBuf], o: &Path, needle: &str| {
        let r = bin()
            .arg("report")
            .args(files)
            .arg("-o")
            .arg(o)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&r.stderr).into_owned();
        assert_eq!(r.status.code(), Some(2), "{e}");
        assert!(e.contains(needle), "missing `{needle}`: {e}");
        assert!(!e.contains("panicked"), "{e}");
        assert!(!out.exists(), "something was written");
    };
    check(&[d.join("missing.json")], &out, "missing.json");
    std::fs::write(d.join("corrupt.json"), b"{not json").unwrap();
    check(&[d.join("corrupt.json")], &out, "not JSON");
    std::fs::write(d.join("other.json"), br#"{"tool": "something-else"}"#).unwrap();
    check(&[d.join("other.json")], &out, "not a result file");
    std::fs::write(
        d.join("newer.json"),
        br#"{"tool": "attn-wgpu", "schema_version": 99, "runs": []}"#,
    )
    .unwrap();
    check(&[d.join("newer.json")], &out, "schema_version 99");
    std::fs::write(
        d.join("ok.json"),
        br#"{"tool": "attn-wgpu", "schema_version": 1, "runs": []}"#,
    )
    .unwrap();
    check(
        &[d.join("ok.json")],
        Path::new("/proc/attn-wgpu-report.html"),
        "cannot write",
    );
    check(&[d.join("ok.json")], &d.join("ok.json"), "same file");
}

/// The page opens with the lesson: a chart (time beside bytes, materialized vs fused, PyTorch in
/// the same chart) before the first table, and no local path of the machine that ran it.
#[test]
fn the_report_opens_with_the_lesson_chart() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let mut run = common::fixture_json("attn_wgpu_small.json");
    // A command recorded with the binary's path (as files before the fix were).
    run["command"] = "/home/someone/build/target/release/attn-wgpu run --variant all".into();
    let runf = d.join("run.json");
    std::fs::write(&runf, run.to_string()).unwrap();
    let page = d.join("r.html");
    ok(bin()
        .arg("report")
        .arg(&runf)
        .arg(common::fixture("torch_sdpa_small.json"))
        .arg("-o")
        .arg(&page));
    let html = std::fs::read_to_string(&page).unwrap();
    let (svg, table) = (html.find("<svg").unwrap(), html.find("<table").unwrap());
    assert!(
        svg < table,
        "first <svg> at {svg}, first <table> at {table}"
    );
    let lesson = &html[svg..html[svg..].find("</svg>").unwrap() + svg];
    for needle in [
        "unfused-inplace",
        "tiled",
        "torch:",
        "bytes moved",
        "materialized",
    ] {
        assert!(lesson.contains(needle), "the chart lacks `{needle}`");
    }
    // Fused (blue) and materialized (orange) bars both drawn.
    assert!(lesson.contains("#2b6cb0") && lesson.contains("#d9822b"));
    assert!(!html.contains("/home/someone"), "a local path is shown");
    assert!(html.contains("<code>attn-wgpu run --variant all</code>"));
}
