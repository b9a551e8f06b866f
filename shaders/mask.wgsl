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

// Every kernel moves words of four scores (`sw`, from the scores prelude scores_*.wgsl: f32 or
// 16 bits), one per thread (buffers are padded to 16 bytes by the runner).

@group(0) @binding(1) var<storage, read_write> s: array<sw>;
@group(0) @binding(2) var<storage, read_write> s_out: array<sw>;

fn total4() -> u32 {
    return (params.heads * params.seq * params.kv_seq + 3u) / 4u;
}

// Which of the 4 elements starting at flat index f are above the diagonal (causal only).
fn blocked4(f: u32) -> vec4<bool> {
    if (params.causal == 0u) {
        return vec4<bool>(false);
    }
    let n = params.seq;
    let m = params.kv_seq;
    let e = vec4<u32>(f) + vec4<u32>(0u, 1u, 2u, 3u);
    let j = e % vec4<u32>(m);
    let i = (e / vec4<u32>(m)) % vec4<u32>(n);
    // j > i + causal_off (top-left: 0; bottom-right: M - N), in signed arithmetic.
    return vec4<i32>(j) > vec4<i32>(i) + vec4<i32>(params.causal_off);
}

// Bias of local element idx (head of the chunk, row, key).
fn bias(idx: u32) -> f32 {
    let n = params.seq;
    let m = params.kv_seq;
    return mask_bias(params.head_offset + idx / (n * m), (idx / m) % n, idx % m);
}

@compute @workgroup_size(256, 1, 1)
fn copy(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx < total4()) {
        s_out[idx] = s[idx];
    }
}

@compute @workgroup_size(256, 1, 1)
fn in_place(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let idx = linear_group(wg, nwg) * 256u + li;
    if (idx >= total4()) {
        return;
    }
    let b = blocked4(idx * 4u);
    if (HAS_MASK) {
        // Bias on every score (padding past the last element gets none), -inf where causal blocks.
        let f = idx * 4u;
        let total = params.heads * params.seq * params.kv_seq;
        var bv = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c++) {
            if (f + c < total) {
                bv[c] = bias(f + c);
            }
        }
        s[idx] = s_narrow(select(s_wide(s[idx]) + bv, vec4<f32>(neg_inf()), b));
    } else if (all(b)) {
        s[idx] = s_narrow(vec4<f32>(neg_inf())); // wholly above the diagonal: write, no read
    } else if (any(b)) {
        s[idx] = s_narrow(select(s_wide(s[idx]), vec4<f32>(neg_inf()), b)); // straddles it
    }
}

// `causal_rows`: the same causal masked_fill_ for the common case of no bias buffer and M % 4 == 0
// (rows start on a vec4). A workgroup owns ROWS consecutive rows of S (over the heads of this
// dispatch); its threads start at the vec4 holding the diagonal, so nothing left of it is touched
// and no thread divides per element.
override ROWS: u32 = 1u;

@compute @workgroup_size(256, 1, 1)
fn causal_rows(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n = params.seq;
    let m4 = params.kv_seq / 4u;
    let ninf = s_narrow(vec4<f32>(neg_inf()));
    let first = linear_group(wg, nwg) * ROWS;
    for (var row = first; row < min(first + ROWS, params.heads * n); row++) {
        // Keys 0 .. keep-1 take part in this row (causal_keys: the diagonal, offset and clamped).
        let keep = causal_keys(row % n + 1u);
        for (var c4 = keep / 4u + li; c4 < m4; c4 += 256u) {
            let j = c4 * 4u;
            let idx = row * m4 + c4;
            if (j >= keep) {
                s[idx] = ninf;  // wholly above the diagonal: write, no read
            } else {
                let b = (vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u)) >= vec4<u32>(keep);
                s[idx] = s_narrow(select(s_wide(s[idx]), vec4<f32>(neg_inf()), b));
            }
        }
    }
}
