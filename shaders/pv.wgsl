// pv.wgsl — O[h, i, c] = sum_j P[h, i, j] * V[h, j, c]: probabilities times values.
//
// Register-tiled like qk.wgsl: a workgroup of 16 x 16 threads owns a 128-row x 64-column tile of O
// (64 columns cover a whole head of D = 64); each thread accumulates 8 rows x 4 columns. P is staged
// transposed (ps[kk][row]) and V as is (vs[kk][col]), KC keys at a time. Like PyTorch's bmm, this
// kernel does not know about the causal mask: it multiplies the zeros above the diagonal too.
// Grid: x = column tile (c), y = row tile (i), z = head of this dispatch's chunk. P (f32) holds only
// the chunk's heads; V and O are read / written at global head head_offset + z in the storage dtype
// (prelude shaders/dtype_*.wgsl). With PACK = 2 (bf16) each store writes a whole u32 pair of
// neighbouring columns (the host refuses odd D then).
// Grouped-query attention: V (K in dQ = dS·K) is read at the query head's K/V head. With TRANS
// (dV = Pᵀ·dO, dK = dSᵀ·Q of a K/V head) z is a K/V head of the chunk and the products of its
// kv_group query heads are summed: P and X of those heads stacked along the inner dimension.

@group(0) @binding(1) var<storage, read> p: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<st>;
@group(0) @binding(3) var<storage, read_write> o: array<st>;

// Multiply by Pᵀ instead of P (the backward's dV = Pᵀ·dO and dK = dSᵀ·Q).
override TRANS: bool = false;

const TM: u32 = 128u; // rows of O per workgroup
const TN: u32 = 64u;  // columns of O per workgroup
const KC: u32 = 16u;  // keys staged per iteration

var<workgroup> ps: array<array<vec4<f32>, 32>, KC>; // [KC][TM / 4]
var<workgroup> vs: array<array<vec4<f32>, 16>, KC>; // [KC][TN / 4]

@compute @workgroup_size(16, 16, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let m = params.kv_seq;
    let d = params.head_dim;
    // Rows of the output and the inner (summed) dimension: O has N rows over M keys; with TRANS
    // (dV, dK) the output has M rows (keys) over the N query rows.
    let rows_out = select(n, m, TRANS);
    let inner = select(m, n, TRANS);
    let head = wg.z;
    // Query heads summed into this output: the K/V head's group with TRANS, else one.
    let gr = select(1u, params.kv_group, TRANS);
    let i0 = wg.y * TM;
    let c0 = wg.x * TN;

    // 8 rows x 4 columns per thread as named vec4 registers (row ty*8 + r, columns tx*4 .. +3).
    var o0 = vec4<f32>(0.0); var o1 = vec4<f32>(0.0); var o2 = vec4<f32>(0.0); var o3 = vec4<f32>(0.0);
    var o4 = vec4<f32>(0.0); var o5 = vec4<f32>(0.0); var o6 = vec4<f32>(0.0); var o7 = vec4<f32>(0.0);

    for (var r = 0u; r < gr; r++) {
    // The local query head of P, and the global head of the second operand (X = dO or Q with
    // TRANS, else V or K at the K/V head).
    let ph = select(head, head * gr + r, TRANS);
    let xh = select(kv_head(params.head_offset + head), params.head_offset + ph, TRANS);
    for (var j0 = 0u; j0 < inner; j0 += KC) {
        // P[i0.., j0..j0+KC]: 2048 values, 8 per thread, 64-byte runs along j.
        // TRANS: Pᵀ, i.e. P[j0 + kk, i0 + row], read along rows of P (consecutive threads,
        // consecutive i).
        for (var e = li; e < TM * KC; e += 256u) {
            let row = select(e / KC, e % TM, TRANS);
            let kk = select(e % KC, e / TM, TRANS);
            var pv = 0.0;
            if (i0 + row < rows_out && j0 + kk < inner) {
                if (TRANS) {
                    pv = p[(ph * n + j0 + kk) * m + i0 + row];
                } else {
                    pv = p[(ph * n + i0 + row) * m + j0 + kk];
                }
            }
            ps[kk][row / 4u][row % 4u] = pv;
        }
        // V[j0..j0+KC, c0..c0+TN]: 1024 values, 4 per thread, contiguous along c.
        for (var e = li; e < KC * TN; e += 256u) {
            let kk = e / TN;
            let col = e % TN;
            var vv = 0.0;
            if (j0 + kk < inner && c0 + col < d) {
                let e = (xh * inner + j0 + kk) * d + c0 + col;
                vv = load(v[e / PACK], e);
            }
            vs[kk][col / 4u][col % 4u] = vv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < KC; kk++) {
            let a0 = ps[kk][lid.y * 2u];
            let a1 = ps[kk][lid.y * 2u + 1u];
            let b = vs[kk][lid.x];
            o0 += a0.x * b; o1 += a0.y * b; o2 += a0.z * b; o3 += a0.w * b;
            o4 += a1.x * b; o5 += a1.y * b; o6 += a1.z * b; o7 += a1.w * b;
        }
        workgroupBarrier();
    }
    }

    // The global head of the output: the query head, or with TRANS the K/V head (a chunk starts
    // at a whole group).
    let oh = select(params.head_offset + head, params.head_offset / gr + head, TRANS);
    let r0 = i0 + lid.y * 8u;
    let col = c0 + lid.x * 4u;
    store_row(oh, r0, col, o0);
    store_row(oh, r0 + 1u, col, o1);
    store_row(oh, r0 + 2u, col, o2);
    store_row(oh, r0 + 3u, col, o3);
    store_row(oh, r0 + 4u, col, o4);
    store_row(oh, r0 + 5u, col, o5);
    store_row(oh, r0 + 6u, col, o6);
    store_row(oh, r0 + 7u, col, o7);
}

// Writes 4 consecutive outputs of row i of global head `head` from column c (c a multiple of 4),
// skipping what lies outside N x D; PACK outputs per store.
fn store_row(head: u32, i: u32, c: u32, val: vec4<f32>) {
    let n = select(params.seq, params.kv_seq, TRANS);  // rows of the output
    let d = params.head_dim;
    if (i >= n) {
        return;
    }
    let row = (head * n + i) * d;
    for (var k = 0u; k < 4u; k += PACK) {
        if (c + k < d) { o[(row + c + k) / PACK] = pack(val[k], val[min(k + 1u, 3u)]); }
    }
}
