// coop_vk_common.glsl — what the GLSL kernels on cooperative matrices share (tiled_coop_vk.comp,
// the forward; tiled_coop_vk_bwd.comp, its backward passes): extensions, the Params block, the
// head dimension, the matrix types (or, with EMULATE_COOPMAT = 1, coopmat_emu.glsl's emulation)
// and the element layout the kernels assume.
//
// The element layout the kernels assume (frag_row, frag_col, frag_half, A_OF): coop_layout.glsl.
#if EMULATE_COOPMAT
#else
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#endif
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#ifndef BF16
#define BF16 0
#endif
#if BF16 && !EMULATE_COOPMAT
#extension GL_EXT_bfloat16 : require
#endif

// The storage element of Q, K, V and O (ELEM, and the vectors ELEM2, ELEM4; the matrix operands'
// element ELEM_MAT): f16, or with BF16 = 1 bf16 (GL_EXT_bfloat16 on the device; the emulated build
// carries bf16 bits in f16 containers, coopmat_emu.glsl). TO_A(x): an f32 as an A-operand element,
// rounded to the storage dtype (FlashAttention's single P); TO_ELEM2(a, b): two f32 as a stored
// pair; TO_ELEM4(x): a vec4 as a stored 4-vector.
#if BF16 && !EMULATE_COOPMAT
#define ELEM bfloat16_t
#define ELEM2 bf16vec2
#define ELEM4 bf16vec4
#define TO_A(x) bfloat16_t(x)
#define TO_ELEM2(a, b) bf16vec2(vec2(a, b))
#define TO_ELEM4(x) bf16vec4(x)
#else
#define ELEM float16_t
#define ELEM2 f16vec2
#define ELEM4 f16vec4
#if BF16
#define TO_A(x) emu_bf16(x)
#define TO_ELEM2(a, b) emu_bf16_pair(a, b)
#define TO_ELEM4(v_) f16vec4(emu_bf16_pair((v_).x, (v_).y), emu_bf16_pair((v_).z, (v_).w))
#else
#define TO_A(x) float16_t(x)
#define TO_ELEM2(a, b) f16vec2(a, b)
#define TO_ELEM4(x) f16vec4(x)
#endif
#endif

// shaders/common.wgsl's `Params`, field for field (std140: 20 scalars of 4 bytes).
layout(set = 0, binding = 0, std140) uniform ParamsBlock {
    uint heads;
    uint seq;
    uint head_dim;
    uint causal;
    float scale;
    uint neg_inf_bits;
    uint head_offset;
    uint heads_per_batch;
    uint mask_bstride;
    uint mask_hstride;
    float factor;
    uint drop_threshold;
    float drop_scale;
    uint drop_key0;
    uint drop_key1;
    uint kv_group;
    uint kv_seq;
    int causal_off;
    uint pad0;
    uint pad1;
} params;

#ifndef HEAD_D
#define HEAD_D 64
#endif
const uint D = HEAD_D;        // head dimension (64 unless build.rs defines HEAD_D)
const uint D4 = D / 4;        // f16vec4 a row
const uint KP4 = D4 + 2;      // staged row pitch in f16vec4: D + 8 halves (bank-conflict padding)
const float LOG2E = 1.4426950408889634;

// Invocations a workgroup (WG: 128, four 32-wide subgroups, unless build.rs defines it; the
// forward also builds 256).
#ifndef WG
#define WG 128
#endif

// A block of rows (K and V, or Q and dO) goes to workgroup memory through registers, prefetched a
// block ahead: invocation t moves the LOADS f16vec4 words w = t + WG e of the block's two
// tensors (row w / D4, column 4 (w % D4); LOADS is the kernel's). Macros, because GLSL passes
// neither buffers nor shared arrays by reference.
// FETCH_BLOCK(ra, rb, a, b, base, row): rows `row` .. of buffers a, b (from f16vec4 `base`) into
// the registers ra, rb.
#define FETCH_BLOCK(ra, rb, a, b, base, row) \
    [[unroll]] for (uint e = 0; e < LOADS; e++) { \
        const uint w = (row) * D4 + t + WG * e; \
        ra[e] = a[base + w]; \
        rb[e] = b[base + w]; \
    }
// STAGE_BLOCK(xa, xb, ra, rb): the registers into the workgroup rows xa, xb (pitch KP4).
#define STAGE_BLOCK(xa, xb, ra, rb) \
    [[unroll]] for (uint e = 0; e < LOADS; e++) { \
        const uint w = t + WG * e; \
        xa[(w / D4) * KP4 + w % D4] = ra[e]; \
        xb[(w / D4) * KP4 + w % D4] = rb[e]; \
    }

#if EMULATE_COOPMAT
#include "coopmat_emu.glsl"
#else
#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define MATA coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MATB coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define ACC_ZERO ACC(0.0)
#define LANE gl_SubgroupInvocationID
#define SUBGROUP gl_SubgroupID
#define SHUFFLE_XOR subgroupShuffleXor
#define SUBGROUP_ANY subgroupAny
#define SKIP_BLOCK_IF(c) if (c) continue
#endif

// The mask bias (MASK = 1, bound at MASK_BINDING, after the kernel's other buffers), as
// shaders/mask_bias.wgsl reads it: f32 [Bm, Hm, N, M] with zero strides where it broadcasts, 0 past
// N or M; BIAS(head, row, key) in base 2, like the scores, 0 without a mask.
#if MASK
layout(set = 0, binding = MASK_BINDING, std430) readonly buffer MaskBuf { float mask_buf[]; };
float mask_bias(uint gh, uint i, uint j) {
    const uint n = params.seq;
    const uint m = params.kv_seq;
    if (i >= n || j >= m) {
        return 0.0;
    }
    const uint b = gh / params.heads_per_batch;
    const uint h = gh % params.heads_per_batch;
    return mask_buf[((b * params.mask_bstride + h * params.mask_hstride) * n + i) * m + j];
}
#define BIAS(gh, i, j) (mask_bias(gh, i, j) * LOG2E)
#else
#define BIAS(gh, i, j) 0.0
#endif

// Dropout (DROPOUT = 1; src/dropout.rs, shaders/philox.wgsl): element (i, j) of global head g is
// kept iff word i & 3 of Philox4x32-10(counter (i >> 2, j, g, 0), key (drop_key0, drop_key1)) is
// at least drop_threshold; kept probabilities are multiplied by drop_scale. DROP(g, i, j) is that
// factor; without dropout 1, and no Philox code in the module.
#if DROPOUT
uvec4 philox4x32_10(uvec4 c, uvec2 k) {
    [[dont_unroll]] for (uint r = 0u; r < 10u; r++) {
        if (r > 0u) {
            k += uvec2(0x9E3779B9u, 0xBB67AE85u);
        }
        uint xh, xl, yh, yl;
        umulExtended(0xD2511F53u, c.x, xh, xl);
        umulExtended(0xCD9E8D57u, c.z, yh, yl);
        c = uvec4(yh ^ c.y ^ k.x, yl, xh ^ c.w ^ k.y, xl);
    }
    return c;
}
float drop1(uint g, uint i, uint j) {
    const uvec4 w = philox4x32_10(uvec4(i >> 2u, j, g, 0u), uvec2(params.drop_key0, params.drop_key1));
    return w[i & 3u] >= params.drop_threshold ? params.drop_scale : 0.0;
}
#define DROP(g, i, j) drop1(g, i, j)
#else
#define DROP(g, i, j) 1.0
#endif

#include "coop_layout.glsl"
