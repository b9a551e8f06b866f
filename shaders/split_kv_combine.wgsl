// split_kv_combine.wgsl — flash-decoding's second pass: one workgroup per (query row, head) merges
// the SPLITS partials of split_kv.wgsl: M = max m_s, L = sum l_s 2^(m_s - M),
// O = sum o_s 2^(m_s - M) / L (0 for a row with no allowed key, SDPA's way), and the row's
// logsumexp L (base 2, +inf for such a row) for the backward (the fused backward of `tiled`).

@group(0) @binding(1) var<storage, read> po: array<f32>;
@group(0) @binding(2) var<storage, read> pml: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<st>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;

override SPLITS: u32 = 1u;
const WG: u32 = 128u;

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = params.head_dim;
    let i = wg.x;
    let head = params.head_offset + wg.y;
    let ninf = neg_inf();
    let slot0 = (wg.y * n + i) * SPLITS;
    var mx = ninf;
    for (var s = 0u; s < SPLITS; s++) {
        mx = max(mx, pml[slot0 + s].x);
    }
    var sum = 0.0;
    for (var s = 0u; s < SPLITS; s++) {
        let ml = pml[slot0 + s];
        if (ml.x > ninf) {
            sum += ml.y * exp2(ml.x - mx);
        }
    }
    let inv = select(0.0, 1.0 / sum, sum > 0.0);
    let row = (head * n + i) * d;
    for (var c = t * PACK; c < d; c += WG * PACK) {
        var a = 0.0;
        var b = 0.0;
        for (var s = 0u; s < SPLITS; s++) {
            let ml = pml[slot0 + s];
            if (ml.x > ninf) {
                let w = exp2(ml.x - mx);
                a += po[(slot0 + s) * d + c] * w;
                if (c + 1u < d) {
                    b += po[(slot0 + s) * d + c + 1u] * w;
                }
            }
        }
        o[(row + c) / PACK] = pack(a * inv, b * inv);
    }
    if (t == 0u) {
        lse[head * n + i] = select(bitcast<f32>(0x7f800000u), mx + log2(sum), sum > 0.0);
    }
}
