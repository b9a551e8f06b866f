//! Dropout on the attention probabilities, as SDPA's `dropout_p` does it, with a keep decision
//! that anyone can regenerate: Philox4x32-10 (Random123, Salmon et al., SC'11) counting over the
//! elements.
//!
//! # The keep mask (docs/training.md, "Dropout", has the same in numpy)
//! Element (b, h, i, j) of the probabilities P (query row i, key j, head g = b·H + h):
//! ```text
//! key     = (seed mod 2^32, seed >> 32)
//! counter = (i >> 2, j, g, 0)
//! word    = philox4x32_10(counter, key)[i & 3]
//! keep    = word >= threshold,   threshold = floor(p · 2^32)   (p as a double)
//! P'      = keep ? P / (1 − p) : 0
//! ```
//! One Philox call serves four consecutive query rows of one key: the fused kernels give each
//! thread 4 consecutive rows (tiled_v2.wgsl, the fused backward), so one call per 4 scores.
//! The row sums of the softmax use P before dropout (dropout is applied after softmax), so the
//! output is `sum_j P'_ij V_j` with `P` normalized as without dropout.
//!
//! The same function runs in WGSL (shaders/philox.wgsl); the tests check it against Random123's
//! known-answer vectors and the GPU against this twin. (No maintained Rust crate provides
//! Philox4x32-10 as a pure function of counter and key: `philox` is a 2019 0.0.0 release. The
//! function is 20 lines and the known-answer test pins it.)

use serde::Serialize;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with `rounds` rounds (10 for Philox4x32-10), as Random123's `philox4x32_R`: the key
/// is bumped by the Weyl constants before every round but the first.
pub fn philox4x32(rounds: u32, counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for r in 0..rounds {
        if r > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let p0 = M0 as u64 * c[0] as u64;
        let p1 = M1 as u64 * c[2] as u64;
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// Philox4x32-10.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    philox4x32(10, counter, key)
}

/// The dropout of a run: the probability `p`, and what the kernels use (`threshold`, `scale`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Dropout {
    /// SDPA's `dropout_p`: 0 <= p < 1.
    pub p: f64,
    /// A probability is dropped iff its Philox word is below this: floor(p · 2^32).
    pub threshold: u32,
    /// Kept probabilities are multiplied by 1 / (1 - p) (f32 on the GPU).
    pub scale: f64,
    /// The Philox key: the run's seed, low word first.
    pub key: [u32; 2],
}

impl Dropout {
    /// The dropout of probability `p` for `seed`; `None` for p = 0 (no dropout work at all).
    pub fn new(p: f64, seed: u64) -> Option<Dropout> {
        (p > 0.0).then(|| Dropout {
            p,
            threshold: threshold(p),
            scale: 1.0 / (1.0 - p),
            key: [seed as u32, (seed >> 32) as u32],
        })
    }

    /// Whether element (g = b·H + h, i, j) is kept.
    pub fn keep(&self, g: u64, i: u64, j: u64) -> bool {
        let w = philox4x32_10([(i >> 2) as u32, j as u32, g as u32, 0], self.key);
        w[(i & 3) as usize] >= self.threshold
    }

    /// The factor element (g, i, j) of P is multiplied by: 0 or 1 / (1 - p).
    pub fn factor(&self, g: u64, i: u64, j: u64) -> f64 {
        if self.keep(g, i, j) {
            self.scale
        } else {
            0.0
        }
    }

    /// The keep mask of heads `0..heads` over an `n` x `m` score matrix, `[heads, n, m]`
    /// row-major (what `--save-inputs` writes as keep.npy).
    pub fn keep_mask(&self, heads: u64, n: u64, m: u64) -> Vec<bool> {
        let mut out = Vec::with_capacity((heads * n * m) as usize);
        for g in 0..heads {
            for i in 0..n {
                for j in 0..m {
                    out.push(self.keep(g, i, j));
                }
            }
        }
        out
    }
}

/// floor(p · 2^32) for 0 <= p < 1, in double precision (as the numpy recipe of docs/training.md).
pub fn threshold(p: f64) -> u32 {
    (p * 4294967296.0).floor().clamp(0.0, u32::MAX as f64) as u32
}

/// Checks `--dropout`; the message names the bad value.
pub fn check_p(p: f64) -> Result<(), String> {
    if !(p.is_finite() && (0.0..1.0).contains(&p)) {
        return Err(format!(
            "--dropout must be a probability with 0 <= p < 1 (got {p}); p = 1 would drop \
             everything and divide by zero"
        ));
    }
    Ok(())
}

/// Largest keep mask `--save-inputs` writes (elements, one byte each in keep.npy): 2^28 = 256 MiB.
pub const MAX_SAVED_MASK: u64 = 1 << 28;

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{Binomial, DiscreteCDF};

    /// Random123's kat_vectors for philox4x32 with 10 rounds (counter, key, output).
    #[test]
    fn philox_matches_random123_known_answers() {
        let kat: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0, 0, 0, 0],
                [0, 0],
                [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
            ),
            (
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0],
                [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
            ),
        ];
        for (c, k, want) in kat {
            assert_eq!(philox4x32_10(c, k), want, "counter {c:08x?} key {k:08x?}");
        }
    }

    /// The kept fraction of a large mask (2^22 elements) lies inside the central 1 - 1e-6
    /// interval of Binomial(count, 1 - p), for several p and seeds: a biased threshold or a
    /// broken generator (e.g. one word reused for four rows) fails.
    #[test]
    fn the_kept_fraction_matches_one_minus_p() {
        for (p, seed) in [(0.1, 0u64), (0.5, 7), (0.9, 1 << 40), (0.01, 12345)] {
            let d = Dropout::new(p, seed).unwrap();
            let (heads, n) = (4u64, 1024u64);
            let count = heads * n * n;
            let kept = d.keep_mask(heads, n, n).iter().filter(|k| **k).count() as u64;
            let keep_p = 1.0 - d.threshold as f64 / 4294967296.0;
            let dist = Binomial::new(keep_p, count).unwrap();
            let alpha = 1e-6;
            let (lo, hi) = (
                dist.inverse_cdf(alpha / 2.0),
                dist.inverse_cdf(1.0 - alpha / 2.0),
            );
            assert!(
                (lo..=hi).contains(&kept),
                "p={p} seed={seed}: kept {kept} of {count}, outside [{lo}, {hi}]"
            );
            // And the four rows served by one call are not correlated: rows 4k and 4k+1 agree as
            // often as independent draws do.
            let mask = d.keep_mask(1, 8, 4096);
            let agree = (0..4096).filter(|&j| mask[j] == mask[4096 + j]).count() as u64;
            let q = keep_p * keep_p + (1.0 - keep_p) * (1.0 - keep_p);
            let dist = Binomial::new(q, 4096).unwrap();
            assert!(
                (dist.inverse_cdf(alpha / 2.0)..=dist.inverse_cdf(1.0 - alpha / 2.0))
                    .contains(&agree),
                "p={p}: rows 0 and 1 agree on {agree} of 4096 keys"
            );
        }
    }

    #[test]
    fn threshold_and_bad_values() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(0.5), 1 << 31);
        assert_eq!(threshold(0.1), 429496729);
        assert!(Dropout::new(0.0, 1).is_none());
        for bad in [-0.1, 1.0, 1.5, f64::NAN, f64::INFINITY] {
            let e = check_p(bad).unwrap_err();
            assert!(e.contains(&format!("{bad}")), "{e}");
        }
        assert!(check_p(0.0).is_ok() && check_p(0.999).is_ok());
        let d = Dropout::new(0.25, (3u64 << 32) | 5).unwrap();
        assert_eq!(d.key, [5, 3]);
        assert_eq!(d.scale, 1.0 / 0.75);
    }
}
