// tiled_cm2.comp — `tiled-coop-vk`'s forward on VK_NV_cooperative_matrix2 (GL_NV_cooperative_matrix2):
// FlashAttention-2 with workgroup-scope matrices, the driver choosing how they are held, staged
// and multiplied. Where tiled_coop_vk.comp (GL_KHR_cooperative_matrix) stages K and V in workgroup
// memory itself, reads the accumulators' elements by an assumed layout and reduces rows by
// subgroup shuffles, this kernel says what, not how:
//   - Q, K and V come straight from device memory as BR x D, D x BC (Kᵀ, a transposing tensor
//     view) and BC x D matrices (coopMatLoadTensorNV, with bounds: 0 past N or M);
//   - row maxima and sums are coopMatReduceNV over rows, the scale, mask, dropout and exp2 are
//     per-element functions (coopMatPerElementNV), P becomes the A operand of P·V by conversion;
//   - O is stored through a tensor layout bounded by N (rows past it are not written).
// No element layout is assumed, so the layout probe does not gate it. f16 or bf16 (BF16 = 1)
// storage, f32 accumulators, HEAD_D = 64, 128 or 256, BR query rows a workgroup of WG_SIZE
// invocations (128 or 256), BC keys a block (build.rs: src/kernels/tiled_coop_vk_shapes.rs,
// CM2_DEVICE).
//
// Defined by build.rs: BF16, HEAD_D, BR, BC, ROWSUM_MMA (1: the row sums as P times a block of
// ones on the matrix units, as llama.cpp's flash_attn_cm2.comp takes them; 0: a row reduction of
// the f32 P), LSE (1: writes L, the row logsumexp in base 2, for
// the backward), MASK / MASK_BINDING and DROPOUT as in tiled_coop_vk.comp. Bindings are
// tiled_coop_vk.comp's, so the host dispatches either kernel the same way.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix2 : require

#ifndef EMULATE_COOPMAT
#define EMULATE_COOPMAT 0
#endif
#include "coop_vk_common.glsl"

#ifndef WG_SIZE
#define WG_SIZE 128
#endif
layout(local_size_x = WG_SIZE, local_size_y = 1, local_size_z = 1) in;

layout(set = 0, binding = 1, std430) readonly buffer QBuf { ELEM q[]; };
layout(set = 0, binding = 2, std430) readonly buffer KBuf { ELEM k[]; };
layout(set = 0, binding = 3, std430) readonly buffer VBuf { ELEM v[]; };
layout(set = 0, binding = 4, std430) buffer OBuf { ELEM o[]; };
#if LSE
// shaders/tiled_lse.wgsl's L: m + log2(sum) in base 2, +inf for a row with no allowed key.
layout(set = 0, binding = 5, std430) buffer LBuf { float lse[]; };
#endif

#define WACC(R, C) coopmat<float, gl_ScopeWorkgroup, R, C, gl_MatrixUseAccumulator>
#define WA(R, C) coopmat<ELEM, gl_ScopeWorkgroup, R, C, gl_MatrixUseA>
#define WB(R, C) coopmat<ELEM, gl_ScopeWorkgroup, R, C, gl_MatrixUseB>

// The running maximum starts at -FLT_MAX / 2, not -inf: exp2(m_old - m_new) stays a number (0)
// for a row's first allowed block, and a row with no allowed key keeps m = -FLT_MAX / 2, sum 0.
const float M0 = -1.7014117e38;

float maxOf(const in float a, const in float b) { return max(a, b); }
float sumOf(const in float a, const in float b) { return a + b; }
float first(const in float a, const in float b) { return a; }

// S in base 2 (times scale log2 e, plus the mask's bias), -inf where the key is past M or above
// the causal diagonal. `edge`: the block crosses the diagonal or the last key (or has a mask).
float scoreOf(const in uint r, const in uint c, const in float s, const in uint gh, const in uint i0,
              const in uint j0, const in uint edge) {
    const float x = s * (params.scale * LOG2E);
    if (edge == 0u) {
        return x;
    }
    const uint row = i0 + r;
    const uint col = j0 + c;
    const bool ok = col < params.kv_seq
        && (params.causal == 0u || int(col) <= int(row) + params.causal_off);
    return ok ? x + BIAS(gh, row, col) : uintBitsToFloat(params.neg_inf_bits);
}

float exp2Of(const in uint r, const in uint c, const in float x) { return exp2(x); }

// P times the dropout factor (the row sum is taken before: it does not see dropout).
float dropOf(const in uint r, const in uint c, const in float p, const in uint gh, const in uint i0,
             const in uint j0) {
    return p * DROP(gh, i0 + r, j0 + c);
}

#if LSE
// Column 0 of each row r < N writes the row's L.
float storeL(const in uint r, const in uint c, const in float x, const in uint gh, const in uint i0) {
    if (c == 0u && i0 + r < params.seq) {
        lse[gh * params.seq + i0 + r] = x;
    }
    return x;
}
#endif

void main() {
    const uint n = params.seq;
    const uint nk = params.kv_seq;
    const uint head = params.head_offset + gl_WorkGroupID.y;
    const uint i0 = gl_WorkGroupID.x * BR;
    const bool causal = params.causal != 0u;
    const int off = params.causal_off;
    const uint kvh = head / params.kv_group;

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tq =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tq = setTensorLayoutDimensionNV(tq, n, D);
    tq = setTensorLayoutStrideNV(tq, D, 1);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tk =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tk = setTensorLayoutDimensionNV(tk, nk, D);
    tk = setTensorLayoutStrideNV(tk, D, 1);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    WA(BR, D) qa;
    coopMatLoadTensorNV(qa, q, head * n * D, sliceTensorLayoutNV(tq, i0, BR, 0, D));

    WACC(BR, D) acc = WACC(BR, D)(0.0);
    WACC(BR, BC) m = WACC(BR, BC)(M0);  // running row maxima (base 2), smeared over columns
    WACC(BR, BC) l = WACC(BR, BC)(0.0); // running row sums relative to m, smeared
#if ROWSUM_MMA
    const WB(BC, BC) ones = WB(BC, BC)(1.0);
#endif

    // The keys any row of the workgroup may see (all M, or up to the causal diagonal).
    uint kv_end = nk;
    if (causal) {
        kv_end = uint(clamp(int(i0 + BR) + off, 0, int(nk)));
    }
    const uint kvbase = kvh * nk * D;

    for (uint j0 = 0; j0 < kv_end; j0 += BC) {
        WB(D, BC) kt;
        coopMatLoadTensorNV(kt, k, kvbase, sliceTensorLayoutNV(tk, j0, BC, 0, D), transposed);
        WACC(BR, BC) s = coopMatMulAdd(qa, kt, WACC(BR, BC)(0.0));
        const uint edge = (MASK != 0 || j0 + BC > nk || (causal && int(j0 + BC - 1u) > int(i0) + off)) ? 1u : 0u;
        coopMatPerElementNV(s, s, scoreOf, head, i0, j0, edge);

        WACC(BR, BC) mx;
        coopMatReduceNV(mx, s, gl_CooperativeMatrixReduceRowNV, maxOf);
        WACC(BR, BC) mnew;
        [[unroll]] for (int e = 0; e < mnew.length(); e++) {
            mnew[e] = max(m[e], mx[e]);
        }
        WACC(BR, BC) alpha;
        coopMatPerElementNV(alpha, m - mnew, exp2Of);
        m = mnew;
        WACC(BR, BC) p;
        coopMatPerElementNV(p, s - m, exp2Of);
        WA(BR, BC) pa = WA(BR, BC)(p);
#if ROWSUM_MMA
        // The row sums of P as rounded for P·V, on the matrix units (P times a block of ones).
        l = alpha * l + coopMatMulAdd(pa, ones, WACC(BR, BC)(0.0));
#else
        WACC(BR, BC) ps;
        coopMatReduceNV(ps, p, gl_CooperativeMatrixReduceRowNV, sumOf);
        l = alpha * l + ps;
#endif
#if DROPOUT
        coopMatPerElementNV(p, p, dropOf, head, i0, j0);
        pa = WA(BR, BC)(p);
#endif
        WACC(BR, D) alpha_d;
        coopMatReduceNV(alpha_d, alpha, gl_CooperativeMatrixReduceRowNV, first);
        acc = acc * alpha_d;

        WB(BC, D) vb;
        coopMatLoadTensorNV(vb, v, kvbase, sliceTensorLayoutNV(tk, j0, BC, 0, D));
        acc = coopMatMulAdd(pa, vb, acc);
    }

    // O = acc / row sum (0 for a row with no allowed key).
    WACC(BR, D) l_d;
    coopMatReduceNV(l_d, l, gl_CooperativeMatrixReduceRowNV, first);
    [[unroll]] for (int e = 0; e < l_d.length(); e++) {
        l_d[e] = l_d[e] > 0.0 ? 1.0 / l_d[e] : 0.0;
    }
    coopmat<ELEM, gl_ScopeWorkgroup, BR, D, gl_MatrixUseAccumulator> out_o =
        coopmat<ELEM, gl_ScopeWorkgroup, BR, D, gl_MatrixUseAccumulator>(acc * l_d);
    coopMatStoreTensorNV(out_o, o, head * n * D, sliceTensorLayoutNV(tq, i0, BR, 0, D));
#if LSE
    // L = m + log2(sum), +inf for a row with no allowed key.
    [[unroll]] for (int e = 0; e < l.length(); e++) {
        l[e] = l[e] > 0.0 ? m[e] + log2(l[e]) : uintBitsToFloat(0x7f800000u);
    }
    coopMatPerElementNV(l, l, storeL, head, i0);
#endif
}
