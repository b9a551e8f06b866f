// qk.wgsl — S[h, i, j] = sum_d Q[h, i, d] * K[h, j, d]: the N x N score matrix, materialized.
//
// Register-tiled matrix product: a workgroup of 16 x 16 threads owns a 128 x 128 tile of S; each
// thread accumulates 8 x 8 outputs in registers. Q and K are staged KC columns of D at a time in
// workgroup memory, *transposed* (qs[kk][row]) so that the inner loop reads 4 consecutive rows as one
// vec4: 4 vec4 loads feed 64 multiply-adds.
// Grid: x = column tile (j), y = row tile (i), z = head.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read_write> s: array<f32>;

const TILE: u32 = 128u;  // rows and columns of S per workgroup
const KC: u32 = 16u;     // depth (D) chunk staged per iteration
const TV: u32 = 32u;     // TILE / 4: vec4 slots per staged row

var<workgroup> qs: array<array<vec4<f32>, TV>, KC>;
var<workgroup> ks: array<array<vec4<f32>, TV>, KC>;

@compute @workgroup_size(16, 16, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let d = params.head_dim;
    let head = wg.z;
    let i0 = wg.y * TILE;
    let j0 = wg.x * TILE;
    let base = head * n * d;

    var acc: array<vec4<f32>, 16>; // acc[r * 2 + c]: row ty*8 + r, columns tx*8 + 4c .. +3
    for (var t = 0u; t < 16u; t++) {
        acc[t] = vec4<f32>(0.0);
    }

    for (var d0 = 0u; d0 < d; d0 += KC) {
        // Stage Q[i0.., d0..d0+KC] and K[j0.., d0..d0+KC]: 2048 values each, 8 per thread.
        // Consecutive threads read consecutive d, so each row is one contiguous 64-byte run.
        for (var e = li; e < TILE * KC; e += 256u) {
            let row = e / KC;
            let kk = e % KC;
            let dd = d0 + kk;
            var qv = 0.0;
            var kv = 0.0;
            if (dd < d) {
                if (i0 + row < n) { qv = q[base + (i0 + row) * d + dd]; }
                if (j0 + row < n) { kv = k[base + (j0 + row) * d + dd]; }
            }
            qs[kk][row / 4u][row % 4u] = qv;
            ks[kk][row / 4u][row % 4u] = kv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < KC; kk++) {
            let a0 = qs[kk][lid.y * 2u];
            let a1 = qs[kk][lid.y * 2u + 1u];
            let b0 = ks[kk][lid.x * 2u];
            let b1 = ks[kk][lid.x * 2u + 1u];
            for (var r = 0u; r < 4u; r++) {
                acc[r * 2u] += a0[r] * b0;
                acc[r * 2u + 1u] += a0[r] * b1;
                acc[(r + 4u) * 2u] += a1[r] * b0;
                acc[(r + 4u) * 2u + 1u] += a1[r] * b1;
            }
        }
        // Nobody may overwrite the staged tiles while a neighbour is still reading them.
        workgroupBarrier();
    }

    for (var r = 0u; r < 8u; r++) {
        let i = i0 + lid.y * 8u + r;
        if (i >= n) { break; }
        let row_base = (head * n + i) * n;
        for (var c = 0u; c < 8u; c++) {
            let j = j0 + lid.x * 8u + c;
            if (j < n) {
                s[row_base + j] = acc[r * 2u + c / 4u][c % 4u];
            }
        }
    }
}
