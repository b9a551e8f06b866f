// coop_layout_probe.comp — which elements of a 16 x 16 cooperative matrix each invocation of a
// 32-wide subgroup holds, for the f32 accumulator and the f16 A operand: the layout that
// tiled_coop_vk.comp assumes (coop_layout.glsl) and src/kernels/tiled_coop_vk.rs checks before it
// offers the variant.
// The matrices are loaded from a row-major index table (element (r, c) = 16r + c, exact in f16),
// so each element read back names its own coordinates. Lane l writes 18 floats at 18l: the two
// `length()`s, then up to 8 accumulator elements and up to 8 A elements (-1 past the length).
// With EMULATE_COOPMAT = 1 (build.rs) it runs on coopmat_emu.glsl instead: the tests' check of
// the probe's plumbing (the emulation holds the assumed layout by construction). With BF16 = 1
// (device build only) the A operand is bf16 (GL_EXT_bfloat16; 16r + c is exact in bf16 too): the
// layout tiled_coop_vk.comp's bf16 builds assume.
#version 450
#if EMULATE_COOPMAT
#extension GL_GOOGLE_include_directive : require
#else
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#endif
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#if BF16
#extension GL_EXT_bfloat16 : require
#define AELEM bfloat16_t
#else
#define AELEM float16_t
#endif

layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;

// Binding 1, as every plan's first storage buffer (the runner's layout puts the Params uniform at
// 0, which the probe does not read).
layout(set = 0, binding = 1, std430) buffer Out { float result[]; };

shared float index_f32[256];
shared AELEM index_f16[256];

#if EMULATE_COOPMAT
#include "coopmat_emu.glsl"
#else
#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define MATA coopmat<AELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define LANE gl_SubgroupInvocationID
#endif

void main() {
    const uint lane = LANE;
    for (uint e = lane; e < 256u; e += 32u) {
        index_f32[e] = float(e);
        index_f16[e] = AELEM(float(e));
    }
    barrier();
    ACC c;
    MATA a;
    coopMatLoad(c, index_f32, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(a, index_f16, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    const uint o = 18u * lane;
    result[o] = float(c.length());
    result[o + 1u] = float(a.length());
    for (int i = 0; i < 8; i++) {
        result[o + 2u + uint(i)] = i < c.length() ? c[i] : -1.0;
        result[o + 10u + uint(i)] = i < a.length() ? float(a[i]) : -1.0;
    }
}
