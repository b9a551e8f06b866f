// gemm_coop_vk.comp — the `unfused-coop` variant's two matrix products on cooperative matrices
// (tensor cores), the rest of its plan being `unfused-inplace`'s WGSL steps: GLSL with
// GL_KHR_cooperative_matrix compiled to SPIR-V at build time (build.rs) and run through wgpu's
// PASSTHROUGH_SHADERS, like tiled_coop_vk.comp. f16 inputs (or with BF16 = 1 bf16:
// coop_vk_common.glsl's ELEM), f32 accumulators; build.rs compiles it for HEAD_D = 64, 128 and 256,
// for either dtype and for either product (QK):
//   QK = 1:  S[z, i, j] = sum_d Q[h, i, d] K[kvh, j, d]   (f32 scores, as qk.wgsl writes them)
//   QK = 0:  O[h, i, c] = sum_j P[z, i, j] V[kvh, j, c]   (P f32, rounded to the storage dtype as
//            it is loaded: FlashAttention's single P; O in the storage dtype)
// where h = head_offset + z is the global head of chunk slot z and kvh its K/V head.
//
// A workgroup of 128 invocations (four 32-wide subgroups) owns 64 rows; subgroup s owns rows
// 16s .. 16s + 15 and, in QK, 64 keys (4 accumulator tiles, Q read once per 16 columns of D), in
// PV all D columns (D / 16 accumulators, each V tile loaded once per 16 keys). Operands come
// straight from device memory: Q, K and V by coopMatLoad (the host pads them by 64 rows past the
// last head; rows past N or M of other heads are read and never stored), P element by element
// into the A operand by the coordinates of the assumed layout (coop_layout.glsl, checked by the
// device's probe: 0 past N or M). Results are stored element by element, two columns at a time,
// skipping rows past N and columns past M: no workgroup memory and no barrier but the emulation's.
#version 450
#extension GL_GOOGLE_include_directive : require

#define MASK 0
#define DROPOUT 0
#include "coop_vk_common.glsl"

layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;

#if QK
layout(set = 0, binding = 1, std430) readonly buffer QBuf { ELEM q[]; };
layout(set = 0, binding = 2, std430) readonly buffer KBuf { ELEM k[]; };
layout(set = 0, binding = 3, std430) buffer SBuf { float s[]; };
#else
layout(set = 0, binding = 1, std430) readonly buffer PBuf { float pm[]; };
layout(set = 0, binding = 2, std430) readonly buffer VBuf { ELEM v[]; };
layout(set = 0, binding = 3, std430) buffer OBuf { ELEM2 o2[]; };
#endif

const uint BR = 64;  // rows a workgroup
const uint D16 = D / 16;

void main() {
    const uint sg = SUBGROUP;
    const uint n = params.seq;
    const uint m = params.kv_seq;
    const uint z = gl_WorkGroupID.z;
    const uint head = params.head_offset + z;
    const uint kvh = head / params.kv_group;
    const uint r0 = gl_WorkGroupID.y * BR + 16u * sg;  // this subgroup's first row
#if QK
    const uint j0 = gl_WorkGroupID.x * 64u;  // the workgroup's first key
    ACC acc[4];
    [[unroll]] for (uint nt = 0; nt < 4; nt++) {
        acc[nt] = ACC_ZERO;
    }
    [[unroll]] for (uint c = 0; c < D16; c++) {
        MATA qa;
        coopMatLoad(qa, q, (head * n + r0) * D + 16u * c, D, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint nt = 0; nt < 4; nt++) {
            // Kᵀ: K's rows j0 + 16 nt .. read column-major.
            MATB kb;
            coopMatLoad(kb, k, (kvh * m + j0 + 16u * nt) * D + 16u * c, D, gl_CooperativeMatrixLayoutColumnMajor);
            acc[nt] = coopMatMulAdd(qa, kb, acc[nt]);
        }
    }
    const uint sb = z * n * m;
    [[unroll]] for (uint nt = 0; nt < 4; nt++) {
        [[unroll]] for (uint i = 0; i < 8; i += 2) {
            const uint row = r0 + frag_row(i);
            const uint col = j0 + 16u * nt + frag_col(i);
            if (row < n && col < m) {
                s[sb + row * m + col] = acc[nt][i];
            }
            if (row < n && col + 1u < m) {
                s[sb + row * m + col + 1u] = acc[nt][i + 1u];
            }
        }
    }
#else
    ACC acc[D16];
    [[unroll]] for (uint c = 0; c < D16; c++) {
        acc[c] = ACC_ZERO;
    }
    const uint pb = z * n * m;
    for (uint j0 = 0; j0 < m; j0 += 16u) {
        // P's 16 x 16 tile (rows r0 .., keys j0 ..) into the A operand, element by element.
        MATA pa;
        [[unroll]] for (uint i = 0; i < 8; i++) {
            const uvec2 rc = a_rc(i);
            const uint row = r0 + rc.x;
            const uint col = j0 + rc.y;
            pa[i] = TO_A(row < n && col < m ? pm[pb + row * m + col] : 0.0);
        }
        [[unroll]] for (uint c = 0; c < D16; c++) {
            MATB vb;
            coopMatLoad(vb, v, (kvh * m + j0) * D + 16u * c, D, gl_CooperativeMatrixLayoutRowMajor);
            acc[c] = coopMatMulAdd(pa, vb, acc[c]);
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
