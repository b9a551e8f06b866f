// tiled_bwd_lib.wgsl — what every fused backward kernel of `tiled` shares (appended to
// tiled_bwd_kv.wgsl / tiled_bwd_q.wgsl with tiled_bwd_common.wgsl, the 32 x 32 tiles, and to
// tiled_bwd_wide_kv.wgsl / tiled_bwd_wide_q.wgsl with tiled_bwd_wide.wgsl, the small ones): the
// inputs' bindings and the helpers. The kernels declare their gradients' bindings and the
// workgroup arrays qs, gs, ks, vs, lse_s, dl_s; a tile file (tiled_bwd_d<D>[_b<BT>].wgsl) sets
// D4, the vec4 slots of a staged row, and BT, the rows and keys of a tile.

// The inputs: Q, K, V and dO in the storage dtype, the forward's row logsumexp L and
// D = rowsum(dO ∘ O) (tiled_bwd_dot.wgsl), f32.
@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<st>;
@group(0) @binding(3) var<storage, read> v: array<st>;
@group(0) @binding(4) var<storage, read> g: array<st>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> delta: array<f32>;

const LOG2E: f32 = 1.4426950408889634;
// The head dimension as a pipeline constant (the host sets it to D so the loops over d unroll).
override HD: u32 = 0u;
// D4, the vec4 slots per staged row, sizes the workgroup arrays: a `const` from the width file
// (naga 30 panics on these arrays sized by an `override`). Rows are RS = D4 + 1 vec4 apart: with
// a stride of D4 (a multiple of 32 banks) the threads reading different key rows at the same d in
// `scores` all hit the same banks (a 16-way conflict on every K and V load at D = 64); one vec4
// of padding spreads them.
const RS: u32 = D4 + 1u;

fn head_dim() -> u32 {
    return select(params.head_dim, HD, HD != 0u);
}

// Row i of a [N, D] tensor in the storage dtype as vec4 c4 (0 past N or D), widened at once: Q
// (which = 0), K (1), V (2) or dO (3).
fn row4(which: u32, base: u32, i: u32, c4: u32, n: u32, d: u32) -> vec4<f32> {
    return widen4(row4_raw(which, base, i, c4, n, d), (base + i * d) & 1u);
}

// row4 as raw storage words, widened later by widen4 (the register prefetch keeps them so):
// slot c holds the word of element e0 + c (e0 = the first), 0 past N or D (0.0 in every dtype).
// With two elements a word (PACK = 2) a word can appear twice; the compiler loads it once. (WGSL
// passes no storage pointers to functions, hence the switch.)
fn row4_raw(which: u32, base: u32, i: u32, c4: u32, n: u32, d: u32) -> vec4<st> {
    var x = vec4<st>();
    if (i < n) {
        for (var c = 0u; c < 4u; c++) {
            if (4u * c4 + c < d) {
                let e = base + i * d + 4u * c4 + c;
                switch (which) {
                    case 0u: { x[c] = q[e / PACK]; }
                    case 1u: { x[c] = k[e / PACK]; }
                    case 2u: { x[c] = v[e / PACK]; }
                    default: { x[c] = g[e / PACK]; }
                }
            }
        }
    }
    return x;
}

// The 4 elements of row4_raw's words as f32; `odd` is e0's parity (what `load` reads of a word
// with two elements).
fn widen4(x: vec4<st>, odd: u32) -> vec4<f32> {
    return vec4<f32>(load(x[0], odd), load(x[1], odd + 1u), load(x[2], odd), load(x[3], odd + 1u));
}

// P of row i (local row il) with keys j.x, j.y from their raw scores s: exp2 of the scaled score
// (base 2, plus the bias) minus L; 0 where the mask blocks or past N.
fn prob(head: u32, i: u32, j: vec2<u32>, n: u32, s: vec2<f32>, il: u32) -> vec2<f32> {
    let causal = params.causal != 0u;
    let diag = vec2<i32>(i32(i) + params.causal_off);
    let ok = (j < vec2<u32>(params.kv_seq)) & vec2<bool>(i < n)
        & ((vec2<i32>(j) <= diag) | vec2<bool>(!causal));
    var b = vec2<f32>(0.0);
    if (HAS_MASK) {
        b = vec2<f32>(mask_bias(head, i, j.x), mask_bias(head, i, j.y)) * LOG2E;
    }
    let s2 = s * (params.scale * LOG2E) + b;
    return select(vec2<f32>(0.0), exp2(s2 - vec2<f32>(lse_s[il])), ok);
}

// Stores 4 gradient values of row `row` (of a [N, D] tensor), columns 4 c4 .. +3, PACK at a time.
fn grad_index(head: u32, row: u32, c4: u32, n: u32, d: u32) -> u32 {
    return (head * n + row) * d + 4u * c4;
}

// L and D of query rows i0 .. i0+31 into lse_s / dl_s (L = +inf past N).
fn stage_stats(head: u32, i0: u32, t: u32, n: u32) {
    if (t < BT) {
        let i = i0 + t;
        lse_s[t] = select(-neg_inf(), lse[head * n + min(i, n - 1u)], i < n);
        dl_s[t] = select(0.0, delta[head * n + min(i, n - 1u)], i < n);
    }
}
