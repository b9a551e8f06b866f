// tiled_bwd_chunk_q.wgsl — the dQ kernel of tiled_bwd_q.wgsl with the head dimension walked in NCH
// chunks of D4 vec4 (the tile files and the reason: tiled_bwd_chunk_kv.wgsl). A workgroup of 128
// threads owns 32 query rows of one head and walks the key blocks they see. Per key block:
//   phase A, chunk by chunk: stage Q, dO (the workgroup's rows) and K, V (the block's keys) of the
//     chunk and add its dot products to S and dP (`dots`); dS (`finish`) into workgroup memory;
//   phase B, the last chunk first (its K still staged), then the others (K re-staged):
//     dQ += dS·K for the chunk's columns (thread t: rows 4(t/16) .. +3, chunk column vec4
//     t % 16; threads past D4 compute a copy and store nothing), into the chunk's named
//     accumulators.
// 2 NCH + 1 + 2 (NCH - 1) barriers a key block; no register prefetch. Q and dO are staged again
// for every key block. Workgroup storage: qs, gs, ks, vs 4 x 32 x (D4 + 1) sv, dst 4 KiB, lse_s,
// dl_s 256 B: 39168 bytes for D4 = 16 in f32, 22784 for D4 = 8, 21760 for D4 = 16 in 16 bits.

// Bindings 1-6 (Q, K, V, dO, L, D): tiled_bwd_lib.wgsl.
@group(0) @binding(7) var<storage, read_write> dq: array<st>;

var<workgroup> dst: array<vec4<f32>, 256>;  // [key][row/4]: 32 x 8

// dQ of this thread's 4 rows at one chunk column vec4.
struct Grad4 {
    q0: vec4<f32>, q1: vec4<f32>, q2: vec4<f32>, q3: vec4<f32>,
}

// Phase B over the 32 staged keys: dQ += dS·K at chunk column vec4 c4.
fn phase_b(a: Grad4, tr: u32, c4: u32) -> Grad4 {
    var x = a;
    for (var j = 0u; j < BT; j++) {
        let s4 = dst[j * 8u + tr];
        let kr = wide(ks[j * RS + c4]);
        x.q0 += s4.x * kr; x.q1 += s4.y * kr; x.q2 += s4.z * kr; x.q3 += s4.w * kr;
    }
    return x;
}

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = params.seq;
    let d = head_dim();
    let head = params.head_offset + wg.y;
    let i0 = wg.x * BT;
    let tr = t / 16u;
    let tc = t % 16u;
    let tcc = min(tc, D4 - 1u);
    stage_stats(head, i0, t, n);
    var c0 = Grad4();  // chunk 0's columns
    var c1 = Grad4();  // chunk 1's
    var c2 = Grad4();  // chunk 2's (NCH = 4)
    var c3 = Grad4();  // chunk 3's (NCH = 4)
    let end = causal_keys(i0 + BT);
    for (var j0 = 0u; j0 < end; j0 += BT) {
        var acc = Dots();
        for (var ch = 0u; ch < NCH; ch++) {
            // The previous chunk's (or block's) staged tiles and dS are consumed.
            workgroupBarrier();
            stage_chunk(true, true, head, i0, t, n, d, ch);
            stage_chunk(false, true, head, j0, t, n, d, ch);
            workgroupBarrier();
            acc = dots(acc, t, D4);
        }
        let tile = finish(acc, head, i0, j0, t, n);
        dst[tc * 8u + tr] = vec4<f32>(tile.ds0.x, tile.ds1.x, tile.ds2.x, tile.ds3.x);
        dst[(tc + 16u) * 8u + tr] = vec4<f32>(tile.ds0.y, tile.ds1.y, tile.ds2.y, tile.ds3.y);
        workgroupBarrier();
        // Phase B: the last chunk first (K still staged), then the others, K re-staged.
        for (var b = 0u; b < NCH; b++) {
            let ch = NCH - 1u - b;
            if (b > 0u) {
                workgroupBarrier();
                stage_chunk(false, false, head, j0, t, n, d, ch);
                workgroupBarrier();
            }
            if (ch == 0u) {
                c0 = phase_b(c0, tr, tcc);
            } else if (ch == 1u) {
                c1 = phase_b(c1, tr, tcc);
            } else if (NCH > 2u && ch == 2u) {
                c2 = phase_b(c2, tr, tcc);
            } else if (NCH > 3u) {
                c3 = phase_b(c3, tr, tcc);
            }
        }
    }
    if (tc < D4) {
        let i = i0 + 4u * tr;
        store4(head, i, tc, n, d, c0);
        store4(head, i, tc + D4, n, d, c1);
        if (NCH > 2u) {
            store4(head, i, tc + 2u * D4, n, d, c2);
            store4(head, i, tc + 3u * D4, n, d, c3);
        }
    }
}

// dQ of this thread's 4 rows from row i at column vec4 c4 (of the whole row).
fn store4(head: u32, i: u32, c4: u32, n: u32, d: u32, x: Grad4) {
    store_q(head, i, c4, n, d, x.q0);
    store_q(head, i + 1u, c4, n, d, x.q1);
    store_q(head, i + 2u, c4, n, d, x.q2);
    store_q(head, i + 3u, c4, n, d, x.q3);
}
