// split_kv_combine.wgsl — flash-decoding's second pass: one workgroup per (query row, head) merges
// the SPLITS partials of split_kv.wgsl: M = max m_s, L = sum l_s 2^(m_s - M),
// O = sum o_s 2^(m_s - M) / L (0 for a row with no allowed key, SDPA's way), and the row's
// logsumexp L (base 2, +inf for such a row) for the backward (the fused backward of `tiled`).
//
// The slices are read in parallel, not one after another (a chain of SPLITS dependent loads is
// what made the first version's combine cost 40-70 µs at SPLITS = 128): the 256 threads first
// reduce the slices' (m, l) through workgroup memory, then the threads of each of 8 slice lanes
// sum every 8th slice's output for 4 columns at a time, and the 8 lanes' sums are added.

@group(0) @binding(1) var<storage, read> po: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> pml: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<st>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;

override SPLITS: u32 = 1u;
const WG: u32 = 256u;
const SL: u32 = 8u;   // slice lanes: thread t takes slices t / 32, t / 32 + 8, ...

var<workgroup> red: array<f32, 256>;       // reductions over the slices
var<workgroup> part: array<vec4<f32>, 512>; // [SL][64 column quads]: each slice lane's sums

@compute @workgroup_size(256, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = params.head_dim;
    let dq = d / 4u;  // column quads (D is a multiple of 4: split_kv.rs)
    let i = wg.x;
    let head = params.head_offset + wg.y;
    let ninf = neg_inf();
    let slot0 = (head * n + i) * SPLITS;
    // M: the largest slice max.
    var mx = ninf;
    for (var s = t; s < SPLITS; s += WG) {
        mx = max(mx, pml[slot0 + s].x);
    }
    red[t] = mx;
    workgroupBarrier();
    for (var w = WG / 2u; w > 0u; w >>= 1u) {
        if (t < w) {
            red[t] = max(red[t], red[t + w]);
        }
        workgroupBarrier();
    }
    mx = red[0];
    workgroupBarrier();
    // L: the slices' sums, each scaled to M.
    var sum = 0.0;
    for (var s = t; s < SPLITS; s += WG) {
        let ml = pml[slot0 + s];
        if (ml.x > ninf) {
            sum += ml.y * exp2(ml.x - mx);
        }
    }
    red[t] = sum;
    workgroupBarrier();
    for (var w = WG / 2u; w > 0u; w >>= 1u) {
        if (t < w) {
            red[t] += red[t + w];
        }
        workgroupBarrier();
    }
    sum = red[0];
    // O: slice lane t / 32 takes every SL-th slice, column quads t % 32 and t % 32 + 32.
    let lane = t / 32u;
    let cq = t % 32u;
    for (var c = cq; c < dq; c += 32u) {
        var a0 = vec4<f32>(0.0);
        var a1 = vec4<f32>(0.0);
        var s = lane;
        for (; s + SL < SPLITS; s += 2u * SL) {
            let m0 = pml[slot0 + s];
            let m1 = pml[slot0 + s + SL];
            let x0 = po[(slot0 + s) * dq + c];
            let x1 = po[(slot0 + s + SL) * dq + c];
            if (m0.x > ninf) {
                a0 += x0 * exp2(m0.x - mx);
            }
            if (m1.x > ninf) {
                a1 += x1 * exp2(m1.x - mx);
            }
        }
        if (s < SPLITS) {
            let m0 = pml[slot0 + s];
            if (m0.x > ninf) {
                a0 += po[(slot0 + s) * dq + c] * exp2(m0.x - mx);
            }
        }
        part[lane * 64u + c] = a0 + a1;
    }
    workgroupBarrier();
    let inv = select(0.0, 1.0 / sum, sum > 0.0);
    let row = (head * n + i) * d;
    for (var c = t; c < dq; c += WG) {
        var a = vec4<f32>(0.0);
        for (var l = 0u; l < SL; l++) {
            a += part[l * 64u + c];
        }
        a *= inv;
        let e = row + 4u * c;
        if (PACK == 2u) {
            o[e / 2u] = pack(a.x, a.y);
            o[e / 2u + 1u] = pack(a.z, a.w);
        } else {
            o[e] = pack(a.x, 0.0);
            o[e + 1u] = pack(a.y, 0.0);
            o[e + 2u] = pack(a.z, 0.0);
            o[e + 3u] = pack(a.w, 0.0);
        }
    }
    if (t == 0u) {
        lse[head * n + i] = select(-neg_inf(), mx + log2(sum), sum > 0.0);
    }
}
