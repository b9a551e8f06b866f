//! Library errors. Every message names the offending value; the CLI adds context and an exit code.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// A problem parameter is out of range (zero sizes, absurd scale, ...).
    #[error("invalid problem: {0}")]
    InvalidProblem(String),
    /// No adapter matched the requested backend / name.
    #[error("no adapter: {0}")]
    NoAdapter(String),
    /// The variant cannot run this problem on this adapter; the reason is kept, never hidden.
    #[error("variant `{variant}` is incompatible: {reason}")]
    Incompatible { variant: String, reason: String },
    /// Unknown variant name.
    #[error("unknown variant `{0}` (known: {1})")]
    UnknownVariant(String, String),
    /// A wgpu validation / out-of-memory / internal error captured by an error scope.
    #[error("GPU error during {stage}: {message}")]
    Gpu { stage: String, message: String },
    /// Submitted GPU work did not finish within the device-wait limit (`--gpu-timeout`).
    #[error("GPU work did not finish within {seconds} s during {stage} (a hung or overloaded GPU; raise --gpu-timeout if the work is just long)")]
    Timeout { stage: String, seconds: f64 },
    /// The device was lost (driver reset, timeout, out of memory, ...).
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
