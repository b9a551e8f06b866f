// tiled_mask.wgsl — score masking and the online-softmax step shared by tiled.wgsl and
// tiled_coop.wgsl (appended to them by `kernel!(.. + "tiled_mask.wgsl", ..)`; they define LOG2E).

// Scores (base 2) of row i with keys j, j + step, j + 2 step, j + 3 step: -inf past the m keys or
// above the causal diagonal (j > i + causal_off), plus the mask bias (in base 2, like the scores)
// when the problem has one.
fn masked(s: vec4<f32>, head: u32, i: u32, j: u32, step: u32, m: u32, causal: bool, ninf: f32) -> vec4<f32> {
    let jv = vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u) * step;
    let diag = vec4<i32>(i32(i) + params.causal_off);
    let allowed = (jv < vec4<u32>(m)) & ((vec4<i32>(jv) <= diag) | vec4<bool>(!causal));
    var b = vec4<f32>(0.0);
    if (HAS_MASK) {
        b = vec4<f32>(mask_bias(head, i, jv.x), mask_bias(head, i, jv.y),
                      mask_bias(head, i, jv.z), mask_bias(head, i, jv.w)) * LOG2E;
    }
    return select(vec4<f32>(ninf), s + b, allowed);
}

// The lazy online-softmax maximum (FlashAttention-4's): a row's running maximum m moves to the
// block's maximum mb only when mb exceeds it by more than tau (base 2), so P = exp2(S - m) stays
// under 2^tau and what was accumulated (O and the row sum) needs rescaling only in a block where
// some row moved; tau = 0 moves it whenever mb > m, the classic step. A row that has seen no
// allowed key keeps m = -inf.
fn lazy_max(m: vec4<f32>, mb: vec4<f32>, tau: f32) -> vec4<f32> {
    return select(m, mb, mb > m + vec4<f32>(tau));
}

fn max4(v: vec4<f32>) -> f32 {
    return max(max(v.x, v.y), max(v.z, v.w));
}

// One online-softmax step for 16 scores of a row (base 2) with the new running max `m_new`:
// p = exp2(s - m_new), alpha = exp2(m - m_new) rescales what was accumulated, l = l * alpha + sum(p).
// While the row has seen no allowed key (m_new = -inf), nothing is added: p = 0, alpha = 1, and m
// stays -inf.
struct Online {
    p0: vec4<f32>,
    p1: vec4<f32>,
    p2: vec4<f32>,
    p3: vec4<f32>,
    alpha: f32,
    m: f32,
    l: f32,
}

fn online_step(s0: vec4<f32>, s1: vec4<f32>, s2: vec4<f32>, s3: vec4<f32>, m: f32, l: f32, m_new: f32, ninf: f32) -> Online {
    if (m_new > ninf) {
        let p0 = exp2(s0 - m_new);
        let p1 = exp2(s1 - m_new);
        let p2 = exp2(s2 - m_new);
        let p3 = exp2(s3 - m_new);
        let alpha = exp2(m - m_new);
        return Online(p0, p1, p2, p3, alpha, m_new, l * alpha + dot(p0 + p1 + p2 + p3, vec4<f32>(1.0)));
    }
    let z = vec4<f32>(0.0);
    return Online(z, z, z, z, 1.0, m, l);
}
