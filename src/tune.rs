//! `tune`: searches the `tiled` variant's tile configurations (the register-tiled kernel `rt`, or
//! one row per thread with BR rows a workgroup, `row:BR`) for one adapter, shape class and dtype.
//! Every candidate runs through the ordinary runner ([`crate::run::run_variant`]) and is validated
//! against the f64 reference; a candidate that fails validation is rejected, whatever its time.
//! The fastest passing one (median GPU time of the forward) is cached in a JSON [`TuneFile`] that
//! `run` reads.
//!
//! The cache is keyed by adapter ([`crate::probe::key`]: name + backend + driver) and, inside, by
//! shape class ([`ShapeClass`]): variant, dtype, causal, the exact D, and N's power-of-two bucket
//! (`N<=1024` holds 513..=1024). Default location: next to the probe file,
//! `<cache folder>/tune-<adapter key>.json` ([`crate::probe::cache_path`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gpu::context::AdapterReport;
use crate::gpu::runner::{Runner, Schedule};
use crate::gpu::Gpu;
use crate::problem::{Inputs, Problem};
use crate::run::{run_variant, VariantRun};
use crate::variants::tiled::{self, TileChoice, TileRequest};
use crate::Result;

pub const SCHEMA_VERSION: u32 = 1;

/// The variants `tune` can search: those whose plan honours a tile choice (the registry's
/// `tiles`; today `tiled`, whose kernel choice is the tunable).
pub fn tunable() -> Vec<crate::variants::VariantId> {
    crate::variants::tile_variants()
}

/// What a cached choice applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeClass {
    pub variant: String,
    pub dtype: String,
    pub causal: bool,
    pub head_dim: u32,
    /// The power of two at or above N: the class holds N in (n_bucket/2, n_bucket].
    pub n_bucket: u32,
}

impl ShapeClass {
    pub fn of(variant: &str, p: &Problem) -> ShapeClass {
        ShapeClass {
            variant: variant.into(),
            dtype: p.dtype.name().into(),
            causal: p.causal,
            head_dim: p.head_dim,
            n_bucket: p.seq.next_power_of_two(),
        }
    }

    /// The entry key, e.g. `tiled f32 causal D=64 N<=1024`.
    pub fn key(&self) -> String {
        format!(
            "{} {} {} D={} N<={}",
            self.variant,
            self.dtype,
            if self.causal { "causal" } else { "non-causal" },
            self.head_dim,
            self.n_bucket
        )
    }
}

/// One candidate's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Candidate {
    pub choice: TileChoice,
    /// Median GPU time of one forward (sum of its dispatches), µs.
    pub gpu_median_us: Option<f64>,
    /// `PASS`, `FAIL` (rejected: wrong result) or `unsupported` (did not fit at run time).
    pub verdict: String,
    pub reason: Option<String>,
}

/// The winner for one shape class.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneEntry {
    pub variant: String,
    pub dtype: String,
    pub causal: bool,
    pub head_dim: u32,
    pub n_bucket: u32,
    pub choice: TileChoice,
    pub gpu_median_us: f64,
    /// The shape it was measured on (`B=1 H=4 N=256 D=64 f32 causal`).
    pub shape: String,
    pub reps: u32,
    pub command: String,
    pub candidates: Vec<Candidate>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneFile {
    pub schema_version: u32,
    pub tool: String,
    /// [`crate::probe::key`] of the adapter the entries were measured on.
    pub key: String,
    pub adapter_name: String,
    pub backend: String,
    pub driver: String,
    /// By [`ShapeClass::key`].
    pub entries: BTreeMap<String, TuneEntry>,
}

impl TuneFile {
    pub fn new(r: &AdapterReport) -> TuneFile {
        TuneFile {
            schema_version: SCHEMA_VERSION,
            tool: "attn-wgpu tune".into(),
            key: crate::probe::key(r),
            adapter_name: r.name.clone(),
            backend: r.backend.clone(),
            driver: format!("{} {}", r.driver, r.driver_info),
            entries: BTreeMap::new(),
        }
    }

    /// The entry for `variant` on `p`'s shape class, if tuned.
    pub fn lookup(&self, variant: &str, p: &Problem) -> Option<&TuneEntry> {
        self.entries.get(&ShapeClass::of(variant, p).key())
    }
}

/// The tile request a cache entry makes for `variant` on `p`: its choice, with source
/// `tuned: <path>`, when an entry matches `p`'s shape class and the choice fits this adapter.
/// `Err` with a warning when an entry matches but its choice does not fit here.
pub fn request_for(
    cache: &TuneFile,
    path: &str,
    variant: &str,
    p: &Problem,
    caps: &crate::gpu::AdapterCaps,
) -> std::result::Result<Option<TileRequest>, String> {
    let Some(e) = cache.lookup(variant, p) else {
        return Ok(None);
    };
    tiled::config_for(e.choice, p.head_dim, caps).map_err(|why| {
        format!(
            "tune cache {path}: entry `{}` ({}) does not fit this adapter ({why}); using the default tile",
            ShapeClass::of(variant, p).key(),
            e.choice
        )
    })?;
    Ok(Some(TileRequest {
        choice: e.choice,
        source: format!("tuned: {path}"),
    }))
}

/// The default cache path of an adapter (module docs).
pub fn default_path(r: &AdapterReport) -> PathBuf {
    crate::probe::cache_path(r, "tune")
}

/// Reads a tune cache; errors name the file.
pub fn load(path: &Path) -> std::result::Result<TuneFile, String> {
    let text = crate::infile::read_to_string(path)
        .map_err(|e| format!("tune cache {}: cannot read: {e}", path.display()))?;
    let f: TuneFile = serde_json::from_str(&text).map_err(|e| {
        format!(
            "tune cache {}: not an attn-wgpu tune file: {e}",
            path.display()
        )
    })?;
    if f.schema_version != SCHEMA_VERSION {
        return Err(format!(
            "tune cache {}: schema_version {} (this build reads {SCHEMA_VERSION})",
            path.display(),
            f.schema_version
        ));
    }
    Ok(f)
}

/// Runs every tile choice of `variant` that fits this adapter on `p` (validated, timed), in
/// preference order. `p.tile` is replaced per candidate.
pub fn run_candidates(
    gpu: &Gpu,
    runner: &mut Runner,
    p: &Problem,
    x: &Inputs,
    variant: &str,
    schedule: Schedule,
) -> Result<Vec<(TileChoice, VariantRun)>> {
    let mut out = Vec::new();
    for (choice, _) in tiled::candidates(p.head_dim, &gpu.caps) {
        let q = Problem {
            tile: Some(TileRequest {
                choice,
                source: "tune candidate".into(),
            }),
            ..p.clone()
        };
        let r = run_variant(gpu, runner, &q, x, variant, schedule, true)?;
        out.push((choice, r));
    }
    Ok(out)
}

/// A candidate's row from its run.
pub fn candidate(choice: TileChoice, r: &VariantRun) -> Candidate {
    Candidate {
        choice,
        gpu_median_us: r
            .forward
            .as_ref()
            .and_then(|f| f.gpu_sum_us)
            .map(|s| s.median),
        verdict: match &r.validation {
            Some(v) => v.verdict.to_string(),
            None => r.status.to_string(),
        },
        reason: r.reason.clone(),
    }
}

/// The fastest candidate that passed validation and has a time.
pub fn best(cands: &[Candidate]) -> Option<&Candidate> {
    cands
        .iter()
        .filter(|c| c.verdict == "PASS")
        .filter(|c| c.gpu_median_us.is_some())
        .min_by(|a, b| {
            a.gpu_median_us
                .partial_cmp(&b.gpu_median_us)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_buckets() {
        let mut p = Problem::new(1, 1, 64, 16, true, 0);
        assert_eq!(
            ShapeClass::of(crate::variants::VariantId::Tiled.name(), &p).key(),
            "tiled f32 causal D=16 N<=64"
        );
        p.seq = 65;
        assert_eq!(
            ShapeClass::of(crate::variants::VariantId::Tiled.name(), &p).n_bucket,
            128
        );
        p.seq = 1024;
        p.causal = false;
        assert_eq!(
            ShapeClass::of(crate::variants::VariantId::Tiled.name(), &p).key(),
            "tiled f32 non-causal D=16 N<=1024"
        );
    }

    #[test]
    fn best_skips_failures() {
        let c = |ch, t, v: &str| Candidate {
            choice: ch,
            gpu_median_us: Some(t),
            verdict: v.into(),
            reason: None,
        };
        let cands = vec![
            c(TileChoice::RegisterTiled, 5.0, "FAIL"),
            c(TileChoice::Row(32), 9.0, "PASS"),
            c(TileChoice::Row(16), 7.0, "PASS"),
        ];
        assert_eq!(best(&cands).unwrap().choice, TileChoice::Row(16));
        assert!(best(&cands[..1]).is_none());
    }

    #[test]
    fn tile_choice_round_trip() {
        for s in ["rt", "row:32", "row:3000"] {
            assert_eq!(TileChoice::parse(s).unwrap().to_string(), s);
        }
        assert!(TileChoice::parse("row:0").is_err());
        assert!(TileChoice::parse("row:x").is_err());
        assert!(TileChoice::parse("bogus").is_err());
    }
}
