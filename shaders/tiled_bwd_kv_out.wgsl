// tiled_bwd_kv_out.wgsl — the dK/dV kernels' hand-offs (appended to tiled_bwd_kv.wgsl and
// tiled_bwd_wide_kv.wgsl): P and dS into workgroup memory, a row of dK and dV to device memory.

// P and dS of row `row` with keys tc and tc + BT / 2 into the [row][key/4] tiles.
fn put(row: u32, tc: u32, p: vec2<f32>, ds: vec2<f32>) {
    let a = row * (BT / 4u) + tc / 4u;
    let b = row * (BT / 4u) + (tc + BT / 2u) / 4u;
    ps[a][tc % 4u] = p.x;
    ps[b][(tc + BT / 2u) % 4u] = p.y;
    dss[a][tc % 4u] = ds.x;
    dss[b][(tc + BT / 2u) % 4u] = ds.y;
}

// Row j of dK and dV (of the n = M keys of K/V head `head`).
fn store_kv(head: u32, j: u32, c4: u32, n: u32, d: u32, a: vec4<f32>, b: vec4<f32>) {
    if (j >= n) {
        return;
    }
    let e0 = grad_index(head, j, c4, n, d);
    for (var c = 0u; c < 4u; c += PACK) {
        if (4u * c4 + c < d) {
            dk[(e0 + c) / PACK] = pack(a[c], a[min(c + 1u, 3u)]);
            dv[(e0 + c) / PACK] = pack(b[c], b[min(c + 1u, 3u)]);
        }
    }
}
