//! Shared set-up for the GPU tests: one device per test binary, on whatever adapter wgpu prefers
//! (lavapipe in CI). `ATTN_WGPU_TEST_BACKEND` picks a backend (e.g. `gl`).

#![allow(dead_code)]

use std::sync::OnceLock;

use attn_wgpu::gpu::{AdapterSelection, Gpu};

pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        let sel = AdapterSelection {
            backend: std::env::var("ATTN_WGPU_TEST_BACKEND").ok(),
            name: None,
        };
        match Gpu::open(
            &sel,
            attn_wgpu::variants::features_for(&attn_wgpu::variants::names()),
        ) {
            Ok(g) => {
                eprintln!("tests run on: {} ({})", g.report.name, g.report.backend);
                g
            }
            // No adapter is a failure, not a skip: CI installs the software Vulkan driver.
            Err(e) => panic!("no GPU adapter for the tests: {e}"),
        }
    })
}

/// The attn-wgpu binary of this build, for the command-line tests.
pub fn bin() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_attn-wgpu"))
}

/// A finished command's stderr, as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
