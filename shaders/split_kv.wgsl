// split_kv.wgsl — flash-decoding's first pass (the `split-kv` variant): for few query rows and
// many keys, one workgroup per (split of the keys, query row, head) instead of one per block of
// query rows, so that a decode step (N = 1..16) still launches enough workgroups to fill the GPU.
// Each workgroup runs the online softmax over its slice of the keys and writes its partial
// (max m, sum l, unnormalized output) to device memory; split_kv_combine.wgsl merges the slices.
//
// Per tile of BK = 16 keys: K staged in workgroup memory (f32, rows padded to KP = 257 against
// bank conflicts; any D <= 256: 16 KiB), the 16 scores as 8-thread partial dot products reduced
// through `red`, masked (M keys, the causal diagonal, the mask bias) and, with dropout, their
// factors drawn once per key (philox.wgsl). Then every thread rescales and accumulates its output
// columns (t and t + 128) with V read straight from device memory (consecutive threads, consecutive
// columns). Q, K and V in the storage dtype (prelude shaders/dtype_*.wgsl); everything on chip f32.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<st>;
@group(0) @binding(3) var<storage, read> v: array<st>;
@group(0) @binding(4) var<storage, read_write> po: array<f32>;       // [heads, N, SPLITS, D]
@group(0) @binding(5) var<storage, read_write> pml: array<vec2<f32>>; // [heads, N, SPLITS]: (m, l)

// Key slices per query row, and keys per slice (a multiple of BK), set by the host.
override SPLITS: u32 = 1u;
override CHUNK: u32 = 16u;
const BK: u32 = 16u;
const WG: u32 = 128u;
const KP: u32 = 257u;
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> qsh: array<f32, 256>;
var<workgroup> ks: array<f32, 4112>;   // BK x KP
var<workgroup> red: array<f32, 128>;
var<workgroup> sc: array<f32, 16>;     // this tile's scores (base 2), -inf where blocked
var<workgroup> zf: array<f32, 16>;     // their dropout factors (1 without dropout)

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let nk = params.kv_seq;
    let d = params.head_dim;
    let split = wg.x;
    let i = wg.y;
    let head = params.head_offset + wg.z;
    let kvbase = kv_head(head) * nk * d;
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E;
    for (var c = t; c < d; c += WG) {
        let e = (head * n + i) * d + c;
        qsh[c] = load(q[e / PACK], e) * qscale;
    }
    // This slice's keys, cut at the causal diagonal of row i (uniform over the workgroup).
    let j_begin = split * CHUNK;
    let j_end = min(causal_keys(i + 1u), j_begin + CHUNK);
    var m = ninf;
    var l = 0.0;
    var acc0 = 0.0;
    var acc1 = 0.0;
    let key = t / 8u;
    let part = t % 8u;
    for (var j0 = j_begin; j0 < j_end; j0 += BK) {
        workgroupBarrier();  // the previous tile's K, scores and factors are consumed
        for (var e = t; e < BK * d; e += WG) {
            let r = e / d;
            let c = e % d;
            var x = 0.0;
            if (j0 + r < j_end) {
                let ek = kvbase + (j0 + r) * d + c;
                x = load(k[ek / PACK], ek);
            }
            ks[r * KP + c] = x;
        }
        workgroupBarrier();
        var s = 0.0;
        for (var c = part; c < d; c += 8u) {
            s += qsh[c] * ks[key * KP + c];
        }
        red[t] = s;
        workgroupBarrier();
        if (t < BK) {
            var x = 0.0;
            for (var r = 0u; r < 8u; r++) {
                x += red[t * 8u + r];
            }
            let j = j0 + t;
            if (HAS_MASK) {
                x += mask_bias(head, i, j) * LOG2E;
            }
            sc[t] = select(ninf, x, j < j_end);
            var z = 1.0;
            if (DROPOUT) {
                z = drop1(head, i, j);
            }
            zf[t] = z;
        }
        workgroupBarrier();
        var mb = ninf;
        for (var r = 0u; r < BK; r++) {
            mb = max(mb, sc[r]);
        }
        let m_new = max(m, mb);
        if (m_new > ninf) {
            // m = -inf before the first allowed key: alpha = 0 scales nothing that exists.
            let alpha = exp2(m - m_new);
            l *= alpha;
            acc0 *= alpha;
            acc1 *= alpha;
            for (var r = 0u; r < BK; r++) {
                let p = exp2(sc[r] - m_new);
                l += p;
                if (j0 + r < j_end) {
                    let pz = p * zf[r];
                    let ev = kvbase + (j0 + r) * d;
                    if (t < d) {
                        acc0 += pz * load(v[(ev + t) / PACK], ev + t);
                    }
                    if (t + WG < d) {
                        acc1 += pz * load(v[(ev + t + WG) / PACK], ev + t + WG);
                    }
                }
            }
            m = m_new;
        }
    }
    let slot = (wg.z * n + i) * SPLITS + split;
    if (t < d) {
        po[slot * d + t] = acc0;
    }
    if (t + WG < d) {
        po[slot * d + t + WG] = acc1;
    }
    if (t == 0u) {
        pml[slot] = vec2<f32>(m, l);
    }
}
