// qk.wgsl — S[h, i, j] = sum_d Q[h, i, d] * K[h, j, d]: the N x N score matrix, materialized.
//
// Register-tiled matrix product: a workgroup of 16 x 16 threads owns a 128 x 128 tile of S; each
// thread accumulates 8 x 8 outputs in registers. Q and K are staged KC columns of D at a time in
// workgroup memory, *transposed* (qs[kk][row]) so that the inner loop reads 4 consecutive rows as one
// vec4: 4 vec4 loads feed 64 multiply-adds.
// Grid: x = column tile (j), y = row tile (i), z = head of this dispatch's chunk. Q and K are read
// at global head head_offset + z in the storage dtype (prelude shaders/dtype_*.wgsl, widened to
// f32); S holds only this chunk's heads, in f32.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<st>;
// S seen as vec4s (the runner pads buffers to 16 bytes): rows start on a vec4 when N % 4 == 0, and
// then each thread writes its 8 columns of a row as two 16-byte stores.
@group(0) @binding(3) var<storage, read_write> s: array<vec4<f32>>;

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
    let m = params.kv_seq;
    let d = params.head_dim;
    let head = wg.z;
    let i0 = wg.y * TILE;
    let j0 = wg.x * TILE;
    let base = (params.head_offset + head) * n * d;
    // K (the second operand: K, V or Ks; M rows) at the head's K/V head (grouped-query attention).
    let kbase = kv_head(params.head_offset + head) * m * d;

    // 8 x 8 outputs per thread as 16 named vec4 registers: c<r><h> holds row ty*8 + r, columns
    // tx*8 + 4h .. +3. Named variables rather than an indexed array, so that no driver is tempted to
    // put them in (slow, off-chip) local memory.
    var c00 = vec4<f32>(0.0); var c01 = vec4<f32>(0.0); var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
    var c20 = vec4<f32>(0.0); var c21 = vec4<f32>(0.0); var c30 = vec4<f32>(0.0); var c31 = vec4<f32>(0.0);
    var c40 = vec4<f32>(0.0); var c41 = vec4<f32>(0.0); var c50 = vec4<f32>(0.0); var c51 = vec4<f32>(0.0);
    var c60 = vec4<f32>(0.0); var c61 = vec4<f32>(0.0); var c70 = vec4<f32>(0.0); var c71 = vec4<f32>(0.0);

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
                if (i0 + row < n) { let e = base + (i0 + row) * d + dd; qv = load(q[e / PACK], e); }
                if (j0 + row < m) { let e = kbase + (j0 + row) * d + dd; kv = load(k[e / PACK], e); }
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
            c00 += a0.x * b0; c01 += a0.x * b1;
            c10 += a0.y * b0; c11 += a0.y * b1;
            c20 += a0.z * b0; c21 += a0.z * b1;
            c30 += a0.w * b0; c31 += a0.w * b1;
            c40 += a1.x * b0; c41 += a1.x * b1;
            c50 += a1.y * b0; c51 += a1.y * b1;
            c60 += a1.z * b0; c61 += a1.z * b1;
            c70 += a1.w * b0; c71 += a1.w * b1;
        }
        // Nobody may overwrite the staged tiles while a neighbour is still reading them.
        workgroupBarrier();
    }

    let r0 = i0 + lid.y * 8u;
    let col = j0 + lid.x * 8u;
    store_row(head, r0, col, c00, c01);
    store_row(head, r0 + 1u, col, c10, c11);
    store_row(head, r0 + 2u, col, c20, c21);
    store_row(head, r0 + 3u, col, c30, c31);
    store_row(head, r0 + 4u, col, c40, c41);
    store_row(head, r0 + 5u, col, c50, c51);
    store_row(head, r0 + 6u, col, c60, c61);
    store_row(head, r0 + 7u, col, c70, c71);
}

// Writes 8 consecutive scores of row i from column j, skipping what lies outside N x M.
fn store_row(head: u32, i: u32, j: u32, lo: vec4<f32>, hi: vec4<f32>) {
    let n = params.seq;
    let m = params.kv_seq;
    if (i >= n || j >= m) {
        return;
    }
    let base = (head * n + i) * m;
    if ((m & 3u) == 0u) {
        // j is a multiple of 8 and M of 4: j + 4 <= M, and both halves are whole aligned vec4s.
        s[(base + j) / 4u] = lo;
        if (j + 4u < m) {
            s[(base + j) / 4u + 1u] = hi;
        }
        return;
    }
    for (var c = 0u; c < 4u; c++) {
        let e0 = base + j + c;
        let e1 = e0 + 4u;
        if (j + c < m) { s[e0 / 4u][e0 % 4u] = lo[c]; }
        if (j + 4u + c < m) { s[e1 / 4u][e1 % 4u] = hi[c]; }
    }
}
