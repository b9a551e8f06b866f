// tiled_bwd_kv_dq.wgsl — dQ inside the dK/dV pass (`--bwd-dq atomic`; appended to
// tiled_bwd_kv.wgsl instead of tiled_bwd_kv_nodq.wgsl): after phase B the block's dS (`dss`,
// [row][key/4], the scale included) times the workgroup's K (`ks`, [key][d/4], staged once) is
// added into an f32 dQ accumulator [BH][N][D] with float atomics (WGSL `atomic<f32>`: wgpu's
// SHADER_FLOAT32_ATOMIC), FlashAttention-2's one pass: no dQ pass recomputes S and dP, five
// products instead of seven. Thread t: rows 4(t/16) .. +3 at column vec4 t % 16 (and + 16 where
// D4 > 16). No barrier is added: dS and K are only read, and the next block's first barrier
// waits for them. The accumulator is cleared before the pass (`dq_zero`,
// tiled_bwd_dq_zero.wgsl) and rounded to the storage dtype after it (`dq_out`: `math`'s
// `to_dtype`, narrow.wgsl). The additions' order varies from run to run, so dQ is not bitwise
// deterministic.

@group(0) @binding(9) var<storage, read_write> dq_acc: array<atomic<f32>>;

// dQ of rows i0 + 4(t/16) .. +3 of head `head` += dS · K over the workgroup's BT keys.
fn add_dq(head: u32, i0: u32, t: u32, n: u32, d: u32) {
    let r0 = 4u * (t / 16u);
    for (var c4 = t % 16u; c4 < D4 && 4u * c4 < d; c4 += 16u) {
        var q0 = vec4<f32>(0.0); var q1 = vec4<f32>(0.0);
        var q2 = vec4<f32>(0.0); var q3 = vec4<f32>(0.0);
        for (var j4 = 0u; j4 < BT / 4u; j4++) {
            let k0 = wide(ks[(4u * j4) * RS + c4]);
            let k1 = wide(ks[(4u * j4 + 1u) * RS + c4]);
            let k2 = wide(ks[(4u * j4 + 2u) * RS + c4]);
            let k3 = wide(ks[(4u * j4 + 3u) * RS + c4]);
            let s0 = dss[r0 * 8u + j4];
            let s1 = dss[(r0 + 1u) * 8u + j4];
            let s2 = dss[(r0 + 2u) * 8u + j4];
            let s3 = dss[(r0 + 3u) * 8u + j4];
            q0 += s0.x * k0 + s0.y * k1 + s0.z * k2 + s0.w * k3;
            q1 += s1.x * k0 + s1.y * k1 + s1.z * k2 + s1.w * k3;
            q2 += s2.x * k0 + s2.y * k1 + s2.z * k2 + s2.w * k3;
            q3 += s3.x * k0 + s3.y * k1 + s3.z * k2 + s3.w * k3;
        }
        add_dq_row(head, i0 + r0, c4, n, d, q0);
        add_dq_row(head, i0 + r0 + 1u, c4, n, d, q1);
        add_dq_row(head, i0 + r0 + 2u, c4, n, d, q2);
        add_dq_row(head, i0 + r0 + 3u, c4, n, d, q3);
    }
}

// Columns 4 c4 .. +3 of row i of dQ += a (nothing past N or D).
fn add_dq_row(head: u32, i: u32, c4: u32, n: u32, d: u32, a: vec4<f32>) {
    if (i >= n) {
        return;
    }
    let e0 = grad_index(head, i, c4, n, d);
    for (var c = 0u; c < 4u; c++) {
        if (4u * c4 + c < d) {
            atomicAdd(&dq_acc[e0 + c], a[c]);
        }
    }
}
