// gemm_coop_vk.comp — the `unfused-coop` variant's two matrix products on cooperative matrices
// (tensor cores), the rest of its plan being `unfused-inplace`'s WGSL steps: GLSL with
// GL_KHR_cooperative_matrix compiled to SPIR-V at build time (build.rs) and run through wgpu's
// PASSTHROUGH_SHADERS, like tiled_coop_vk.comp. f16 inputs (or with BF16 = 1 bf16:
// coop_vk_common.glsl's ELEM), f32 accumulators; build.rs compiles it for HEAD_D = 64, 128 and 256,
// for either dtype and for either product (QK):
//   QK = 1:  S[z, i, j] = sum_d Q[h, i, d] K[kvh, j, d]   (f32 scores, as qk.wgsl writes them)
//   QK = 0:  O[h, i, c] = sum_j P[z, i, j] V[kvh, j, c]   (P f32, rounded to the storage dtype as
//            it is staged: FlashAttention's single P; O in the storage dtype)
// and for SH = 1 (half scores) S and P in the storage dtype instead of f32, as PyTorch's naive path
// keeps them in f16 / bf16 (the WGSL steps between then read them through scores_f16.wgsl or
// scores_bf16.wgsl): S rounded as it is written, P staged as it is read.
// where h = head_offset + z is the global head of chunk slot z and kvh its K/V head.
//
// A workgroup of 128 invocations (four 32-wide subgroups) owns 64 rows; subgroup s owns rows
// 16s .. 16s + 15.
// - QK: a workgroup owns 64 keys too. The workgroup stages its 64 keys of K in workgroup memory
//   32 columns of D at a time (the next chunk prefetched into registers while this one is
//   multiplied), so that each K element leaves device memory once per workgroup, not once per
//   subgroup, and Kᵀ is read column-major from workgroup memory instead of device memory; a
//   subgroup's 4 accumulator tiles take Q (its own 16 rows, once per 16 columns of D) straight
//   from device memory by coopMatLoad (the host pads Q, K and V by 64 rows past the last head;
//   rows past N or M of other heads are read and never stored). The scores leave through
//   workgroup memory: each subgroup stores its 16 x 64 tile there (coopMatStore, no layout
//   assumed) and writes it back as whole rows of 16-byte words, so that every store instruction
//   fills 256-byte runs of S (where M % 4 = 0; else word by word).
// - PV: the workgroup walks the keys 32 at a time: it stages P's 64 x 32 block (read as 16-byte
//   words, rounded to the storage dtype, 0 past N or M) and V's 32 x D block (0 past M) in
//   workgroup memory, and each subgroup multiplies its 16 rows by all of V's columns (D / 16
//   accumulators).
// Two barriers per staged block or chunk (and the emulation's own).
#version 450
#extension GL_GOOGLE_include_directive : require

#define MASK 0
#define DROPOUT 0
#ifndef SH
#define SH 0
#endif
#include "coop_vk_common.glsl"

// The stored form of four scores (SVEC) and a vec4 as that form (TO_SVEC).
#if SH
#define SVEC ELEM4
#define TO_SVEC(x) TO_ELEM4(x)
#else
#define SVEC vec4
#define TO_SVEC(x) (x)
#endif

layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;

#if QK
layout(set = 0, binding = 1, std430) readonly buffer QBuf { ELEM q[]; };
layout(set = 0, binding = 2, std430) readonly buffer KBuf { ELEM4 k4[]; };
layout(set = 0, binding = 3, std430) buffer SBuf { SVEC s4[]; };
#else
layout(set = 0, binding = 1, std430) readonly buffer PBuf { SVEC p4[]; };
layout(set = 0, binding = 2, std430) readonly buffer VBuf { ELEM4 v4[]; };
layout(set = 0, binding = 3, std430) buffer OBuf { ELEM2 o2[]; };
#endif

const uint BR = 64;  // rows a workgroup
const uint D16 = D / 16;

#if QK
// Each subgroup's 16 x 64 f32 tile of S, rows SP floats apart (16-byte aligned, 4 floats of
// padding).
const uint SP = 64 + 4;
shared float sh_s[4 * 16 * SP];
const uint KC = 32;                  // columns of D a staged chunk of K
const uint KC4 = KC / 4;             // its f16vec4 a key
const uint KCP4 = KC4 + 2;           // staged pitch in f16vec4: KC + 8 halves (bank-conflict padding)
const uint KLOADS = 64u * KC4 / 128u;  // f16vec4 an invocation stages a chunk: 4
shared ELEM4 sh_k[64 * KCP4];        // [key][column / 4 of the chunk]
#else
const uint BK = 32;                // keys a staged block
const uint PP4 = BK / 4 + 2;       // P's staged row pitch in 4-vectors (BK + 8 halves)
shared ELEM4 sh_p[BR * PP4];  // [row][key / 4]
shared ELEM4 sh_v[BK * KP4];  // [key][column / 4], KP4 = D / 4 + 2 (coop_vk_common.glsl)
#endif

void main() {
    const uint sg = SUBGROUP;
    const uint t = gl_LocalInvocationIndex;
    const uint n = params.seq;
    const uint m = params.kv_seq;
    const uint z = gl_WorkGroupID.z;
    const uint head = params.head_offset + z;
    const uint kvh = head / params.kv_group;
    const uint wr0 = gl_WorkGroupID.y * BR;  // the workgroup's first row
    const uint r0 = wr0 + 16u * sg;          // this subgroup's first row
#if QK
    const uint j0 = gl_WorkGroupID.x * 64u;  // the workgroup's first key
    ACC acc[4];
    [[unroll]] for (uint nt = 0; nt < 4; nt++) {
        acc[nt] = ACC_ZERO;
    }
    // K's block: rows j0 .. j0 + 63 of head kvh (read past M into the padding, never stored);
    // invocation t moves the words w = t + 128 e of a chunk (key w / KC4, word w % KC4).
    const uint kb0 = (kvh * m + j0) * D4;
    ELEM4 pk[KLOADS];
    [[unroll]] for (uint e = 0; e < KLOADS; e++) {
        const uint w = t + 128u * e;
        pk[e] = k4[kb0 + (w / KC4) * D4 + w % KC4];
    }
    for (uint ch = 0; ch < D / KC; ch++) {
        barrier();  // the previous chunk's readers are done
        [[unroll]] for (uint e = 0; e < KLOADS; e++) {
            const uint w = t + 128u * e;
            sh_k[(w / KC4) * KCP4 + w % KC4] = pk[e];
        }
        barrier();
        if (ch + 1u < D / KC) {
            [[unroll]] for (uint e = 0; e < KLOADS; e++) {
                const uint w = t + 128u * e;
                pk[e] = k4[kb0 + (w / KC4) * D4 + (ch + 1u) * KC4 + w % KC4];
            }
        }
        [[unroll]] for (uint cc = 0; cc < KC / 16u; cc++) {
            MATA qa;
            coopMatLoad(qa, q, (head * n + r0) * D + KC * ch + 16u * cc, D, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint nt = 0; nt < 4; nt++) {
                // Kᵀ: the staged keys 16 nt .. read column-major.
                MATB kb;
                coopMatLoad(kb, sh_k, (16u * nt) * KCP4 + 4u * cc, KCP4, gl_CooperativeMatrixLayoutColumnMajor);
                acc[nt] = coopMatMulAdd(qa, kb, acc[nt]);
            }
        }
    }
    const uint at = sg * 16u * SP;
    [[unroll]] for (uint nt = 0; nt < 4; nt++) {
        coopMatStore(acc[nt], sh_s, at + 16u * nt, SP, gl_CooperativeMatrixLayoutRowMajor);
    }
    barrier();
    // This subgroup's 16 rows x 16 words: lanes 0..15 one row, 16..31 the next, 8 times.
    const uint sb = z * n * m;
    [[unroll]] for (uint it = 0; it < 8; it++) {
        const uint w = LANE + 32u * it;
        const uint r = w / 16u;
        const uint c4 = w % 16u;
        const uint row = r0 + r;
        const uint col = j0 + 4u * c4;
        const uint x = at + r * SP + 4u * c4;
        const vec4 val = vec4(sh_s[x], sh_s[x + 1u], sh_s[x + 2u], sh_s[x + 3u]);
        if (row < n && col < m) {
            const uint e = sb + row * m + col;
            if ((m & 3u) == 0u) {
                s4[e / 4u] = TO_SVEC(val);
            } else {
                // (f32 scores only: the host keeps 16-bit scores to M % 4 = 0)
                [[unroll]] for (uint c = 0; c < 4; c++) {
                    if (col + c < m) {
                        s4[(e + c) / 4u][(e + c) % 4u] = TO_SVEC(val)[c];
                    }
                }
            }
        }
    }
#else
    ACC acc[D16];
    [[unroll]] for (uint c = 0; c < D16; c++) {
        acc[c] = ACC_ZERO;
    }
    const uint pb = z * n * m;
    for (uint j0 = 0; j0 < m; j0 += BK) {
        barrier();  // the previous block's readers are done
        // P: 64 rows x 8 words, 4 a thread (0 past N or M), rounded to the storage dtype (SH: stored so).
        [[unroll]] for (uint it = 0; it < 4; it++) {
            const uint w = t + 128u * it;
            const uint r = w / 8u;
            const uint c4 = w % 8u;
            const uint row = wr0 + r;
            const uint col = j0 + 4u * c4;
            SVEC x = TO_SVEC(vec4(0.0));
            if (row < n && col < m) {
                const uint e = pb + row * m + col;
                if ((m & 3u) == 0u) {
                    x = p4[e / 4u];
                } else {
                    [[unroll]] for (uint c = 0; c < 4; c++) {
                        if (col + c < m) {
                            x[c] = p4[(e + c) / 4u][(e + c) % 4u];
                        }
                    }
                }
            }
#if SH
            sh_p[r * PP4 + c4] = x;  // already in the storage dtype
#else
            sh_p[r * PP4 + c4] = TO_ELEM4(x);
#endif
        }
        // V: 32 keys x D / 4 words (0 past M).
        [[unroll]] for (uint it = 0; it < BK * D4 / 128u; it++) {
            const uint w = t + 128u * it;
            const uint key = j0 + w / D4;
            sh_v[(w / D4) * KP4 + w % D4] =
                key < m ? v4[(kvh * m + key) * D4 + w % D4] : TO_ELEM4(vec4(0.0));
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK / 16u; kk++) {
            MATA pa;
            coopMatLoad(pa, sh_p, (16u * sg) * PP4 + 4u * kk, PP4, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint c = 0; c < D16; c++) {
                MATB vb;
                coopMatLoad(vb, sh_v, (16u * kk) * KP4 + 4u * c, KP4, gl_CooperativeMatrixLayoutRowMajor);
                acc[c] = coopMatMulAdd(pa, vb, acc[c]);
            }
        }
    }
    [[unroll]] for (uint c = 0; c < D16; c++) {
        [[unroll]] for (uint i = 0; i < 8; i += 2) {
            const uint row = r0 + frag_row(i);
            if (row < n) {
                o2[((head * n + row) * D + 16u * c + frag_col(i)) / 2u] =
                    TO_ELEM2(acc[c][i], acc[c][i + 1u]);
            }
        }
    }
#endif
}
