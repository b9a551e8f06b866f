// dropout.wgsl — dropout on the probabilities as its own dispatch (the `unfused*` and `math`
// plans, as PyTorch's naive code and math backend run `F.dropout(attn, p)`): every probability
// multiplied by its factor, 0 or 1 / (1 - p), from philox.wgsl (src/dropout.rs: the keep mask).
// The backward is the same multiplication applied to dP in place (`in_place`).
//
// Thread -> (local head, row quad i4, key j), j fastest: one Philox call gives the factors of
// rows 4 i4 .. 4 i4 + 3 at key j; consecutive threads touch consecutive keys of those rows.
// The buffers hold this dispatch's chunk of heads; the counter takes the global head.

@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;

// The element of thread `idx` and its 4 rows' factors; `ok` is false past the end.
struct Quad {
    base: u32,   // flat index of (head, 4 i4, j)
    rows: u32,   // rows of the quad inside N (4, or fewer at the bottom)
    f: vec4<f32>,
    ok: bool,
}

fn quad(wg: vec3<u32>, nwg: vec3<u32>, li: u32) -> Quad {
    let n = params.seq;
    let m = params.kv_seq;
    let n4 = (n + 3u) / 4u;
    let idx = linear_group(wg, nwg) * 256u + li;
    var out: Quad;
    out.ok = idx < params.heads * n4 * m;
    if (!out.ok) {
        return out;
    }
    let j = idx % m;
    let i4 = (idx / m) % n4;
    let h = idx / (m * n4);
    out.base = (h * n + 4u * i4) * m + j;
    out.rows = min(4u, n - 4u * i4);
    out.f = drop4(params.head_offset + h, i4, j);
    return out;
}

// dst = src ∘ factor (out of place: the forward, src = P saved for softmax's backward).
@compute @workgroup_size(256, 1, 1)
fn copy(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let x = quad(wg, nwg, li);
    if (x.ok) {
        for (var r = 0u; r < x.rows; r++) {
            let e = x.base + r * params.kv_seq;
            dst[e] = src[e] * x.f[r];
        }
    }
}

// dst ∘= factor, in place (the inference forward of `unfused-inplace`, and the backward on dP).
@compute @workgroup_size(256, 1, 1)
fn in_place(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let x = quad(wg, nwg, li);
    if (x.ok) {
        for (var r = 0u; r < x.rows; r++) {
            let e = x.base + r * params.kv_seq;
            dst[e] = dst[e] * x.f[r];
        }
    }
}
