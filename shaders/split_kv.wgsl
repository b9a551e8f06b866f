// split_kv.wgsl — flash-decoding's first pass (the `split-kv` variant): for few query rows and
// many keys, one workgroup per (slice of the keys, query row, K/V head) instead of one per block
// of query rows, so that a decode step (N = 1..16) still launches enough workgroups to fill the
// GPU. A workgroup serves every query head of its K/V head's group (grouped-query attention:
// K and V are read once per group, not once per query head), runs the online softmax over its
// slice for each of them, and writes the partials (max m, sum l, unnormalized output) to device
// memory; split_kv_combine.wgsl merges the slices.
//
// Per tile of BK keys (a part file: split_kv_d128.wgsl, BK = 32 for D <= 128, or
// split_kv_d256.wgsl, BK = 16): K staged in workgroup memory from 16-byte words (prelude
// `word4`, EPW elements each; f32 on chip, rows KP apart against bank conflicts); the GROUP x BK
// scores as full dot products over D (one (head, key) pair per thread), masked (M keys, the
// causal diagonal, the mask bias) with their dropout factors (philox.wgsl); thread g < GROUP
// takes head g's online-softmax step; then every thread accumulates its output columns (t and
// t + 128) for all GROUP heads, each V element read once for the group.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte words
@group(0) @binding(3) var<storage, read> v: array<st>;
@group(0) @binding(4) var<storage, read_write> po: array<f32>;        // [heads, N, SPLITS, D]
@group(0) @binding(5) var<storage, read_write> pml: array<vec2<f32>>; // [heads, N, SPLITS]: (m, l)

// Key slices per query row and keys per slice (a multiple of BK); query heads per K/V head (at
// most GMAX); output columns per thread (ceil(D / 128), at most 2). Set by the host.
override SPLITS: u32 = 1u;
override CHUNK: u32 = 32u;
override GROUP: u32 = 1u;
override DC: u32 = 1u;
const WG: u32 = 128u;
const GMAX: u32 = 8u;
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> qsh: array<f32, 2048>;   // [GMAX][256]: the group's query rows, scaled
var<workgroup> ks: array<f32, KS>;      // [BK][KP]
var<workgroup> sc: array<f32, 256>;     // [GMAX][32]: scores (base 2), then P ∘ dropout
var<workgroup> zf: array<f32, 256>;     // [GMAX][32]: dropout factors
var<workgroup> al: array<f32, 8>;       // [GMAX]: this tile's rescale factor per head

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let nk = params.kv_seq;
    let d = params.head_dim;
    let split = wg.x;
    let i = wg.y;
    let kvh = params.head_offset / GROUP + wg.z;
    let g0 = kvh * GROUP;       // its first query head
    let lg0 = wg.z * GROUP;     // ... local to this dispatch
    let wpr = d / EPW;          // 16-byte words per K row
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E;
    for (var e = t; e < GROUP * d; e += WG) {
        let g = e / d;
        let c = e % d;
        let x = ((g0 + g) * n + i) * d + c;
        qsh[g * 256u + c] = load(q[x / PACK], x) * qscale;
    }
    // This slice's keys, cut at the causal diagonal of row i (the same for the whole group).
    let j_begin = split * CHUNK;
    let j_end = min(causal_keys(i + 1u), j_begin + CHUNK);
    var mrow = ninf;  // thread g < GROUP: head g's running max and sum
    var lrow = 0.0;
    var acc: array<f32, 16>;  // [g * 2 + column]
    for (var e = 0u; e < 16u; e++) {
        acc[e] = 0.0;
    }
    for (var j0 = j_begin; j0 < j_end; j0 += BK) {
        workgroupBarrier();  // the previous tile's K and P are consumed
        for (var w = t; w < BK * wpr; w += WG) {
            let r = w / wpr;
            let cw = w % wpr;
            var x = vec4<u32>(0u);
            if (j0 + r < j_end) {
                x = k[(kvh * nk + j0 + r) * wpr + cw];
            }
            let at = r * KP + cw * EPW;
            let lo = word4(x, 0u);
            ks[at] = lo.x; ks[at + 1u] = lo.y; ks[at + 2u] = lo.z; ks[at + 3u] = lo.w;
            if (EPW == 8u) {
                let hi = word4(x, 1u);
                ks[at + 4u] = hi.x; ks[at + 5u] = hi.y; ks[at + 6u] = hi.z; ks[at + 7u] = hi.w;
            }
        }
        workgroupBarrier();
        for (var pr = t; pr < GROUP * BK; pr += WG) {
            let g = pr / BK;
            let r = pr % BK;
            var s = 0.0;
            for (var c = 0u; c < d; c++) {
                s += qsh[g * 256u + c] * ks[r * KP + c];
            }
            let j = j0 + r;
            if (HAS_MASK) {
                s += mask_bias(g0 + g, i, j) * LOG2E;
            }
            sc[g * 32u + r] = select(ninf, s, j < j_end);
            var z = 1.0;
            if (DROPOUT) {
                z = drop1(g0 + g, i, j);
            }
            zf[g * 32u + r] = z;
        }
        workgroupBarrier();
        if (t < GROUP) {
            var mb = ninf;
            for (var r = 0u; r < BK; r++) {
                mb = max(mb, sc[t * 32u + r]);
            }
            let m_new = max(mrow, mb);
            var a = 1.0;
            if (m_new > ninf) {
                // mrow = -inf before the head's first allowed key: a = 0 scales nothing there.
                a = exp2(mrow - m_new);
                var sum = 0.0;
                for (var r = 0u; r < BK; r++) {
                    let p = exp2(sc[t * 32u + r] - m_new);
                    sum += p;
                    sc[t * 32u + r] = p * zf[t * 32u + r];
                }
                lrow = lrow * a + sum;
                mrow = m_new;
            } else {
                for (var r = 0u; r < BK; r++) {
                    sc[t * 32u + r] = 0.0;
                }
            }
            al[t] = a;
        }
        workgroupBarrier();
        for (var g = 0u; g < GROUP; g++) {
            for (var cc = 0u; cc < DC; cc++) {
                acc[g * 2u + cc] *= al[g];
            }
        }
        for (var r = 0u; r < BK; r++) {
            if (j0 + r < j_end) {
                let ev = (kvh * nk + j0 + r) * d;
                for (var cc = 0u; cc < DC; cc++) {
                    let c = t + cc * WG;
                    if (c < d) {
                        let vv = load(v[(ev + c) / PACK], ev + c);
                        for (var g = 0u; g < GROUP; g++) {
                            acc[g * 2u + cc] += sc[g * 32u + r] * vv;
                        }
                    }
                }
            }
        }
    }
    for (var g = 0u; g < GROUP; g++) {
        let slot = ((lg0 + g) * n + i) * SPLITS + split;
        for (var cc = 0u; cc < DC; cc++) {
            let c = t + cc * WG;
            if (c < d) {
                po[slot * d + c] = acc[g * 2u + cc];
            }
        }
    }
    if (t < GROUP) {
        pml[((lg0 + t) * n + i) * SPLITS + split] = vec2<f32>(mrow, lrow);
    }
}
