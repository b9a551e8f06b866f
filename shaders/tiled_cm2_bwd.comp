// tiled_cm2_bwd.comp — `tiled-coop-cm2`'s backward passes on VK_NV_cooperative_matrix2: the
// FlashAttention-2 backward of tiled_coop_vk_bwd.comp (same bindings, same L and D, same
// formulas), said with workgroup-scope matrices instead of staged blocks and assumed layouts:
//   KV = 1 (bwd_kv): a workgroup owns BK keys of one K/V head and walks the query blocks of BQ
//     rows of each query head of its group (from the causal diagonal): Sᵀ = K Qᵀ, Pᵀ = exp2(Sᵀ
//     scale log2 e - L) (L per column, a per-element function reading it), dV += (Pᵀ ∘ Z) dO,
//     dPᵀ = V dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ ∘ Z - D) scale, dK += dSᵀ Q;
//   KV = 0 (bwd_q): a workgroup owns BQ rows of one head and walks the key blocks of BK keys (up to
//     the causal diagonal): S = Q Kᵀ, P, dP = dO Vᵀ, dS = P ∘ (dP ∘ Z - D) scale, dQ += dS K.
// Z is the dropout factor (1 without dropout). K, V (bwd_kv) and Q, dO (bwd_q) are loaded once and
// held; the walked blocks come straight from device memory by tensor layouts with bounds (0 past
// N or M), transposed through a tensor view where the product needs it. Gradients are stored
// through layouts bounded by M (N).
//
// Defined by build.rs: KV, BF16, HEAD_D, BQ, BK, MASK / MASK_BINDING, DROPOUT.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix2 : require

#ifndef EMULATE_COOPMAT
#define EMULATE_COOPMAT 0
#endif
#include "coop_vk_common.glsl"

layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;

// kernels/tiled_bwd.rs `bindings`: Q, K, V, dO, L, D, then the gradients.
layout(set = 0, binding = 1, std430) readonly buffer QBuf { ELEM q[]; };
layout(set = 0, binding = 2, std430) readonly buffer KBuf { ELEM k[]; };
layout(set = 0, binding = 3, std430) readonly buffer VBuf { ELEM v[]; };
layout(set = 0, binding = 4, std430) readonly buffer GBuf { ELEM g[]; };  // dO
layout(set = 0, binding = 5, std430) readonly buffer LBuf { float lse[]; };
layout(set = 0, binding = 6, std430) readonly buffer DBuf { float delta[]; };
#if KV
layout(set = 0, binding = 7, std430) buffer DkBuf { ELEM dk[]; };
layout(set = 0, binding = 8, std430) buffer DvBuf { ELEM dv[]; };
#else
layout(set = 0, binding = 7, std430) buffer DqBuf { ELEM dq[]; };
#endif

#define WACC(R, C) coopmat<float, gl_ScopeWorkgroup, R, C, gl_MatrixUseAccumulator>
#define WA(R, C) coopmat<ELEM, gl_ScopeWorkgroup, R, C, gl_MatrixUseA>
#define WB(R, C) coopmat<ELEM, gl_ScopeWorkgroup, R, C, gl_MatrixUseB>

// P of (row, key) from the raw score s: exp2(s scale log2 e + bias - L[row]), 0 where the key is
// past M, the row past N, or the key above the causal diagonal.
float probOf(const float s, const uint gh, const uint row, const uint key) {
    const uint n = params.seq;
    if (row >= n || key >= params.kv_seq
        || (params.causal != 0u && int(key) > int(row) + params.causal_off)) {
        return 0.0;
    }
    return exp2(s * (params.scale * LOG2E) + BIAS(gh, row, key) - lse[gh * n + row]);
}

#if KV
// Transposed tiles: element (r, c) is key j0 + r, row i0 + c.
float pT(const in uint r, const in uint c, const in float s, const in uint gh, const in uint i0,
         const in uint j0) {
    return probOf(s, gh, i0 + c, j0 + r);
}
#else
float pN(const in uint r, const in uint c, const in float s, const in uint gh, const in uint i0,
         const in uint j0) {
    return probOf(s, gh, i0 + r, j0 + c);
}
#endif

// Z (the dropout factor) and D of each element's row, as matrices the shape of dP (per-element
// functions), so that dS = P (dP Z - D) scale is element-wise arithmetic on matrices.
#if KV
float zT(const in uint r, const in uint c, const in float x, const in uint gh, const in uint i0,
         const in uint j0) {
    return DROP(gh, i0 + c, j0 + r);
}
float dT(const in uint r, const in uint c, const in float x, const in uint gh, const in uint i0) {
    const uint row = i0 + c;
    return row < params.seq ? delta[gh * params.seq + row] : 0.0;
}
#else
float zN(const in uint r, const in uint c, const in float x, const in uint gh, const in uint i0,
         const in uint j0) {
    return DROP(gh, i0 + r, j0 + c);
}
float dN(const in uint r, const in uint c, const in float x, const in uint gh, const in uint i0) {
    const uint row = i0 + r;
    return row < params.seq ? delta[gh * params.seq + row] : 0.0;
}
#endif

void main() {
    const uint n = params.seq;
    const uint nk = params.kv_seq;
    const bool causal = params.causal != 0u;
    const int off = params.causal_off;  // row i sees keys j <= i + off

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tq =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tq = setTensorLayoutDimensionNV(tq, n, D);
    tq = setTensorLayoutStrideNV(tq, D, 1);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tk =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tk = setTensorLayoutDimensionNV(tk, nk, D);
    tk = setTensorLayoutStrideNV(tk, D, 1);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

#if KV
    // wg.y is a K/V head; its kv_group query heads are walked in turn into the same accumulators.
    const uint kvh = params.head_offset / params.kv_group + gl_WorkGroupID.y;
    const uint j0 = gl_WorkGroupID.x * BK;  // the workgroup's first key
    const uint kvbase = kvh * nk * D;
    WA(BK, D) ka;
    WA(BK, D) va;
    coopMatLoadTensorNV(ka, k, kvbase, sliceTensorLayoutNV(tk, j0, BK, 0, D));
    coopMatLoadTensorNV(va, v, kvbase, sliceTensorLayoutNV(tk, j0, BK, 0, D));
    WACC(BK, D) dka = WACC(BK, D)(0.0);
    WACC(BK, D) dva = WACC(BK, D)(0.0);

    // Causal: the first block of rows that sees key j0 (row i sees keys up to i + off).
    uint first = 0u;
    if (causal) {
        first = uint(clamp(int(j0) - off, 0, int(n))) / BQ * BQ;
    }
    for (uint r = 0; r < params.kv_group; r++) {
        const uint head = kvh * params.kv_group + r;
        const uint qbase = head * n * D;
        for (uint i0 = first; i0 < n; i0 += BQ) {
            WB(D, BQ) qt;
            WB(D, BQ) gt;
            coopMatLoadTensorNV(qt, q, qbase, sliceTensorLayoutNV(tq, i0, BQ, 0, D), transposed);
            coopMatLoadTensorNV(gt, g, qbase, sliceTensorLayoutNV(tq, i0, BQ, 0, D), transposed);
            WACC(BK, BQ) st = coopMatMulAdd(ka, qt, WACC(BK, BQ)(0.0));
            WACC(BK, BQ) pt;
            coopMatPerElementNV(pt, st, pT, head, i0, j0);
            WACC(BK, BQ) dpt = coopMatMulAdd(va, gt, WACC(BK, BQ)(0.0));
#if DROPOUT
            WACC(BK, BQ) z;
            coopMatPerElementNV(z, pt, zT, head, i0, j0);
            dpt = dpt * z;
            WA(BK, BQ) pa = WA(BK, BQ)(pt * z);
#else
            WA(BK, BQ) pa = WA(BK, BQ)(pt);
#endif
            WACC(BK, BQ) dd;
            coopMatPerElementNV(dd, pt, dT, head, i0);
            WACC(BK, BQ) dst = pt * (dpt - dd) * params.scale;
            WA(BK, BQ) dsa = WA(BK, BQ)(dst);

            WB(BQ, D) gb;
            WB(BQ, D) qb;
            coopMatLoadTensorNV(gb, g, qbase, sliceTensorLayoutNV(tq, i0, BQ, 0, D));
            coopMatLoadTensorNV(qb, q, qbase, sliceTensorLayoutNV(tq, i0, BQ, 0, D));
            dva = coopMatMulAdd(pa, gb, dva);
            dka = coopMatMulAdd(dsa, qb, dka);
        }
    }
    coopmat<ELEM, gl_ScopeWorkgroup, BK, D, gl_MatrixUseAccumulator> out_k =
        coopmat<ELEM, gl_ScopeWorkgroup, BK, D, gl_MatrixUseAccumulator>(dka);
    coopmat<ELEM, gl_ScopeWorkgroup, BK, D, gl_MatrixUseAccumulator> out_v =
        coopmat<ELEM, gl_ScopeWorkgroup, BK, D, gl_MatrixUseAccumulator>(dva);
    coopMatStoreTensorNV(out_k, dk, kvbase, sliceTensorLayoutNV(tk, j0, BK, 0, D));
    coopMatStoreTensorNV(out_v, dv, kvbase, sliceTensorLayoutNV(tk, j0, BK, 0, D));
#else
    const uint head = params.head_offset + gl_WorkGroupID.y;
    const uint i0 = gl_WorkGroupID.x * BQ;  // the workgroup's first row
    const uint qbase = head * n * D;
    const uint kvbase = (head / params.kv_group) * nk * D;
    WA(BQ, D) qa;
    WA(BQ, D) ga;
    coopMatLoadTensorNV(qa, q, qbase, sliceTensorLayoutNV(tq, i0, BQ, 0, D));
    coopMatLoadTensorNV(ga, g, qbase, sliceTensorLayoutNV(tq, i0, BQ, 0, D));
    WACC(BQ, D) dqa = WACC(BQ, D)(0.0);
    WACC(BQ, BK) dd;
    coopMatPerElementNV(dd, WACC(BQ, BK)(0.0), dN, head, i0);

    // The keys any row of the workgroup may see (all M, or up to the causal diagonal).
    uint kv_end = nk;
    if (causal) {
        kv_end = uint(clamp(int(i0 + BQ) + off, 0, int(nk)));
    }
    for (uint j0 = 0; j0 < kv_end; j0 += BK) {
        WB(D, BK) kt;
        WB(D, BK) vt;
        coopMatLoadTensorNV(kt, k, kvbase, sliceTensorLayoutNV(tk, j0, BK, 0, D), transposed);
        coopMatLoadTensorNV(vt, v, kvbase, sliceTensorLayoutNV(tk, j0, BK, 0, D), transposed);
        WACC(BQ, BK) s = coopMatMulAdd(qa, kt, WACC(BQ, BK)(0.0));
        WACC(BQ, BK) p;
        coopMatPerElementNV(p, s, pN, head, i0, j0);
        WACC(BQ, BK) dp = coopMatMulAdd(ga, vt, WACC(BQ, BK)(0.0));
#if DROPOUT
        WACC(BQ, BK) z;
        coopMatPerElementNV(z, p, zN, head, i0, j0);
        dp = dp * z;
#endif
        WACC(BQ, BK) ds = p * (dp - dd) * params.scale;
        WA(BQ, BK) dsa = WA(BQ, BK)(ds);
        WB(BK, D) kb;
        coopMatLoadTensorNV(kb, k, kvbase, sliceTensorLayoutNV(tk, j0, BK, 0, D));
        dqa = coopMatMulAdd(dsa, kb, dqa);
    }
    coopmat<ELEM, gl_ScopeWorkgroup, BQ, D, gl_MatrixUseAccumulator> out_q =
        coopmat<ELEM, gl_ScopeWorkgroup, BQ, D, gl_MatrixUseAccumulator>(dqa);
    coopMatStoreTensorNV(out_q, dq, qbase, sliceTensorLayoutNV(tq, i0, BQ, 0, D));
#endif
}
