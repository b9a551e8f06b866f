//! The host-memory budget, checked before anything is allocated or generated: a problem that the
//! host cannot hold is refused with the bytes it needs and the limit (exit 2), instead of an
//! allocation failure that aborts the process.
//!
//! What a run holds on the host at its peak :
//! - Q as f32 (generated or read from .npy): B·H·N·D · 4 bytes; K and V with their own heads and
//!   length: 2 · B·Hkv·M·D · 4 bytes (Q alone was counted before, so a long --kv-seq slipped by);
//! - the mask bias as f32 and its upload copy: 2 · bias bytes;
//! - the upload copy of the largest input in the run's dtype: max(B·H·N·D, B·Hkv·M·D) · e;
//! - the read-back of O (raw bytes + decoded f32): B·H·N·D · (e + 4);
//! - each variant's kept output (f32) for the report and `--out`: variants · B·H·N·D · 4;
//! - training (`--backward`): dO as f32, the read-back of dQ, dK, dV (raw + decoded) and each
//!   variant's kept gradients: B·H·N·D · 4 + (B·H·N·D + 2 · B·Hkv·M·D) · (e + 4 + variants · 4).
//!
//! The CPU reference checks a bounded sample of rows (`validate::rows_to_check`), so it adds
//! little. The limit is the memory the operating system reports available (sysinfo), or
//! `ATTN_WGPU_HOST_MEMORY_LIMIT` (bytes) when set.

use crate::problem::Problem;
use crate::{Error, Result};

/// The environment variable that overrides the detected limit (bytes).
pub const LIMIT_ENV: &str = "ATTN_WGPU_HOST_MEMORY_LIMIT";

/// Host bytes a run of `variants` variants on `p` holds at its peak (module docs).
pub fn host_bytes_needed(p: &Problem, variants: usize) -> u64 {
    let q = p.qkv_elems();
    let kv = p.kv_elems();
    let e = p.dtype.bytes();
    let v = variants as u64;
    let bias = p.bias_bytes();
    let inputs = q.saturating_add(kv.saturating_mul(2)).saturating_mul(4);
    let upload = q.max(kv).saturating_mul(e);
    let outputs = q.saturating_mul(e + 4 + v.saturating_mul(4));
    let training = if p.backward {
        q.saturating_mul(4).saturating_add(
            q.saturating_add(kv.saturating_mul(2))
                .saturating_mul((e + 4).saturating_add(v.saturating_mul(4))),
        )
    } else {
        0
    };
    inputs
        .saturating_add(upload)
        .saturating_add(outputs)
        .saturating_add(training)
        .saturating_add(bias.saturating_mul(2))
}

/// The host limit: `ATTN_WGPU_HOST_MEMORY_LIMIT` when set, else the memory available now.
pub fn host_limit() -> Result<(u64, &'static str)> {
    if let Ok(s) = std::env::var(LIMIT_ENV) {
        return s
            .trim()
            .parse::<u64>()
            .map(|b| (b, LIMIT_ENV))
            .map_err(|_| {
                Error::InvalidProblem(format!(
                    "{LIMIT_ENV}=`{s}` is not a byte count (a non-negative integer)"
                ))
            });
    }
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    Ok((sys.available_memory(), "available memory"))
}

/// Refuses (exit 2) a run that would not fit the host; see the module docs.
pub fn check_host(p: &Problem, variants: usize) -> Result<()> {
    let need = host_bytes_needed(p, variants);
    let (limit, what) = host_limit()?;
    if limit > 0 && need > limit {
        return Err(Error::InvalidProblem(format!(
            "{} needs {need} bytes of host memory ({:.1} GiB: inputs, read-back and {variants} \
             kept output(s)), above the host's {what} of {limit} bytes ({:.1} GiB); reduce \
             --batch, --heads, --seq, --kv-seq or --head-dim",
            p.shape_string(),
            need as f64 / (1u64 << 30) as f64,
            limit as f64 / (1u64 << 30) as f64
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_the_problem_and_the_variants() {
        let p = Problem::new(1, 2, 64, 16, true, 0);
        let elems = 2 * 64 * 16;
        // f32: 12 (inputs) + 4 (upload) + 8 (read-back) + 4 per variant.
        assert_eq!(host_bytes_needed(&p, 1), elems * 28);
        assert_eq!(host_bytes_needed(&p, 6), elems * 48);
        let huge = Problem::new(100_000, 1000, 64, 64, true, 0);
        assert!(host_bytes_needed(&huge, 1) > 1u64 << 40);
    }
}
