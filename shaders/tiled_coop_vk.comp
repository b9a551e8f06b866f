// tiled_coop_vk.comp — the `tiled-coop-vk` kernel: FlashAttention-2's forward on cooperative
// matrices with the softmax in registers. GLSL with GL_KHR_cooperative_matrix, compiled to SPIR-V
// at build time (build.rs, glslang) and handed to Vulkan through wgpu's PASSTHROUGH_SHADERS:
// Vulkan only, f16 Q/K/V/O (or with BF16 = 1 bf16: coop_vk_common.glsl's ELEM), D = 64, 128 or
// 256 (HEAD_D; src/kernels/tiled_coop_vk.rs says why others are refused).
//
// Why GLSL: wgpu 30's WGSL cooperative matrices have no element access, so `tiled-coop` must send
// every 16 x 16 score tile through workgroup memory to compute its row maxima and sums, and every P
// tile back through it to feed P·V (README, "the walls"). GL_KHR_cooperative_matrix gives each
// invocation its elements of a matrix; this kernel reads them by the coordinates of the layout
// coop_layout.glsl assumes (the H200 driver's), which the host checks on the device first.
// With it: row maxima and sums are two subgroup shuffles (the four lanes 4g .. 4g+3 share rows g and
// g + 8), O is rescaled in registers, and a P tile becomes the A operand of P·V element for element
// in registers (the A operand holds the accumulator's coordinates, A_OF): S and P never touch workgroup
// memory. Only K and V are staged, BC keys a block, with padded rows.
//
// A workgroup of WG invocations (WG / 32 subgroups of 32: four with WG = 128, eight with 256) owns
// BR = 16 ROWS WG / 32 query rows of one head (64 ROWS with four subgroups); subgroup s owns ROWS
// tiles of 16 rows from row 16 ROWS s. Per key block of BC keys (KT = BC / 16 key tiles; D in
// DC = D / 16 column tiles):
//   1. stage K and V (with PREFETCH = 1 prefetched into registers during the previous block), two
//      workgroup barriers;
//   2. S = Q Kᵀ: KT 16 x 16 f32 tiles (keys 16n ..) a row tile, Q kept as DC A matrices a row
//      tile;
//   3. scale to base 2, mask (only blocks that cross the causal diagonal or the last key), row
//      maxima by shuffles, the online-softmax rescale of the running sum and of O in registers
//      (with TAU > 0 lazily: only when some row of the subgroup moved its maximum);
//   4. P = exp2(S - m) (times the dropout factor, which the row sum does not see) rounded to f16
//      into A matrices (FlashAttention's single f16 P);
//   5. O += P V over the KT tiles of 16 keys, DC accumulators a row tile.
// Workgroup storage: K and V 2 x BC x (D + 8) f16: 9216 bytes at D = 64 with BC = 32 (18432 with
// BC = 64 and ROWS = 2), 17408 at D = 128 with BC = 32, 16896 at D = 256 with BC = 16. Registers
// a lane, ROWS = 1: O 8 DC floats, Q 4 DC words, S and P 12 KT, the prefetch BC D / 64 words: at
// D = 256 O and Q alone take 192, which is why its build has PREFETCH = 0 and BC = 16
// (src/kernels/tiled_coop_vk_shapes.rs); with QS = 1 Q takes BR x (D + 8) f16 of workgroup
// memory instead of its 4 DC registers (17408 bytes at D = 128, BR = 64).
#version 450
#extension GL_GOOGLE_include_directive : require

// Defined by build.rs: LSE (0 or 1) — 1 writes the row logsumexp for the backward; MASK (0 or 1)
// and MASK_BINDING — a mask bias (coop_vk_common.glsl), which masks every block;
// EMULATE_COOPMAT (0 or 1) — 1 builds the tests' twin on coopmat_emu.glsl (no matrix units);
// ROWS (1 or 2) — 16-row tiles a subgroup owns (2: BR = 128, every K and V matrix loaded from
// workgroup memory serves two row tiles, as FlashAttention-2 does, at twice the accumulators);
// HEAD_D (64, 128 or 256, coop_vk_common.glsl); BC (16, 32 or 64) — keys a block; PREFETCH (0
// or 1) — 1 loads the next block into registers while this one is computed; WG (128 or 256,
// coop_vk_common.glsl) — invocations a workgroup: eight subgroups share each staged K and V block
// as two row tiles a subgroup do, at one row tile's registers; QS (0 or 1) — 1 stages the
// workgroup's Q rows in workgroup memory once (BR x (D + 8) f16 more) and loads each A matrix of
// Q from there at its use, instead of holding the DC A matrices in registers (4 DC a lane: 32 at
// D = 128, 64 at D = 256); TAU (0.0 or 8.0) — the lazy-rescale threshold in base 2 (step 3; 0:
// the classic online softmax, O rescaled in every block where a row's maximum grew).
#include "coop_vk_common.glsl"

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

#ifndef QS
#define QS 0
#endif
#ifndef TAU
#define TAU 0.0
#endif

#if QS
layout(set = 0, binding = 1, std430) readonly buffer QBuf { ELEM4 q4[]; };
#else
layout(set = 0, binding = 1, std430) readonly buffer QBuf { ELEM q[]; };
#endif
layout(set = 0, binding = 2, std430) readonly buffer KBuf { ELEM4 k4[]; };
layout(set = 0, binding = 3, std430) readonly buffer VBuf { ELEM4 v4[]; };
layout(set = 0, binding = 4, std430) buffer OBuf { ELEM2 o2[]; };
#if LSE
// shaders/tiled_lse.wgsl's L: m + log2(sum) in base 2, +inf for a row with no allowed key.
layout(set = 0, binding = 5, std430) buffer LBuf { float lse[]; };
#endif

const uint SG_ROWS = 16 * ROWS;  // query rows a subgroup: ROWS tiles of 16
const uint BR = WG / 32 * SG_ROWS;  // query rows a workgroup
const uint KT = BC / 16;      // key tiles a block
const uint DC = D / 16;       // column tiles of D
const uint LOADS = BC * D4 / WG;  // f16vec4 of K (and of V) each invocation stages a block: 8 at D = BC = 64, WG = 128

shared ELEM4 ks[BC * KP4];  // [key][KP4]
shared ELEM4 vs[BC * KP4];
#if QS
shared ELEM4 qs[BR * KP4];  // the workgroup's Q rows [row][KP4]
#endif

void main() {
    const uint t = gl_LocalInvocationIndex;
    const uint sg = SUBGROUP;
    const uint lane = LANE;
    const uint g = lane >> 2;
    const uint tq = lane & 3u;
    const uint n = params.seq;
    const uint nk = params.kv_seq;
    const uint head = params.head_offset + gl_WorkGroupID.y;
    const uint base = head * n * D;
    const uint i0 = gl_WorkGroupID.x * BR;
    const uint r0 = i0 + sg * SG_ROWS;  // this subgroup's first row
    const bool causal = params.causal != 0u;
    const int off = params.causal_off;
    const float ninf = uintBitsToFloat(params.neg_inf_bits);
    const float qscale = params.scale * LOG2E;
    const uint kvb = (head / params.kv_group) * nk * D4;  // this head's K/V, in f16vec4

    // This lane's rows: two in each of the subgroup's row tiles.
    uint rows[ROWS][2];
    [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
        rows[rt][0] = r0 + 16u * rt + g;
        rows[rt][1] = r0 + 16u * rt + g + 8u;
    }

    // The keys any row of the workgroup may see (all M, or up to the causal diagonal).
    uint kv_end = nk;
    if (causal) {
        kv_end = uint(clamp(int(i0 + BR) + off, 0, int(nk)));
    }

    // Q of this subgroup's rows (the host pads Q by 128 rows past the last head): A matrices in
    // registers, or (QS) the workgroup's rows staged once.
#if QS
    [[unroll]] for (uint e = 0; e < BR * D4 / WG; e++) {
        const uint w = t + WG * e;
        qs[(w / D4) * KP4 + w % D4] = q4[(base + i0 * D) / 4u + w];
    }
#else
    MATA qa[ROWS][DC];
#endif
    ACC o[ROWS][DC];
    float m[ROWS][2];  // the rows' running maxima (base 2)
    float l[ROWS][2];  // this lane's share of the rows' sums, relative to m
    [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
        [[unroll]] for (uint c = 0; c < DC; c++) {
#if !QS
            coopMatLoad(qa[rt][c], q, base + (r0 + 16u * rt) * D + 16u * c, D, gl_CooperativeMatrixLayoutRowMajor);
#endif
            o[rt][c] = ACC_ZERO;
        }
        [[unroll]] for (uint h = 0; h < 2; h++) {
            m[rt][h] = ninf;
            l[rt][h] = 0.0;
        }
    }

    // The first block into registers (K and V are padded by 128 rows past the last head too).
    ELEM4 pk[LOADS];
    ELEM4 pv[LOADS];
#if PREFETCH
    FETCH_BLOCK(pk, pv, k4, v4, kvb, 0u)
#endif

    for (uint j0 = 0; j0 < kv_end; j0 += BC) {
        // 1. Stage this block; with PREFETCH, load the next one into registers.
        barrier();
#if !PREFETCH
        FETCH_BLOCK(pk, pv, k4, v4, kvb, j0)
#endif
        STAGE_BLOCK(ks, vs, pk, pv)
        barrier();
#if PREFETCH
        if (j0 + BC < kv_end) {
            FETCH_BLOCK(pk, pv, k4, v4, kvb, j0 + BC)
        }
#endif
        // Every key of the block lies above this subgroup's rows: skip it.
        SKIP_BLOCK_IF(causal && int(j0) > int(r0 + SG_ROWS - 1u) + off);

        // 2. S = Q Kᵀ, KT tiles of 16 keys (Kᵀ read column-major from the staged rows), each
        //    K matrix loaded once for the subgroup's row tiles.
        ACC s[ROWS][KT];
#if QS
        // (QS: D outer, so that each A matrix of Q is loaded once a block.)
        [[unroll]] for (uint nt = 0; nt < KT; nt++) {
            [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
                s[rt][nt] = ACC_ZERO;
            }
        }
        [[unroll]] for (uint c = 0; c < DC; c++) {
            MATA qm[ROWS];
            [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
                coopMatLoad(qm[rt], qs, (r0 - i0 + 16u * rt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint nt = 0; nt < KT; nt++) {
                MATB kb;
                coopMatLoad(kb, ks, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
                    s[rt][nt] = coopMatMulAdd(qm[rt], kb, s[rt][nt]);
                }
            }
        }
#else
        [[unroll]] for (uint nt = 0; nt < KT; nt++) {
            [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
                s[rt][nt] = ACC_ZERO;
            }
            [[unroll]] for (uint c = 0; c < DC; c++) {
                MATB kb;
                coopMatLoad(kb, ks, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
                    s[rt][nt] = coopMatMulAdd(qa[rt][c], kb, s[rt][nt]);
                }
            }
        }
#endif

        MATA pa[ROWS][KT];
        [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
            // 3. Scale, mask where the block crosses the diagonal or the last key, row maxima.
            const uint rf = r0 + 16u * rt;  // the tile's first row
            const bool edge = MASK != 0 || j0 + BC > nk || (causal && int(j0 + BC - 1u) > int(rf) + off);
            float mx[2] = float[2](ninf, ninf);
            [[unroll]] for (uint nt = 0; nt < KT; nt++) {
                [[unroll]] for (uint i = 0; i < 8; i++) {
                    const uint h = frag_half(i);
                    float x = s[rt][nt][i] * qscale;
                    if (edge) {
                        const uint col = j0 + 16u * nt + frag_col(i);
                        const bool ok = col < nk && (!causal || int(col) <= int(rows[rt][h]) + off);
                        x = ok ? x + BIAS(head, rows[rt][h], col) : ninf;
                    }
                    s[rt][nt][i] = x;
                    mx[h] = max(mx[h], x);
                }
            }
            // Lazy rescale (FlashAttention-4's): a row's maximum moves only when the block's
            // exceeds it by more than TAU (base 2), so P = exp2(S - m) <= 2^TAU, well inside f16;
            // O is rescaled only when some row of the subgroup moved (rarely after its first
            // allowed keys). L = m + log2(sum) holds for whatever m the sum was taken against.
            float alpha[2];
            float mu[2];  // the maximum P is taken against: 0 while a row has seen no allowed key
            bool moved = false;
            [[unroll]] for (uint h = 0; h < 2; h++) {
                mx[h] = max(mx[h], SHUFFLE_XOR(mx[h], 1u));
                mx[h] = max(mx[h], SHUFFLE_XOR(mx[h], 2u));
                const bool up = mx[h] > m[rt][h] + TAU;
                const float mn = up ? mx[h] : m[rt][h];
                mu[h] = mn == ninf ? 0.0 : mn;
                alpha[h] = up ? exp2(m[rt][h] - mu[h]) : 1.0;  // 0 for the first allowed block
                moved = moved || up;
                m[rt][h] = mn;
                l[rt][h] *= alpha[h];
            }
            if (SUBGROUP_ANY(moved)) {
                [[unroll]] for (uint c = 0; c < DC; c++) {
                    [[unroll]] for (uint i = 0; i < 8; i++) {
                        o[rt][c][i] *= alpha[frag_half(i)];
                    }
                }
            }

            // 4. P = exp2(S - m) as f16 A matrices, element for element (A_OF).
            [[unroll]] for (uint nt = 0; nt < KT; nt++) {
                [[unroll]] for (uint i = 0; i < 8; i++) {
                    const uint h = frag_half(i);
                    const float p = exp2(s[rt][nt][i] - mu[h]);
                    l[rt][h] += p;
                    pa[rt][nt][A_OF(i)] = TO_A(p * DROP(head, rows[rt][h], j0 + 16u * nt + frag_col(i)));
                }
            }
        }

        // 5. O += P V: key tile nt of P against rows 16nt .. of V, column tile c; each V matrix
        //    loaded once for the subgroup's row tiles.
        [[unroll]] for (uint nt = 0; nt < KT; nt++) {
            [[unroll]] for (uint c = 0; c < DC; c++) {
                MATB vb;
                coopMatLoad(vb, vs, (16u * nt) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
                    o[rt][c] = coopMatMulAdd(pa[rt][nt], vb, o[rt][c]);
                }
            }
        }
    }

    // O = accumulators / row sum (0 for a row with no allowed key), two columns a store.
    [[unroll]] for (uint rt = 0; rt < ROWS; rt++) {
        float inv[2];
        [[unroll]] for (uint h = 0; h < 2; h++) {
            float sum = l[rt][h];
            sum += SHUFFLE_XOR(sum, 1u);
            sum += SHUFFLE_XOR(sum, 2u);
            inv[h] = sum > 0.0 ? 1.0 / sum : 0.0;
#if LSE
            if (tq == 0u && rows[rt][h] < n) {
                lse[head * n + rows[rt][h]] =
                    sum > 0.0 ? m[rt][h] + log2(sum) : uintBitsToFloat(0x7f800000u);
            }
#endif
        }
        [[unroll]] for (uint c = 0; c < DC; c++) {
            [[unroll]] for (uint i = 0; i < 8; i += 2) {
                const uint h = frag_half(i);
                const uint row = rows[rt][h];
                if (row < n) {
                    const uint col = 16u * c + frag_col(i);
                    o2[(base + row * D + col) / 2u] =
                        TO_ELEM2(o[rt][c][i] * inv[h], o[rt][c][i + 1u] * inv[h]);
                }
            }
        }
    }
}
