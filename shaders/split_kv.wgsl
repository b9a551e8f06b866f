// split_kv.wgsl — flash-decoding's first pass (the `split-kv` variant): for few query rows and
// many keys, one workgroup per (slice of the keys, query row, K/V head) instead of one per block
// of query rows, so that a decode step (N = 1..16) still launches enough workgroups to fill the
// GPU. A workgroup serves every query head of its K/V head's group (grouped-query attention:
// K and V are read once per group, not once per query head) and writes its slice's partials
// (max m, sum l, unnormalized output) to device memory; split_kv_combine.wgsl merges the slices.
//
// Decode is a matrix-vector product: it is bound by how many bytes of K and V are in flight, not
// by arithmetic. So the workgroup's 128 lanes are cut into lane sets of KW lanes (KW = 16, or the
// subgroup size where that is smaller), each holding one query head's share of a key row: WPL
// 16-byte words of it per lane (D / EPW / KW, rounded up). GROUP lane sets (the heads of the
// group) form a key group, which reads UNROLL key rows of K and of V at once (the group's lane
// sets read the same rows: one fetch from memory, the rest from L1), so every lane has
// 2 * UNROLL * WPL 16-byte loads in flight. A lane set's dot products are summed over its KW
// lanes by xor shuffles (no workgroup memory, no barrier), and each lane set keeps the online
// softmax of its head (m, l and its output columns) over the keys kg, kg + NG, kg + 2 NG, ... of
// its blocks (NG key groups). Only at the end do the key groups merge, through workgroup memory,
// into the slice's partial.
//
// Every loop below has a trip count fixed by the overrides and a small body, so that the driver
// unrolls them and keeps the arrays in registers (an array indexed at run time lives in memory).
//
// Lanes of a lane set are KW consecutive subgroup lanes; lane sets are counted across subgroups
// (subgroup_id), so any subgroup size that is a multiple of KW works.

@group(0) @binding(1) var<storage, read> q: array<st>;
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;   // 16-byte words
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;   // 16-byte words
@group(0) @binding(4) var<storage, read_write> po: array<f32>;        // [heads, N, SPLITS, D]
@group(0) @binding(5) var<storage, read_write> pml: array<vec2<f32>>; // [heads, N, SPLITS]: (m, l)

// Set by the host (kernels/split_kv.rs `Layout`): key slices per query row;
// query heads per K/V head (GROUP * KW <= 128); lanes per key row (8 or 16, at most the subgroup
// size); 16-byte words per lane; key rows in flight per key group (UNROLL * WPL <= LMAX).
override SPLITS: u32 = 1u;
override GROUP: u32 = 1u;
override KW: u32 = 16u;
override WPL: u32 = 1u;
override UNROLL: u32 = 4u;
const WG: u32 = 128u;
const LMAX: u32 = 16u;     // words of K (and of V) in flight per lane
const AMAX: u32 = 8u;      // WPL * EPW / 4 <= AMAX vec4 of a head's query row and output per lane
const HW: u32 = EPW / 4u;  // vec4 halves per 16-byte word: 1 (f32) or 2 (f16, bf16)
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> sml: array<vec2<f32>, 16>;  // [lane set]: its (m, l)
var<workgroup> sacc: array<f32, 4096>;     // [lane set][D]: its weighted output

@compute @workgroup_size(128, 1, 1)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) sg_lane: u32,
) {
    let n = params.seq;
    let nk = params.kv_seq;
    let d = params.head_dim;
    let sets = WG / KW;
    let ng = sets / GROUP;                            // key groups
    let ls = sg_id * (sg_size / KW) + sg_lane / KW;   // lane set
    let g = ls % GROUP;                               // its query head in the group
    let kg = ls / GROUP;                              // its key group
    let idle = kg >= ng;  // lane sets left over when GROUP does not divide 128 / KW
    let lane = sg_lane % KW;
    let split = wg.x;
    let i = wg.y;
    // K/V head: global (Q, the mask, dropout, the partials), and local to the range of K and V
    // this dispatch binds (its first head is head_offset / GROUP; kv_chunks in split_kv.rs).
    let kvh = params.head_offset / GROUP + wg.z;
    let head = kvh * GROUP + g;
    let lkv = wg.z;
    let wpr = d / EPW;          // 16-byte words per K/V row
    let ninf = neg_inf();
    let qscale = params.scale * LOG2E;

    // This lane's words of its head's query row (scaled, base 2), in registers.
    var qv: array<vec4<f32>, AMAX>;
    for (var w = 0u; w < WPL; w++) {
        for (var h = 0u; h < HW; h++) {
            let cw = lane + w * KW;
            var x = vec4<f32>(0.0);
            if (cw < wpr) {
                let e = (head * n + i) * d + cw * EPW + h * 4u;
                x = vec4<f32>(load(q[e / PACK], e), load(q[(e + 1u) / PACK], e + 1u),
                              load(q[(e + 2u) / PACK], e + 2u), load(q[(e + 3u) / PACK], e + 3u));
            }
            qv[w * HW + h] = x * qscale;
        }
    }

    // The row's keys, cut at its causal diagonal (the same for the whole group), in blocks of
    // `stepk` (a workgroup step); this slice takes blocks split, split + SPLITS, ... so that the
    // workgroups of a K/V head read neighbouring blocks at any moment (on the H200 this measured
    // the same as contiguous slices: results/EXPERIMENTS.md, v25-decode-ab).
    let j_end = causal_keys(i + 1u);
    let stepk = ng * UNROLL;
    var mrow = ninf;  // running max and sum of the head (equal on the KW lanes)
    var lrow = 0.0;
    var acc: array<vec4<f32>, AMAX>;  // [w][h]: this lane's output columns
    for (var e = 0u; e < AMAX; e++) {
        acc[e] = vec4<f32>(0.0);
    }
    // Every lane runs the same number of steps (the shuffles need the whole subgroup); keys past
    // the row's last are masked.
    for (var blk = split; blk * stepk < j_end; blk += SPLITS) {
        let base = blk * stepk;
        var kw: array<vec4<u32>, LMAX>;
        var vw: array<vec4<u32>, LMAX>;
        for (var u = 0u; u < UNROLL; u++) {
            // A key past the row's last reads the last (in bounds), then is masked.
            let row = (lkv * nk + min(base + kg + u * ng, j_end - 1u)) * wpr;
            for (var w = 0u; w < WPL; w++) {
                let cw = min(lane + w * KW, wpr - 1u);
                kw[u * WPL + w] = k[row + cw];
                vw[u * WPL + w] = v[row + cw];
            }
        }
        var s: array<f32, LMAX>;
        for (var u = 0u; u < UNROLL; u++) {
            var part = 0.0;
            for (var w = 0u; w < WPL; w++) {
                for (var h = 0u; h < HW; h++) {
                    part += dot(qv[w * HW + h], word4(kw[u * WPL + w], h));
                }
            }
            // Words past the row (D not a multiple of KW words) were loaded clamped; their query
            // words are 0, so they add nothing.
            s[u] = part;
        }
        for (var o = 1u; o < KW; o <<= 1u) {
            for (var u = 0u; u < UNROLL; u++) {
                s[u] += subgroupShuffleXor(s[u], o);
            }
        }
        var mb = ninf;
        for (var u = 0u; u < UNROLL; u++) {
            let j = base + kg + u * ng;
            var x = s[u];
            if (HAS_MASK) {
                x += mask_bias(head, i, min(j, j_end - 1u)) * LOG2E;
            }
            x = select(ninf, x, j < j_end && !idle);
            s[u] = x;
            mb = max(mb, x);
        }
        let m_new = max(mrow, mb);
        let live = m_new > ninf;  // false before the head's first allowed key
        let a = select(1.0, exp2(mrow - m_new), live);
        var sum = 0.0;
        for (var e = 0u; e < WPL * HW; e++) {
            acc[e] *= a;
        }
        for (var u = 0u; u < UNROLL; u++) {
            let p = select(0.0, exp2(s[u] - m_new), live);
            sum += p;
            var pz = p;
            if (DROPOUT) {
                pz = p * drop1(head, i, min(base + kg + u * ng, j_end - 1u));
            }
            for (var w = 0u; w < WPL; w++) {
                for (var h = 0u; h < HW; h++) {
                    acc[w * HW + h] += pz * word4(vw[u * WPL + w], h);
                }
            }
        }
        lrow = lrow * a + sum;
        mrow = m_new;
    }

    // Merge the key groups, per head: the head's max M over them, each one's weight 2^(m - M),
    // the weighted sums of their outputs and row sums.
    if (lane == 0u) {
        sml[ls] = vec2<f32>(mrow, lrow);
    }
    workgroupBarrier();
    var mx = ninf;
    for (var c = 0u; c < ng; c++) {
        mx = max(mx, sml[c * GROUP + g].x);
    }
    let wk = select(0.0, exp2(mrow - mx), mrow > ninf);
    for (var w = 0u; w < WPL; w++) {
        let cw = lane + w * KW;
        if (cw < wpr) {
            for (var h = 0u; h < HW; h++) {
                let x = acc[w * HW + h] * wk;
                let at = ls * d + cw * EPW + h * 4u;
                sacc[at] = x.x; sacc[at + 1u] = x.y; sacc[at + 2u] = x.z; sacc[at + 3u] = x.w;
            }
        }
    }
    workgroupBarrier();
    let g0 = kvh * GROUP;
    write_partials(t, d, ng, g0, n, i, split);
}
