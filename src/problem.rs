//! The attention problem: shape, dtype, causal flag, scale, seed, and the deterministic inputs.
//!
//! Layout of Q, K, V and O: `[B, H, N, D]`, row-major, contiguous (element `(b, h, i, d)` lives at
//! `((b * H + h) * N + i) * D + d`).
//!
//! # Input generator (same seed, same bits, on every machine)
//! Q, K and V are drawn in that order from one `Pcg32` stream (`rand_pcg::Pcg32::seed_from_u64(seed)`,
//! the PCG-XSH-RR 64/32 generator, whose output is specified bit-for-bit). Each element takes one
//! `u32` `x` and becomes `((x >> 8) as f32) * 2^-23 - 1.0`: a uniform value in `[-1, 1)` with 24
//! significant bits, exactly representable in f32.

use rand_core::{RngCore, SeedableRng};
use serde::Serialize;

use crate::{Error, Result};

/// Storage type of Q, K, V and O on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
}

impl DType {
    pub fn bytes(self) -> u64 {
        match self {
            DType::F32 => 4,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub batch: u32,
    pub heads: u32,
    pub seq: u32,
    pub head_dim: u32,
    /// Top-left aligned causal mask (key j takes part in query row i iff j <= i), as SDPA's `is_causal`.
    pub causal: bool,
    pub scale: f32,
    pub dtype: DType,
    pub seed: u64,
}

/// Largest sequence length and head dimension accepted at all (the adapter may refuse smaller ones).
pub const MAX_SEQ: u32 = 1 << 20;
pub const MAX_HEAD_DIM: u32 = 256;

impl Problem {
    /// A problem with the default scale `1/sqrt(D)`.
    pub fn new(batch: u32, heads: u32, seq: u32, head_dim: u32, causal: bool, seed: u64) -> Self {
        Problem {
            batch,
            heads,
            seq,
            head_dim,
            causal,
            scale: 1.0 / (head_dim.max(1) as f32).sqrt(),
            dtype: DType::F32,
            seed,
        }
    }

    /// Checks the sizes; every message names the bad value.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidProblem(m));
        if self.batch == 0 {
            return bad("--batch must be at least 1 (got 0)".into());
        }
        if self.heads == 0 {
            return bad("--heads must be at least 1 (got 0)".into());
        }
        if self.seq == 0 {
            return bad("--seq must be at least 1 (got 0)".into());
        }
        if self.seq > MAX_SEQ {
            return bad(format!("--seq {} exceeds the maximum {MAX_SEQ}", self.seq));
        }
        if self.head_dim == 0 {
            return bad("--head-dim must be at least 1 (got 0)".into());
        }
        if self.head_dim > MAX_HEAD_DIM {
            return bad(format!(
                "--head-dim {} exceeds the maximum {MAX_HEAD_DIM}",
                self.head_dim
            ));
        }
        if !self.scale.is_finite() {
            return bad(format!("--scale must be finite (got {})", self.scale));
        }
        let bh = self.batch as u64 * self.heads as u64;
        if bh > u32::MAX as u64 / 2 {
            return bad(format!(
                "--batch {} x --heads {} = {bh} heads in all is too many",
                self.batch, self.heads
            ));
        }
        let elems = bh * self.seq as u64 * self.head_dim as u64;
        if elems > (1u64 << 40) {
            return bad(format!("B*H*N*D = {elems} elements is too large"));
        }
        Ok(())
    }

    /// B*H: the number of independent attention heads.
    pub fn bh(&self) -> u64 {
        self.batch as u64 * self.heads as u64
    }
    /// Elements in one of Q, K, V or O.
    pub fn qkv_elems(&self) -> u64 {
        self.bh() * self.seq as u64 * self.head_dim as u64
    }
    pub fn qkv_bytes(&self) -> u64 {
        self.qkv_elems() * self.dtype.bytes()
    }
    /// Elements of one N x N score matrix over all heads.
    pub fn scores_elems(&self) -> u64 {
        self.bh() * self.seq as u64 * self.seq as u64
    }
    /// Number of (query, key) pairs that take part: N^2 per head, or N(N+1)/2 when causal.
    pub fn allowed_pairs_per_head(&self) -> u64 {
        let n = self.seq as u64;
        if self.causal {
            n * (n + 1) / 2
        } else {
            n * n
        }
    }
    pub fn shape_string(&self) -> String {
        format!(
            "B={} H={} N={} D={} {} {}",
            self.batch,
            self.heads,
            self.seq,
            self.head_dim,
            self.dtype.name(),
            if self.causal { "causal" } else { "non-causal" }
        )
    }
}

/// Q, K and V as f32 (the values the GPU sees and the reference uses).
#[derive(Debug, Clone)]
pub struct Inputs {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

/// One uniform value in [-1, 1) from one u32 (see the module docs).
pub fn unit_from_u32(x: u32) -> f32 {
    ((x >> 8) as f32) * (1.0 / (1u32 << 23) as f32) - 1.0
}

impl Inputs {
    /// The documented deterministic generator (module docs).
    pub fn generate(p: &Problem) -> Inputs {
        let n = p.qkv_elems() as usize;
        let mut rng = rand_pcg::Pcg32::seed_from_u64(p.seed);
        let mut draw =
            |len: usize| -> Vec<f32> { (0..len).map(|_| unit_from_u32(rng.next_u32())).collect() };
        let q = draw(n);
        let k = draw(n);
        let v = draw(n);
        Inputs { q, k, v }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_range_and_determinism() {
        let p = Problem::new(1, 2, 7, 5, true, 42);
        let a = Inputs::generate(&p);
        let b = Inputs::generate(&p);
        assert_eq!(a.q, b.q);
        assert!(a
            .q
            .iter()
            .chain(&a.k)
            .chain(&a.v)
            .all(|x| (-1.0..1.0).contains(x)));
        let c = Inputs::generate(&Problem { seed: 43, ..p });
        assert_ne!(a.q, c.q);
        assert_eq!(unit_from_u32(0), -1.0);
        assert!(unit_from_u32(u32::MAX) < 1.0);
    }

    #[test]
    fn first_values_are_pinned() {
        // Pins the stream so that a dependency bump that changed it would be caught.
        let p = Problem::new(1, 1, 1, 2, false, 0);
        let x = Inputs::generate(&p);
        assert_eq!(x.q, [-0.8609055f32, 0.97278583]);
    }
}
