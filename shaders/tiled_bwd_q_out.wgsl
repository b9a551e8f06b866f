// tiled_bwd_q_out.wgsl — a row of dQ to device memory (appended to tiled_bwd_q.wgsl and
// tiled_bwd_wide_q.wgsl).

// Columns 4 c4 .. +3 of row i of dQ.
fn store_q(head: u32, i: u32, c4: u32, n: u32, d: u32, a: vec4<f32>) {
    if (i >= n) {
        return;
    }
    let e0 = grad_index(head, i, c4, n, d);
    for (var c = 0u; c < 4u; c += PACK) {
        if (4u * c4 + c < d) {
            dq[(e0 + c) / PACK] = pack(a[c], a[min(c + 1u, 3u)]);
        }
    }
}
