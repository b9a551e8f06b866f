// tiled_store.wgsl — the O stores of the register-tiled kernels (appended to tiled_v2.wgsl,
// tiled_v3.wgsl and tiled_rt.wgsl, which bind O as `o: array<st>`).

// Columns col .. col + 3 of the O row starting at element `row`, skipping what lies past D; PACK
// neighbouring elements per store (D is even when PACK = 2, so pairs never leave the row).
fn store_vec(row: u32, col: u32, d: u32, x: vec4<f32>) {
    for (var c = 0u; c < 4u; c += PACK) {
        if (col + c < d) {
            let e = row + col + c;
            o[e / PACK] = pack(x[c], x[min(c + 1u, 3u)]);
        }
    }
}
