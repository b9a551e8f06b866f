//! A quiet stderr on a headless machine. Mesa's EGL (wgpu's GL backend, probed on every run that
//! enumerates adapters) prints "error: XDG_RUNTIME_DIR is invalid or not set in the environment."
//! when the variable is missing, as it is under ssh, cron, containers and CI: a line that reads as
//! the tool failing. When it is unset (or names no folder), the process gets a private one, made
//! with mode 0700 as the XDG spec asks, before any thread or driver starts. Nothing else is
//! redirected: real errors still reach stderr.

/// Sets `XDG_RUNTIME_DIR` to a fresh private folder when it is unset or not a folder. Called first
/// thing in `main`, while the process has one thread.
pub fn private_runtime_dir() {
    let usable = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .is_some_and(|d| d.is_dir());
    if usable {
        return;
    }
    // tempfile makes the folder 0700 on Unix; it is kept (not deleted on drop) because the
    // drivers may use it until the process exits, and it lives under the system's temp folder.
    if let Ok(dir) = tempfile::Builder::new()
        .prefix("attn-wgpu-runtime-")
        .tempdir()
    {
        let path = dir.keep();
        // Single-threaded here (first call in main), so changing the environment is sound.
        std::env::set_var("XDG_RUNTIME_DIR", path);
    }
}
