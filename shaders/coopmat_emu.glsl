// coopmat_emu.glsl — GL_KHR_cooperative_matrix emulated for the tests, so that the logic of
// tiled_coop_vk.comp (and the plumbing of coop_layout_probe.comp) runs on a device without
// cooperative matrices or 32-wide subgroups: lavapipe in CI. build.rs compiles each of those
// kernels a second time with EMULATE_COOPMAT = 1, which includes this file instead of enabling the
// extension; the kernels' code is otherwise the same text.
//
// What is emulated, and how:
// - A 16 x 16 matrix is an array of 8 elements an invocation: float[8] for the f32 accumulator,
//   float16_t[8] for the f16 A and B operands. Element i of lane l of a 32-wide "subgroup" is at
//   the coordinates the kernels assume (coop_layout.glsl: the accumulator's, and the A operand's
//   through A_OF). The emulation cannot test that assumption (it makes it true); the device's
//   probe does.
// - The "subgroup" is 32 consecutive invocations of the workgroup (lane = index & 31), whatever
//   the device's own subgroup size (lavapipe: 8).
// - coopMatLoad reads each element from its coordinates (row- or column-major, element offset and
//   stride in units of the array's elements as GL_KHR_cooperative_matrix counts them, scalar or
//   4-vector arrays); coopMatStore writes an accumulator row-major into a scalar array.
// - coopMatMulAdd and the lane shuffles exchange through workgroup memory between workgroup
//   barriers (products of f16 exact in f32, sums in f32 in k order: as a matrix unit computes
//   them up to the order of the sums). A barrier must be reached by the whole workgroup, so every
//   call must be in workgroup-uniform control flow; the one non-uniform branch of
//   tiled_coop_vk.comp (a subgroup skipping a key block that lies wholly above its rows) is
//   therefore not taken here: SKIP_BLOCK_IF computes the block instead, fully masked, which
//   changes no value (every P is exp2(-inf) = 0, every rescale factor 1, or 0 on zeros).
//
// Workgroup memory added: 2 x (WG / 32) x 256 f32 (operands of the WG / 32 subgroups) + WG f32
// (shuffles) = 8704 bytes with four subgroups (WG = 128), 17408 with eight.

#define ACC float[8]
#if BF16
// bf16 (BF16 = 1): an operand element is a bf16 value held in an f32 (exactly), wrapped so that
// the overloads below tell it from an accumulator element; bf16 bits travel through the kernels'
// f16 buffers and workgroup arrays as they are (f16 containers: loads and stores move the 16 bits,
// and bf16 values of the test data are normal f16 patterns).
struct EmuBf {
    float v;
};
#define MATA EmuBf[8]
#define MATB EmuBf[8]
// An f32 rounded to bf16 (to nearest, ties to even), as an operand element.
float emu_bf16_round(float x) {
    const uint u = floatBitsToUint(x);
    return uintBitsToFloat((u + 0x7FFFu + ((u >> 16u) & 1u)) & 0xFFFF0000u);
}
EmuBf emu_bf16(float x) {
    return EmuBf(emu_bf16_round(x));
}
// Two f32 rounded to bf16, as the bits of a stored pair in an f16 container.
f16vec2 emu_bf16_pair(float a, float b) {
    return unpackFloat2x16((floatBitsToUint(emu_bf16_round(a)) >> 16u)
        | (floatBitsToUint(emu_bf16_round(b)) & 0xFFFF0000u));
}
// The bf16 whose bits an f16 container holds.
EmuBf emu_bf16_of(float16_t x) {
    return EmuBf(uintBitsToFloat(packFloat2x16(f16vec2(x, float16_t(0.0))) << 16u));
}
#else
#define MATA float16_t[8]
#define MATB float16_t[8]
#endif
#define ACC_ZERO float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
#define LANE (gl_LocalInvocationIndex & 31u)
#define SUBGROUP (gl_LocalInvocationIndex >> 5u)
#define SHUFFLE_XOR emu_shuffle_xor
// Whether any lane of the subgroup holds c: here the lane's own c, which a kernel may only use to
// skip work that would change nothing in the lanes without it (tiled_coop_vk.comp's O rescale by
// alpha = 1).
#define SUBGROUP_ANY(c) (c)
#define SKIP_BLOCK_IF(c)

#include "coop_layout.glsl"

// The (row, column) of element i of this lane: the accumulator's (f32) as the kernels assume it,
// the A operand's (f16) likewise; B operands (f16 too) are laid out as A ones, which no kernel sees
// (they only load them and multiply).
uvec2 emu_rc_of(float x, uint i) { return acc_rc(i); }
#if BF16
uvec2 emu_rc_of(EmuBf x, uint i) { return a_rc(i); }
#else
uvec2 emu_rc_of(float16_t x, uint i) { return a_rc(i); }
#endif

// Scalars and 4-vectors of the arrays a matrix is loaded from: their width, and component j.
uint emu_width(float x) { return 1u; }
uint emu_width(float16_t x) { return 1u; }
uint emu_width(f16vec4 x) { return 4u; }
float emu_comp(float x, uint j) { return x; }
#if BF16
EmuBf emu_comp(float16_t x, uint j) { return emu_bf16_of(x); }
EmuBf emu_comp(f16vec4 x, uint j) { return emu_bf16_of(x[j]); }
#else
float16_t emu_comp(float16_t x, uint j) { return x; }
float16_t emu_comp(f16vec4 x, uint j) { return x[j]; }
#endif

// coopMatLoad(M, array, element, stride, layout): element (r, c) at component
// (element + r * stride) * width + c (row-major) or (element + c * stride) * width + r.
#define coopMatLoad(M, A, E, S, L) emu_load_##L(M, A, E, S)
#define emu_load_gl_CooperativeMatrixLayoutRowMajor(M, A, E, S) emu_load(M, A, E, S, false)
#define emu_load_gl_CooperativeMatrixLayoutColumnMajor(M, A, E, S) emu_load(M, A, E, S, true)
#define emu_load(M, A, E, S, COLMAJOR)                                                  \
    [[dont_unroll]] for (uint i_ = 0u; i_ < 8u; i_++) {                                 \
        const uvec2 rc_ = emu_rc_of(M[0], i_);                                          \
        const uint w_ = emu_width(A[0]);                                                \
        const uint x_ = COLMAJOR ? (uint(E) + rc_.y * uint(S)) * w_ + rc_.x             \
                                 : (uint(E) + rc_.x * uint(S)) * w_ + rc_.y;            \
        M[i_] = emu_comp(A[x_ / w_], x_ % w_);                                          \
    }

// coopMatStore(M, array, element, stride, layout): row-major into a scalar array, element (r, c)
// at element + r * stride + c (the only store the kernels make: gemm_coop_vk.comp's scores).
#define coopMatStore(M, A, E, S, L) emu_store_##L(M, A, E, S)
#define emu_store_gl_CooperativeMatrixLayoutRowMajor(M, A, E, S)                        \
    [[dont_unroll]] for (uint i_ = 0u; i_ < 8u; i_++) {                                 \
        const uvec2 rc_ = emu_rc_of(M[0], i_);                                          \
        A[uint(E) + rc_.x * uint(S) + rc_.y] = M[i_];                                   \
    }

#ifndef WG
#define WG 128  // coop_vk_common.glsl's default, for a kernel that includes this file alone
#endif
shared float emu_a[(WG / 32) * 256];
shared float emu_b[(WG / 32) * 256];

// D = A B + C for this lane's 8 elements of D.
#if BF16
float[8] coopMatMulAdd(EmuBf a[8], EmuBf b[8], float c[8]) {
    const uint at = SUBGROUP * 256u;
    barrier();  // the previous call's readers are done
    [[dont_unroll]] for (uint i = 0u; i < 8u; i++) {
        const uvec2 rc = a_rc(i);
        emu_a[at + 16u * rc.x + rc.y] = a[i].v;
        emu_b[at + 16u * rc.x + rc.y] = b[i].v;
    }
#else
float[8] coopMatMulAdd(float16_t a[8], float16_t b[8], float c[8]) {
    const uint at = SUBGROUP * 256u;
    barrier();  // the previous call's readers are done
    [[dont_unroll]] for (uint i = 0u; i < 8u; i++) {
        const uvec2 rc = a_rc(i);
        emu_a[at + 16u * rc.x + rc.y] = float(a[i]);
        emu_b[at + 16u * rc.x + rc.y] = float(b[i]);
    }
#endif
    barrier();
    float d[8];
    [[dont_unroll]] for (uint i = 0u; i < 8u; i++) {
        const uvec2 rc = acc_rc(i);
        float s = c[i];
        [[dont_unroll]] for (uint k = 0u; k < 16u; k++) {
            s += emu_a[at + 16u * rc.x + k] * emu_b[at + 16u * k + rc.y];
        }
        d[i] = s;
    }
    return d;
}

shared float emu_x[WG];

// subgroupShuffleXor within the 32-lane group (mask < 32).
float emu_shuffle_xor(float x, uint mask) {
    barrier();
    emu_x[gl_LocalInvocationIndex] = x;
    barrier();
    return emu_x[gl_LocalInvocationIndex ^ mask];
}
