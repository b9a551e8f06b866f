// mask.wgsl — the causal mask, and the copy that an out-of-place masked_fill costs.
//
// PyTorch's `S.masked_fill(mask, -inf)` is a clone of S followed by an in-place fill of the clone:
// two kernels, and a second N x N buffer. That copy is why the naive trace shows six kernels for
// five steps. `unfused` therefore dispatches `copy` (S -> S2, a full read and write of N x N) and
// then `in_place` on S2; `unfused-inplace` dispatches `in_place` on S directly.
//
// `in_place` writes -inf above the diagonal only and reads nothing when causal is the only mask: the
// causal mask is an index test, not a tensor. With no mask (non-causal) it touches no memory at all,
// but it is still dispatched so the trace keeps its shape; `copy` with no mask is still a full copy,
// as masked_fill with an all-False mask would be. With an explicit mask or key padding (mask
// prelude shaders/mask_bias.wgsl, binding 2) `in_place` adds the normalized bias to every score:
// one read of the bias and a read + write of S. S holds this dispatch's chunk of heads only.

@group(0) @binding(1) var<storage, read_write> s: array<f32>;
@group(0) @binding(2) var<storage, read_write> s_out: array<f32>;

fn blocked(idx: u32) -> bool {
    let n = params.seq;
    let j = idx % n;
    let i = (idx / n) % n;
    return params.causal != 0u && j > i;
}

// Bias of local element idx (head of the chunk, row, key).
fn bias(idx: u32) -> f32 {
    let n = params.seq;
    return mask_bias(params.head_offset + idx / (n * n), (idx / n) % n, idx % n);
}

@compute @workgroup_size(256, 1, 1)
fn copy(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total = params.heads * params.seq * params.seq;
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx < total) {
        s_out[idx] = s[idx];
    }
}

@compute @workgroup_size(256, 1, 1)
fn in_place(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let total = params.heads * params.seq * params.seq;
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx < total) {
        if (blocked(idx)) {
            s[idx] = neg_inf();
        } else if (HAS_MASK) {
            s[idx] = s[idx] + bias(idx);
        }
    }
}
