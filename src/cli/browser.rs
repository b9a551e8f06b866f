//! `browser`: the same plans and WGSL on a browser's WebGPU (Dawn/Tint in Chromium, docs/browser.md).
//! Serves the page (web/index.html, web/runner.js, embedded) on 127.0.0.1, hands it each variant's
//! plan as a job (src/browser.rs), takes back the samples and the read-back bytes, validates them
//! against the f64 reference and writes the ordinary result file with backend `browser`.
//! `--headless` launches the installed Chromium itself (WebGPU and its developer features on);
//! otherwise the user opens the printed URL in their own browser. A page that fails, a browser
//! that exits or never comes is an error naming it (exit 1), never a hang: `--timeout` bounds all.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;

use attn_wgpu::browser::{self, Job, PageAdapter, PageRun};
use attn_wgpu::plan::Plan;
use attn_wgpu::problem::{Convention, Inputs, Problem};
use attn_wgpu::report::{json, table};
use attn_wgpu::run::{assemble, VariantRun};
use attn_wgpu::variants;

use super::args::{Defaults, ScheduleArgs, ShapeArgs};
use super::{bad, check_out_path, variant_list};

const DEFAULTS: Defaults = Defaults {
    batch: 1,
    heads: 2,
    head_dim: 64,
    warmup: 2,
    reps: 10,
};

const PAGE: &str = include_str!("../../web/index.html");
const RUNNER: &str = include_str!("../../web/runner.js");

/// The most bytes the page may post in one request (an output of the largest buffer a browser
/// allows is far below; anything above is refused, not buffered).
const MAX_POST: u64 = 1 << 30;

#[derive(Args)]
pub struct BrowserArgs {
    /// Variants, comma separated, or `all` (those the browser's adapter cannot run are listed
    /// with the reason, as `run --variant all` does).
    #[arg(long, default_value = "all")]
    variant: String,
    /// Sequence length N.
    #[arg(long, allow_negative_numbers = true, default_value_t = 128)]
    seq: u32,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    schedule: ScheduleArgs,
    /// Valid keys per batch element, e.g. `--key-padding 5,8` for B=2 (keys j >= L_b are
    /// blocked; a row with none left is fully masked), as `run --key-padding`.
    #[arg(long, allow_negative_numbers = true)]
    key_padding: Option<String>,
    /// Port to serve the page on, on 127.0.0.1 only (0: any free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Launch the installed Chromium headless (WebGPU, and its developer features so that
    /// timestamps are not rounded to 100 µs) instead of waiting for you to open the URL.
    #[arg(long)]
    headless: bool,
    /// Also write each job the page receives into this folder, the plan as data: `<variant>.json`
    /// (src/browser.rs `Job`, format 1: docs/browser.md) and its inputs as raw little-endian
    /// buffers, `<variant>.<buffer>.bin`.
    #[arg(long, value_name = "DIR")]
    save_jobs: Option<PathBuf>,
    /// Only print the URL (without --headless the page is otherwise opened in the default browser
    /// where the system has an opener: xdg-open, open, start).
    #[arg(long)]
    no_open: bool,
    /// The browser `--headless` launches (default: the first of chromium, chromium-browser,
    /// google-chrome on the PATH).
    #[arg(long, value_name = "PATH")]
    browser: Option<PathBuf>,
    /// Seconds to wait for the page to finish every variant.
    #[arg(long, default_value_t = 600.0, allow_negative_numbers = true)]
    timeout: f64,
    /// Only compile: create every dispatch's shader module and pipeline in the browser and report
    /// every message Tint gives (any message is a failure, exit 1); run nothing. The plans are
    /// made as if the adapter's subgroups had 32 lanes, so that the kernels which need 8 or more
    /// (`tiled`'s rt2/rt3 tiles, split-KV) compile on a browser whose subgroups are smaller.
    #[arg(long)]
    compile_only: bool,
    /// Write the results: the JSON `run --json` writes, with backend `browser` and the browser's
    /// user agent as the driver.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A launched browser, killed (and its profile folder removed) when dropped.
struct Launched {
    child: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn launch(a: &BrowserArgs, url: &str) -> anyhow::Result<Launched> {
    let exe = match &a.browser {
        Some(b) => b.clone(),
        None => ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .find_map(|n| which(n))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--headless: no chromium, chromium-browser or google-chrome on the PATH \
                     (install Chromium, or name one with --browser)"
                )
            })?,
    };
    let profile = tempfile::tempdir()?;
    let child = Command::new(&exe)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--no-first-run",
            "--enable-unsafe-webgpu",
            "--enable-webgpu-developer-features",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| anyhow::anyhow!("--headless: cannot start {}: {e}", exe.display()))?;
    Ok(Launched {
        child,
        _profile: profile,
    })
}

/// Best effort: the system's default browser on `url` (nothing happens where there is no opener;
/// the URL is printed either way).
fn open_url(url: &str) {
    let (cmd, pre): (&str, &[&str]) = if cfg!(target_os = "macos") {
        ("open", &[])
    } else if cfg!(windows) {
        ("cmd", &["/C", "start", ""])
    } else {
        ("xdg-open", &[])
    };
    let _ = Command::new(cmd)
        .args(pre)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// `--save-jobs`: every job as JSON and its input buffers as raw bytes.
fn save(dir: &std::path::Path, jobs: &[(Plan, Job)], x: &Inputs) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (_, job) in jobs {
        json::write_atomic(&dir.join(format!("{}.json", job.variant)), job)?;
        for b in job.buffers.iter().filter(|b| b.upload) {
            if let Some(bytes) = x.upload_bytes(&b.name) {
                let path = dir.join(format!("{}.{}.bin", job.variant, b.name));
                attn_wgpu::outfile::write_atomic(&path, &bytes)?;
            }
        }
    }
    Ok(())
}

/// What every request may read: the run as the user asked for it.
struct Ctx<'a> {
    names: &'a [String],
    p: &'a Problem,
    x: &'a Inputs,
    schedule: &'a attn_wgpu::gpu::runner::Schedule,
    compile_only: bool,
    save_jobs: Option<&'a std::path::Path>,
}

/// What the page has sent so far.
struct Session {
    jobs: Vec<(Plan, Job)>,
    refused: Vec<VariantRun>,
    adapter: Option<PageAdapter>,
    outputs: HashMap<(usize, String), Vec<u8>>,
    results: HashMap<usize, PageRun>,
    compiled: HashMap<usize, browser::PageCompiled>,
}

enum Step {
    Go,
    Done,
    Failed(String),
}

fn respond(req: tiny_http::Request, code: u16, body: Vec<u8>, kind: &str) {
    let header = tiny_http::Header::from_bytes("Content-Type", kind).expect("a valid header");
    let _ = req.respond(
        tiny_http::Response::from_data(body)
            .with_status_code(code)
            .with_header(header),
    );
}

/// Handles one request of the page; an answer the page cannot use is a 4xx it reports back.
fn handle(mut req: tiny_http::Request, s: &mut Session, c: &Ctx) -> Step {
    let Ctx {
        names,
        p,
        x,
        schedule,
        compile_only,
        save_jobs,
    } = *c;
    let url = req.url().to_string();
    let parts: Vec<&str> = url.trim_start_matches('/').split('/').collect();
    let post = *req.method() == tiny_http::Method::Post;
    let mut body = Vec::new();
    if post {
        if req.body_length().unwrap_or(0) as u64 > MAX_POST {
            respond(req, 413, b"too large".to_vec(), "text/plain");
            return Step::Failed(format!(
                "the page posted more than {MAX_POST} bytes to {url}"
            ));
        }
        if let Err(e) = req.as_reader().take(MAX_POST).read_to_end(&mut body) {
            return Step::Failed(format!("reading the page's {url}: {e}"));
        }
    }
    let index = |i: &str| i.parse::<usize>().ok().filter(|i| *i < s.jobs.len());
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match (post, parts.as_slice()) {
        (false, [""]) => respond(req, 200, PAGE.into(), "text/html; charset=utf-8"),
        (false, ["runner.js"]) => respond(req, 200, RUNNER.into(), "text/javascript"),
        (true, ["adapter"]) => {
            let a: PageAdapter = match serde_json::from_slice(&body) {
                Ok(a) => a,
                Err(e) => return Step::Failed(format!("the page's adapter report: {e}")),
            };
            let mut caps = a.caps();
            if compile_only && caps.subgroups {
                caps.subgroup_min_size = caps.subgroup_min_size.max(32);
                caps.subgroup_max_size = caps.subgroup_max_size.max(32);
            }
            for name in names {
                let planned = variants::plan(name, p, &caps)
                    .map_err(|e| match e {
                        attn_wgpu::Error::Incompatible { reason, .. } => reason,
                        other => other.to_string(),
                    })
                    .and_then(|plan| {
                        let warm = schedule.floor_ms(&a.report().device_type);
                        browser::job(&plan, schedule, warm, compile_only).map(|j| (plan, j))
                    });
                match planned {
                    Ok(pj) => s.jobs.push(pj),
                    Err(reason) => s.refused.push(VariantRun::unsupported(name, reason)),
                }
            }
            s.adapter = Some(a);
            if let Some(dir) = save_jobs {
                if let Err(e) = save(dir, &s.jobs, x) {
                    return Step::Failed(format!("--save-jobs {}: {e}", dir.display()));
                }
            }
            let n = s.jobs.len();
            respond(
                req,
                200,
                format!("{{\"jobs\":{n}}}").into(),
                "application/json",
            );
        }
        (false, ["job", i]) => match index(i) {
            Some(i) => match serde_json::to_vec(&s.jobs[i].1) {
                Ok(j) => respond(req, 200, j, "application/json"),
                Err(e) => return Step::Failed(format!("job {i}: {e}")),
            },
            None => respond(req, 404, b"no such job".to_vec(), "text/plain"),
        },
        (false, ["input", i, name]) => match (index(i), x.upload_bytes(name)) {
            (Some(_), Some(mut bytes)) => {
                bytes.resize(bytes.len().next_multiple_of(4), 0);
                respond(req, 200, bytes, "application/octet-stream")
            }
            _ => respond(req, 404, b"no such input".to_vec(), "text/plain"),
        },
        (true, ["output", i, name]) => match index(i) {
            Some(i) => {
                s.outputs.insert((i, name.to_string()), body);
                respond(req, 200, Vec::new(), "text/plain")
            }
            None => respond(req, 404, b"no such job".to_vec(), "text/plain"),
        },
        (true, ["result", i]) => match index(i) {
            Some(i) => match serde_json::from_slice::<PageRun>(&body) {
                Ok(r) => {
                    s.results.insert(i, r);
                    respond(req, 200, Vec::new(), "text/plain")
                }
                Err(e) => return Step::Failed(format!("the page's samples of job {i}: {e}")),
            },
            None => respond(req, 404, b"no such job".to_vec(), "text/plain"),
        },
        (true, ["compiled", i]) => match index(i) {
            Some(i) => match serde_json::from_slice::<browser::PageCompiled>(&body) {
                Ok(c) => {
                    s.compiled.insert(i, c);
                    respond(req, 200, Vec::new(), "text/plain")
                }
                Err(e) => return Step::Failed(format!("the page's compilation of job {i}: {e}")),
            },
            None => respond(req, 404, b"no such job".to_vec(), "text/plain"),
        },
        (true, ["fail"]) => {
            let msg = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["message"].as_str().map(String::from))
                .unwrap_or_else(|| text(&body));
            respond(req, 200, Vec::new(), "text/plain");
            return Step::Failed(format!("the page failed: {msg}"));
        }
        (true, ["done"]) => {
            respond(req, 200, Vec::new(), "text/plain");
            return Step::Done;
        }
        _ => respond(req, 404, b"not found".to_vec(), "text/plain"),
    }
    Step::Go
}

pub fn cmd_browser(a: BrowserArgs) -> anyhow::Result<u8> {
    // 1. Everything the user typed.
    let names = variant_list(&a.variant)?;
    let schedule = a.schedule.schedule(&DEFAULTS, 0)?;
    if !(0.001..=86_400.0).contains(&a.timeout) {
        return Err(bad(format!(
            "--timeout must be between 0.001 and 86400 seconds (got {})",
            a.timeout
        )));
    }
    if let Some(j) = &a.json {
        check_out_path("--json", j)?;
    }
    let mut p = a.shape.problem(a.seq, &DEFAULTS)?;
    let padding = a
        .key_padding
        .as_deref()
        .map(super::run::parse_key_padding)
        .transpose()?;
    attn_wgpu::budget::check_host(&p, names.len())?;
    let mut x = Inputs::generate(&p);
    attn_wgpu::mask::normalize(&mut p, &mut x, None, Convention::Sdpa, padding.as_deref())?;
    // 2. The page, then the browser.
    let server = tiny_http::Server::http(("127.0.0.1", a.port))
        .map_err(|e| bad(format!("--port {}: cannot serve on 127.0.0.1: {e}", a.port)))?;
    let port = server
        .server_addr()
        .to_ip()
        .map(|s| s.port())
        .unwrap_or(a.port);
    let url = format!("http://127.0.0.1:{port}/");
    let mut launched = if a.headless {
        eprintln!("serving {url}; launching a headless browser");
        Some(launch(&a, &url)?)
    } else {
        println!("Open {url} in a browser with WebGPU (Chrome, Edge, Safari 26+, Firefox 141+)");
        println!("and keep the page open until it says `all done`.");
        if !a.no_open {
            open_url(&url);
        }
        None
    };
    // 3. Serve until the page is done, fails, the browser exits, or the time is up.
    let deadline = Instant::now() + Duration::from_secs_f64(a.timeout);
    let mut s = Session {
        jobs: Vec::new(),
        refused: Vec::new(),
        adapter: None,
        outputs: HashMap::new(),
        results: HashMap::new(),
        compiled: HashMap::new(),
    };
    let ctx = Ctx {
        names: &names,
        p: &p,
        x: &x,
        schedule: &schedule,
        compile_only: a.compile_only,
        save_jobs: a.save_jobs.as_deref(),
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            anyhow::bail!(
                "the page did not finish within --timeout {} s ({url}; {} of {} variants returned)",
                a.timeout,
                s.results.len(),
                s.jobs.len()
            );
        }
        if let Some(l) = launched.as_mut() {
            if let Ok(Some(status)) = l.child.try_wait() {
                anyhow::bail!("the browser exited ({status}) before the page finished ({url})");
            }
        }
        let Some(req) = server.recv_timeout(left.min(Duration::from_millis(200)))? else {
            continue;
        };
        match handle(req, &mut s, &ctx) {
            Step::Go => {}
            Step::Done => break,
            Step::Failed(why) => anyhow::bail!("{why}"),
        }
    }
    drop(launched);
    // 4. Validation, and the outputs.
    let adapter = s
        .adapter
        .take()
        .ok_or_else(|| anyhow::anyhow!("the page never reported its adapter"))?;
    let report = adapter.report();
    if a.compile_only {
        return compiled(&s, &adapter);
    }
    let mut runs = s.refused;
    for (i, (plan, job)) in s.jobs.into_iter().enumerate() {
        let r = s
            .results
            .remove(&i)
            .ok_or_else(|| anyhow::anyhow!("the page returned no samples for {}", job.variant))?;
        let mut read = |name: &str| -> anyhow::Result<Vec<f32>> {
            let bytes = plan.buffer(name).map_or(0, |b| b.bytes);
            let raw = s
                .outputs
                .remove(&(i, name.to_string()))
                .filter(|b| b.len() as u64 >= bytes)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "the page returned no (or a short) `{name}` of {}",
                        job.variant
                    )
                })?;
            Ok(p.dtype
                .decode(&raw[..bytes as usize], (bytes / p.dtype.bytes()) as usize))
        };
        let output = read(&plan.output)?;
        let grads = plan
            .grads
            .iter()
            .map(|g| read(g))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let m = browser::measurement(
            &plan,
            &r,
            output,
            grads,
            adapter.caps().timestamps,
            job.warmup_ms,
        );
        let sem = variants::find(&job.variant)?.fully_masked;
        runs.push(assemble(&p, &x, &job.variant, plan, sem, m));
    }
    runs.sort_by_key(|r| names.iter().position(|n| *n == r.variant));
    print!("{}", table::header(&report, &p, &schedule));
    println!("browser: {}", adapter.user_agent);
    println!();
    print!("{}", table::compact(&runs));
    print!("{}", table::training(&runs));
    if let Some(path) = &a.json {
        // WebGPU always checks bounds (robust buffer access); a page cannot turn it off.
        let file = json::ResultsFile::new(&p, &report, "browser", schedule, &runs);
        json::write_atomic(path, &file)?;
        eprintln!("results written to {}", path.display());
    }
    if !runs.iter().any(|r| r.ran()) {
        return Err(attn_wgpu::Error::Incompatible {
            variant: a.variant.clone(),
            reason: "no variant can run on the browser's adapter (reasons above)".into(),
        }
        .into());
    }
    let failed: Vec<&str> = runs
        .iter()
        .filter(|r| r.ran() && !r.passed())
        .map(|r| r.variant.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!("validation FAILED: {}", failed.join(", "));
        return Ok(3);
    }
    Ok(0)
}

/// `--compile-only`: every job's pipelines and messages; any message fails the command.
fn compiled(s: &Session, adapter: &PageAdapter) -> anyhow::Result<u8> {
    println!("browser: {}", adapter.user_agent);
    let mut bad = Vec::new();
    let mut count = 0;
    for (i, (plan, job)) in s.jobs.iter().enumerate() {
        let c = s.compiled.get(&i).ok_or_else(|| {
            anyhow::anyhow!("the page returned no compilation for {}", job.variant)
        })?;
        let labels: Vec<String> = plan.dispatches.iter().map(|d| d.shader.label()).collect();
        println!(
            "{:<20} {} pipeline(s): {}",
            job.variant,
            c.compiles.len(),
            labels.join(", ")
        );
        for (d, cc) in plan.dispatches.iter().zip(&c.compiles) {
            count += 1;
            for m in &cc.messages {
                bad.push(format!(
                    "{} `{}` ({}): {m}",
                    job.variant,
                    d.name,
                    d.shader.label()
                ));
            }
        }
    }
    for r in &s.refused {
        println!(
            "{:<20} not planned: {}",
            r.variant,
            r.reason.as_deref().unwrap_or("")
        );
    }
    if !bad.is_empty() {
        anyhow::bail!(
            "the browser's shader compiler had messages:\n{}",
            bad.join("\n")
        );
    }
    println!("{count} pipelines compiled, no message");
    Ok(0)
}
