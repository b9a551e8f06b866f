// probe_coop.comp — the matrix units' own f16 peak (or with BF16 = 1 their bf16 peak) for `probe`
// (src/probe.rs): each 32-wide subgroup of a 128-invocation workgroup runs CHAINS independent
// chains of 16 x 16 x 16 coopMatMulAdd (f16 or bf16 A and B, coop_vk_common.glsl's ELEM; f32
// accumulators) for params.seq iterations, with nothing read
// from device memory in the loop; the sum of its accumulators is stored only if it equals a
// value it never reaches (probe_fma.wgsl's guard), which keeps every product alive.
// FLOPs per workgroup: 4 subgroups x CHAINS x iterations x 2 x 16^3. Built like every GLSL kernel
// here (build.rs): on the device's cooperative matrices and, with EMULATE_COOPMAT = 1, on
// coopmat_emu.glsl, which the tests run on lavapipe to check the plumbing (not the rate).
#version 450
#extension GL_GOOGLE_include_directive : require

#define MASK 0
#define DROPOUT 0
#include "coop_vk_common.glsl"

layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;

layout(set = 0, binding = 1, std430) buffer Sink { float sink[]; };

const uint CHAINS = 4;

shared ELEM seed[256];

void main() {
    const uint t = gl_LocalInvocationIndex;
    for (uint e = t; e < 256u; e += 128u) {
        // Small values: 16^3 products a step stay far from f16's and f32's limits.
        const float x = float(e % 7u) * 0.001;
        seed[e] = TO_ELEM2(x, x).x;  // the storage element (the emulated bf16 build: its bits)
    }
    barrier();
    MATA a;
    MATB b;
    coopMatLoad(a, seed, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(b, seed, 0, 16, gl_CooperativeMatrixLayoutColumnMajor);
    ACC acc[CHAINS];
    [[unroll]] for (uint c = 0; c < CHAINS; c++) {
        acc[c] = ACC_ZERO;
    }
    for (uint it = 0; it < params.seq; it++) {
        [[unroll]] for (uint c = 0; c < CHAINS; c++) {
            acc[c] = coopMatMulAdd(a, b, acc[c]);
        }
    }
    float s = 0.0;
    [[unroll]] for (uint c = 0; c < CHAINS; c++) {
        [[unroll]] for (uint i = 0; i < 8; i++) {
            s += acc[c][i];
        }
    }
    if (s == -1.0) {
        sink[0] = s;
    }
}
