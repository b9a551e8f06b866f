// coop_layout.glsl — the element layout of 16 x 16 cooperative matrices that the GLSL kernels
// (tiled_coop_vk.comp, tiled_coop_vk_bwd.comp) assume, in one place: coop_vk_common.glsl includes
// it for the kernels, coopmat_emu.glsl for the emulation (which makes it true), and
// src/kernels/tiled_coop_vk.rs (`assumed_acc`, `assumed_a`) states it again for the host, which
// checks it on the device (coop_layout_probe.comp) before it offers the kernels.
//
// GL_KHR_cooperative_matrix gives each invocation its elements of a matrix (`s[i]`, `length()`)
// but not their coordinates, which are the driver's. On the H200's driver (probed in lease 19,
// results/EXPERIMENTS.md, v36-coop-vk-layout) lane l = 4g + t holds element i of the f32
// accumulator at
//     row = g + 8 (i >> 2),   column = 2t + (i & 1) + 8 ((i >> 1) & 1),
// the rows' halves first, not mma.m16n8k16's column halves first. So the four lanes 4g .. 4g + 3
// share rows g and g + 8 (row reductions are two shuffles). The f16 A operand holds the same
// coordinates in the order A_OF gives: the accumulator's element i is the A operand's element
// A_OF(i), so P and dS go from one to the other element for element, in registers. On the H200
// the order is the accumulator's own (A_OF(i) = i; the probe refused mma.m16n8k16's A-fragment
// order in the same lease).
#ifndef COOP_LAYOUT_GLSL
#define COOP_LAYOUT_GLSL

// The A operand's element at the coordinates of the accumulator's element i (an involution).
#define A_OF(i) (i)

// Which of this lane's two rows (g or g + 8) the accumulator's element i lies in.
uint frag_half(uint i) {
    return i >> 2u;
}
// The row of this lane's half h (0 or 1).
uint half_row(uint h) {
    return (LANE >> 2u) + 8u * h;
}
uint frag_row(uint i) {
    return half_row(frag_half(i));
}
uint frag_col(uint i) {
    return 2u * (LANE & 3u) + (i & 1u) + 8u * ((i >> 1u) & 1u);
}
// (row, column) of element i of this lane's accumulator, and of its A operand.
uvec2 acc_rc(uint i) {
    return uvec2(frag_row(i), frag_col(i));
}
uvec2 a_rc(uint i) {
    return acc_rc(A_OF(i));
}
#endif
