//! attn-wgpu command line: parse, dispatch to the subcommand (`cli/<name>.rs`), map the result to
//! an exit code.
//!
//! Exit codes: 0 success; 1 runtime or GPU error; 2 bad input (arguments, sizes, unknown names);
//! 3 a result failed validation; 4 the requested variant cannot run here (the reason is printed).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use attn_wgpu::Error;

mod cli;

#[derive(Parser)]
#[command(
    name = "attn-wgpu",
    version,
    about = "Attention in WGSL on any wgpu adapter: per-dispatch GPU timestamps, traffic estimates, f64 validation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one variant (or all) on generated inputs, time every dispatch, validate against f64.
    Run(Box<cli::run::RunArgs>),
    /// List every adapter wgpu finds, with the features and limits that matter here, and which
    /// variants it can run (at the default run shape) or why not.
    Adapters(cli::adapters::AdapterArgs),
    /// Measure this adapter's copy bandwidth and FMA rate (the roofline `run` prints).
    Probe(cli::probe::ProbeArgs),
    /// Merge result files (attn-wgpu and bench/torch_sdpa.py) into Markdown tables.
    Compare(cli::compare::CompareArgs),
    /// Run a grid of sequence lengths x variants: CSV, JSON and SVG plots.
    Sweep(cli::sweep::SweepArgs),
    /// Teaching demo: plan vs timestamps, six questions, fusion vs materialization.
    Explain(cli::explain::ExplainArgs),
    /// Search the `tiled` variant's tile configurations for this adapter and one shape class;
    /// validate each; cache the fastest passing one for `run`.
    Tune(cli::tune::TuneArgs),
    /// One self-contained HTML page (inline CSS and SVG, works offline) over result files:
    /// environment, variants, timelines, roofline, sweep plots, comparison.
    Report(cli::report::ReportArgs),
    /// The same plans and WGSL on a browser's WebGPU (Chromium's Dawn/Tint): serves a page on
    /// 127.0.0.1 (or, with --headless, launches Chromium on it), validates what it returns, writes
    /// the result file with backend `browser`.
    Browser(cli::browser::BrowserArgs),
}

/// Exit code for a library error: bad input is 2, incompatibility 4, the rest 1.
fn code_for(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<cli::BadInput>().is_some() {
        return 2;
    }
    match e.downcast_ref::<Error>() {
        Some(Error::InvalidProblem(_)) | Some(Error::UnknownVariant(..)) => 2,
        Some(Error::NoAdapter(m)) if m.starts_with("unknown backend") => 2,
        Some(Error::Incompatible { .. }) => 4,
        _ => 1,
    }
}

fn main() -> ExitCode {
    // A closed pipe (`attn-wgpu adapters | head`) ends the process quietly, as for any Unix
    // tool, instead of a panic in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Any other error writing standard output (a full disk: `adapters > /dev/full`) is an error
    // naming it and exit 1: println! reports it by panicking, and every print goes through it.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(why) = msg.strip_prefix("failed printing to stdout: ") {
            eprintln!("error: cannot write to standard output: {why}");
            std::process::exit(1);
        }
        default_hook(info);
    }));
    // An interrupt (Ctrl-C, SIGTERM) while an output is being written leaves no temp file: the
    // handler removes those in flight, then exits 130 as a shell expects.
    let _ = ctrlc::set_handler(|| {
        attn_wgpu::outfile::remove_in_flight();
        std::process::exit(130);
    });
    // wgpu's own log (adapter enumeration, context creation, validation) when RUST_LOG asks.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off")).init();
    cli::headless::private_runtime_dir();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => cli::run::cmd_run(*a),
        Command::Adapters(a) => cli::adapters::cmd_adapters(a),
        Command::Probe(a) => cli::probe::cmd_probe(a),
        Command::Compare(a) => cli::compare::cmd_compare(a),
        Command::Sweep(a) => cli::sweep::cmd_sweep(a),
        Command::Explain(a) => cli::explain::cmd_explain(a),
        Command::Tune(a) => cli::tune::cmd_tune(a),
        Command::Report(a) => cli::report::cmd_report(a),
        Command::Browser(a) => cli::browser::cmd_browser(a),
    };
    // What is still buffered must reach standard output too, or the run fails.
    let flushed = std::io::Write::flush(&mut std::io::stdout());
    let result = match (result, flushed) {
        (Ok(_), Err(e)) => Err(anyhow::anyhow!("cannot write to standard output: {e}")),
        (r, _) => r,
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // The cause chain, without repeating a cause the message already quotes (an I/O
            // error's text is part of its message).
            let mut msg = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !msg.contains(&c) {
                    msg.push_str(": ");
                    msg.push_str(&c);
                }
            }
            eprintln!("error: {msg}");
            ExitCode::from(code_for(&e))
        }
    }
}
