// tiled_coop_vk_bwd.comp — `tiled-coop-vk`'s backward: FlashAttention-2's two fused backward
// passes on cooperative matrices with P and dS in registers (src/kernels/tiled_coop_vk.rs). GLSL
// compiled to SPIR-V by build.rs, twice: KV = 1 is `bwd_kv` (dK, dV), KV = 0 is `bwd_q` (dQ). Both
// follow `bwd_dot` (tiled_bwd_dot.wgsl: D = rowsum(dO ∘ O)) and recompute P = exp2(S - L) from Q,
// K and the forward's row logsumexp L (base 2; +inf for a row with no allowed key). f16 (or with
// BF16 = 1 bf16: coop_vk_common.glsl's ELEM) in device memory, f32 accumulators, P and dS rounded
// to one element of the storage dtype each before their products (as FlashAttention-2 rounds
// them). A mask bias where the problem has one (MASK); dropout with the
// forward's factors Z (coop_vk_common.glsl): dV += (P ∘ Z)ᵀ dO, dS = P ∘ (dP ∘ Z - D).
//
// Where tiled_coop_bwd_{kv,q}.wgsl must store every Sᵀ / dPᵀ tile to workgroup memory to reach its
// elements and every P / dS tile back to feed the next product (WGSL's cooperative matrices have
// no element access), here an accumulator element is an A operand element (A_OF in
// coop_layout.glsl, the identity on the H200): P and dS are made element for element in
// registers. Workgroup memory holds only the staged blocks.
//
// D = 64, 128 or 256 (HEAD_D), in DC = D / 16 column tiles; staged blocks of B = BLOCK rows or
// keys (NB = B / 16 tiles of 16), prefetched a block ahead into registers where PREFETCH = 1; at
// D = 256 the gradients' columns in two halves, one a workgroup, with the A matrices loaded at
// each use (SPLIT = 2, HOLD = 0; src/kernels/tiled_coop_vk_shapes.rs: the builds).
//
// bwd_kv: a workgroup of four 32-wide subgroups owns 64 keys of one K/V head; subgroup s owns keys
// 16s .. 16s + 15, holds their K and V as DC A matrices each and dK, dV as DC accumulators each,
// and walks the query blocks of B rows that see them (from the diagonal when causal), for each
// query head of the K/V head's group in turn. Per block (Q and dO staged with the rows' L and D),
// per 16-row tile nt:
//   Sᵀ = K Qᵀ, dPᵀ = V dOᵀ (16 keys x 16 rows); Pᵀ = exp2(Sᵀ scale log2 e - L) (0 where masked),
//   (P ∘ Z)ᵀ and dSᵀ = Pᵀ ∘ (dPᵀ ∘ Z - D) scale to f16 A matrices; dV += (P ∘ Z)ᵀ dO; dK += dSᵀ Q.
// bwd_q: a workgroup owns 64 query rows of one head (16 a subgroup; their Q and dO as DC A
// matrices each, dQ as DC accumulators, L and D of the lane's two rows in registers) and walks
// the key blocks of B up to the diagonal (K and V staged as in the forward). Per 16-key tile nt:
//   S = Q Kᵀ, dP = dO Vᵀ; P = exp2(S scale log2 e - L), dS = P ∘ (dP - D) scale to an f16 A
//   matrix; dQ += dS K.
// Workgroup storage: bwd_kv Q and dO 2 x B x (D + 8) f16 + L and D 2 x B f32 (18944 bytes at D =
// B = 64, 17664 at D = 128 with B = 32); bwd_q K and V 2 x B x (D + 8) f16 (18432, 17408).
// Registers a lane in bwd_kv: K and V 4 DC, dK and dV 16 DC, the prefetch B D / 32: at D = 128 the
// first two take 192, which is why that build stages blocks of 32.
#version 450
#extension GL_GOOGLE_include_directive : require

// Defined by build.rs: KV (1: bwd_kv, 0: bwd_q); HEAD_D, BLOCK (B), PREFETCH; SPLIT (1 or 2):
// the gradients' columns in SPLIT parts, one a workgroup (gl_WorkGroupID.z), each recomputing S
// and dP over all of D; HOLD (1 or 0): a subgroup's K and V (bwd_kv) or Q and dO (bwd_q) held as
// A matrices in registers, or loaded from device memory at each use (D = 256: holding them and
// the gradients would take 384 registers a lane); BF16, MASK, MASK_BINDING and EMULATE_COOPMAT as
// for the forward.
#include "coop_vk_common.glsl"

layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;

// kernels/tiled_bwd.rs `bindings`: Q, K, V, dO, L, D, then the gradients.
layout(set = 0, binding = 1, std430) readonly buffer QBuf { ELEM4 q4[]; };
layout(set = 0, binding = 2, std430) readonly buffer KBuf { ELEM4 k4[]; };
layout(set = 0, binding = 3, std430) readonly buffer VBuf { ELEM4 v4[]; };
layout(set = 0, binding = 4, std430) readonly buffer GBuf { ELEM4 g4[]; };  // dO
layout(set = 0, binding = 5, std430) readonly buffer LBuf { float lse[]; };
layout(set = 0, binding = 6, std430) readonly buffer DBuf { float delta[]; };
#if KV
layout(set = 0, binding = 7, std430) buffer DkBuf { ELEM2 dk2[]; };
layout(set = 0, binding = 8, std430) buffer DvBuf { ELEM2 dv2[]; };
#else
layout(set = 0, binding = 7, std430) buffer DqBuf { ELEM2 dq2[]; };
#endif

const uint B = BLOCK;             // rows (bwd_kv) or keys (bwd_q) a staged block
const uint NB = B / 16;           // 16-row (16-key) tiles a block
const uint DC = D / 16;           // column tiles of D
const uint OC = DC / SPLIT;       // column tiles of the gradients a workgroup writes
const uint LOADS = B * D4 / 128;  // ELEM4 of each staged tensor an invocation moves a block: 8 at B = D = 64

// bwd_kv: Q and dO of a block of rows; bwd_q: K and V of a block of keys. [row][KP4].
shared ELEM4 xs[B * KP4];
shared ELEM4 ys[B * KP4];
#if KV
shared float ls[B];  // L of the block's rows (+inf past N)
shared float ds[B];  // D of the block's rows (0 past N)
#endif

// Stores elements i and i + 1 of an accumulator (two adjacent columns of one row: the layout's
// pairs) at element `at` of an ELEM2 buffer, in the storage dtype.
#define STORE_PAIR(BUF, at, acc, i) BUF[(at) / 2u] = TO_ELEM2((acc)[i], (acc)[(i) + 1u])

void main() {
    const uint t = gl_LocalInvocationIndex;
    const uint sg = SUBGROUP;
    const uint n = params.seq;
    const uint nk = params.kv_seq;
    const bool causal = params.causal != 0u;
    const int off = params.causal_off;  // row i sees keys j <= i + off
    const float ninf = uintBitsToFloat(params.neg_inf_bits);
    const float qscale = params.scale * LOG2E;
    const float scale = params.scale;

#if KV
    // wg.y is a K/V head; its kv_group query heads are walked in turn into the same accumulators.
    const uint kvh = params.head_offset / params.kv_group + gl_WorkGroupID.y;
    const uint j0 = gl_WorkGroupID.x * 64u;  // the workgroup's first key
    const uint js = j0 + 16u * sg;         // this subgroup's first key
    const uint kvb = kvh * nk * D4;        // this head's K/V, in ELEM4

    const uint c0 = gl_WorkGroupID.z * OC;  // the gradients' first column tile here

    // This subgroup's 16 keys of K and V as A matrices, straight from device memory (K and V are
    // padded by 128 rows past the last head; keys past M are masked): held (HOLD) or loaded at
    // each use.
#if HOLD
    MATA ka[DC];
    MATA va[DC];
    [[unroll]] for (uint c = 0; c < DC; c++) {
        coopMatLoad(ka[c], k4, kvb + js * D4 + 4u * c, D4, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(va[c], v4, kvb + js * D4 + 4u * c, D4, gl_CooperativeMatrixLayoutRowMajor);
    }
#endif
    ACC dk[OC];
    ACC dv[OC];
    [[unroll]] for (uint c = 0; c < OC; c++) {
        dk[c] = ACC_ZERO;
        dv[c] = ACC_ZERO;
    }

    // Causal: the first block of rows that sees key j0 (row i sees keys up to i + off).
    uint first = 0u;
    if (causal) {
        first = uint(clamp(int(j0) - off, 0, int(n))) / B * B;
    }
    for (uint r = 0; r < params.kv_group; r++) {
        const uint head = kvh * params.kv_group + r;
        const uint qb = head * n * D4;  // this head's Q and dO, in ELEM4 (padded like Q)
        // The first block into registers (with PREFETCH; else each block as it is staged);
        // invocations 0 .. B - 1 also carry a row's L and D.
        ELEM4 pq[LOADS];
        ELEM4 pg[LOADS];
        float pl = uintBitsToFloat(0x7f800000u);
        float pd = 0.0;
#if PREFETCH
        FETCH_BLOCK(pq, pg, q4, g4, qb, first)
        if (t < B && first + t < n) {
            pl = lse[head * n + first + t];
            pd = delta[head * n + first + t];
        }
#endif
        for (uint i0 = first; i0 < n; i0 += B) {
            // 1. Stage this block of rows; with PREFETCH, load the next one into registers.
            barrier();
#if !PREFETCH
            FETCH_BLOCK(pq, pg, q4, g4, qb, i0)
            pl = uintBitsToFloat(0x7f800000u);
            pd = 0.0;
            if (t < B && i0 + t < n) {
                pl = lse[head * n + i0 + t];
                pd = delta[head * n + i0 + t];
            }
#endif
            STAGE_BLOCK(xs, ys, pq, pg)
            if (t < B) {
                ls[t] = pl;
                ds[t] = pd;
            }
            barrier();
#if PREFETCH
            if (i0 + B < n) {
                FETCH_BLOCK(pq, pg, q4, g4, qb, i0 + B)
                pl = uintBitsToFloat(0x7f800000u);
                pd = 0.0;
                if (t < B && i0 + B + t < n) {
                    pl = lse[head * n + i0 + B + t];
                    pd = delta[head * n + i0 + B + t];
                }
            }
#endif
            // No row of the block sees this subgroup's keys: skip it.
            SKIP_BLOCK_IF(causal && int(i0 + B - 1u) + off < int(js));
            // Masks needed: keys past M, rows past N, or the block crosses the diagonal.
            const bool edge = MASK != 0 || js + 16u > nk || i0 + B > n
                || (causal && int(js + 15u) > int(i0) + off);

            [[unroll]] for (uint nt = 0; nt < NB; nt++) {
                // 2. Sᵀ = K Qᵀ and dPᵀ = V dOᵀ for rows 16nt .. of the block (Qᵀ, dOᵀ read
                //    column-major from the staged rows).
                ACC st = ACC_ZERO;
                ACC dpt = ACC_ZERO;
                [[unroll]] for (uint c = 0; c < DC; c++) {
                    MATB qm;
                    MATB gm;
                    coopMatLoad(qm, xs, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutColumnMajor);
                    coopMatLoad(gm, ys, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutColumnMajor);
#if HOLD
                    st = coopMatMulAdd(ka[c], qm, st);
                    dpt = coopMatMulAdd(va[c], gm, dpt);
#else
                    MATA km;
                    MATA vm;
                    coopMatLoad(km, k4, kvb + js * D4 + 4u * c, D4, gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(vm, v4, kvb + js * D4 + 4u * c, D4, gl_CooperativeMatrixLayoutRowMajor);
                    st = coopMatMulAdd(km, qm, st);
                    dpt = coopMatMulAdd(vm, gm, dpt);
#endif
                }
                // 3. Pᵀ and dSᵀ element for element: this lane's key js + frag_row(i), row
                //    i0 + 16nt + frag_col(i).
                MATA pa;
                MATA dsa;
                [[unroll]] for (uint i = 0; i < 8; i++) {
                    const uint rl = 16u * nt + frag_col(i);  // the row within the block
                    float x = st[i] * qscale;
                    if (edge) {
                        const uint key = js + frag_row(i);
                        const uint row = i0 + rl;
                        const bool ok = key < nk && row < n && (!causal || int(key) <= int(row) + off);
                        x = ok ? x + BIAS(head, row, key) : ninf;
                    }
                    const float p = exp2(x - ls[rl]);
                    const float z = DROP(head, i0 + rl, js + frag_row(i));
                    pa[A_OF(i)] = TO_A(p * z);
                    dsa[A_OF(i)] = TO_A(p * (dpt[i] * z - ds[rl]) * scale);
                }
                // 4. dV += Pᵀ dO, dK += dSᵀ Q over this workgroup's column tiles (dO and Q rows
                //    16nt .. read row-major).
                [[unroll]] for (uint oc = 0; oc < OC; oc++) {
                    const uint c = c0 + oc;
                    MATB gm;
                    MATB qm;
                    coopMatLoad(gm, ys, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(qm, xs, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutRowMajor);
                    dv[oc] = coopMatMulAdd(pa, gm, dv[oc]);
                    dk[oc] = coopMatMulAdd(dsa, qm, dk[oc]);
                }
            }
        }
    }

    // dK and dV of this subgroup's keys, two columns a store (keys past M are not written).
    [[unroll]] for (uint oc = 0; oc < OC; oc++) {
        [[unroll]] for (uint i = 0; i < 8; i += 2) {
            const uint key = js + frag_row(i);
            if (key < nk) {
                const uint at = (kvh * nk + key) * D + 16u * (c0 + oc) + frag_col(i);
                STORE_PAIR(dk2, at, dk[oc], i);
                STORE_PAIR(dv2, at, dv[oc], i);
            }
        }
    }
#else
    const uint head = params.head_offset + gl_WorkGroupID.y;
    const uint i0 = gl_WorkGroupID.x * 64u;  // the workgroup's first row
    const uint r0 = i0 + 16u * sg;         // this subgroup's first row
    const uint qb = head * n * D4;         // this head's Q and dO (padded by 128 rows)
    const uint kvb = (head / params.kv_group) * nk * D4;

    const uint c0 = gl_WorkGroupID.z * OC;  // dQ's first column tile here

    // This subgroup's 16 rows of Q and dO as A matrices (held, or loaded at each use); L and D of
    // this lane's two rows.
#if HOLD
    MATA qa[DC];
    MATA ga[DC];
    [[unroll]] for (uint c = 0; c < DC; c++) {
        coopMatLoad(qa[c], q4, qb + r0 * D4 + 4u * c, D4, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(ga[c], g4, qb + r0 * D4 + 4u * c, D4, gl_CooperativeMatrixLayoutRowMajor);
    }
#endif
    ACC dq[OC];
    [[unroll]] for (uint c = 0; c < OC; c++) {
        dq[c] = ACC_ZERO;
    }
    float lr[2];
    float dr[2];
    [[unroll]] for (uint h = 0; h < 2; h++) {
        const uint row = r0 + half_row(h);
        lr[h] = row < n ? lse[head * n + row] : uintBitsToFloat(0x7f800000u);
        dr[h] = row < n ? delta[head * n + row] : 0.0;
    }

    // The keys any row of the workgroup may see (all M, or up to the causal diagonal).
    uint kv_end = nk;
    if (causal) {
        kv_end = uint(clamp(int(i0 + 64u) + off, 0, int(nk)));
    }
    ELEM4 pk[LOADS];
    ELEM4 pv[LOADS];
#if PREFETCH
    FETCH_BLOCK(pk, pv, k4, v4, kvb, 0u)
#endif
    for (uint j0 = 0; j0 < kv_end; j0 += B) {
        // 1. Stage this block of keys; with PREFETCH, load the next one into registers.
        barrier();
#if !PREFETCH
        FETCH_BLOCK(pk, pv, k4, v4, kvb, j0)
#endif
        STAGE_BLOCK(xs, ys, pk, pv)
        barrier();
#if PREFETCH
        if (j0 + B < kv_end) {
            FETCH_BLOCK(pk, pv, k4, v4, kvb, j0 + B)
        }
#endif
        // Every key of the block lies above this subgroup's rows: skip it.
        SKIP_BLOCK_IF(causal && int(j0) > int(r0 + 15u) + off);
        const bool edge = MASK != 0 || j0 + B > nk || (causal && int(j0 + B - 1u) > int(r0) + off);

        [[unroll]] for (uint nt = 0; nt < NB; nt++) {
            // 2. S = Q Kᵀ and dP = dO Vᵀ for keys 16nt .. of the block.
            ACC s = ACC_ZERO;
            ACC dp = ACC_ZERO;
            [[unroll]] for (uint c = 0; c < DC; c++) {
                MATB kb;
                MATB vb;
                coopMatLoad(kb, xs, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutColumnMajor);
                coopMatLoad(vb, ys, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutColumnMajor);
#if HOLD
                s = coopMatMulAdd(qa[c], kb, s);
                dp = coopMatMulAdd(ga[c], vb, dp);
#else
                MATA qm;
                MATA gm;
                coopMatLoad(qm, q4, qb + r0 * D4 + 4u * c, D4, gl_CooperativeMatrixLayoutRowMajor);
                coopMatLoad(gm, g4, qb + r0 * D4 + 4u * c, D4, gl_CooperativeMatrixLayoutRowMajor);
                s = coopMatMulAdd(qm, kb, s);
                dp = coopMatMulAdd(gm, vb, dp);
#endif
            }
            // 3. dS element for element: this lane's row r0 + frag_row(i), key j0 + 16nt +
            //    frag_col(i).
            MATA dsa;
            [[unroll]] for (uint i = 0; i < 8; i++) {
                const uint h = frag_half(i);
                float x = s[i] * qscale;
                if (edge) {
                    const uint key = j0 + 16u * nt + frag_col(i);
                    const uint row = r0 + frag_row(i);
                    const bool ok = key < nk && (!causal || int(key) <= int(row) + off);
                    x = ok ? x + BIAS(head, row, key) : ninf;
                }
                const float p = exp2(x - lr[h]);
                const float z = DROP(head, r0 + frag_row(i), j0 + 16u * nt + frag_col(i));
                dsa[A_OF(i)] = TO_A(p * (dp[i] * z - dr[h]) * scale);
            }
            // 4. dQ += dS K over this workgroup's column tiles (K rows 16nt .. read row-major).
            [[unroll]] for (uint oc = 0; oc < OC; oc++) {
                MATB kb;
                coopMatLoad(kb, xs, (16u * nt) * KP4 + 4u * (c0 + oc), KP4, gl_CooperativeMatrixLayoutRowMajor);
                dq[oc] = coopMatMulAdd(dsa, kb, dq[oc]);
            }
        }
    }

    // dQ of this subgroup's rows, two columns a store.
    [[unroll]] for (uint oc = 0; oc < OC; oc++) {
        [[unroll]] for (uint i = 0; i < 8; i += 2) {
            const uint row = r0 + frag_row(i);
            if (row < n) {
                STORE_PAIR(dq2, (head * n + row) * D + 16u * (c0 + oc) + frag_col(i), dq[oc], i);
            }
        }
    }
#endif
}
