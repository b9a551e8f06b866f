// math_rows.wgsl — `math`'s element-wise and row-wise steps in f32, one small kernel per step as
// PyTorch's MATH backend runs them (S and the row buffers hold this dispatch's chunk of heads):
//   add_mask     S += M                                   (s, x = M)
//   masked_rows  F[row] = 1 if every score of the row is -inf, else 0: the explicit all-masked
//                detection of a safe softmax               (s, x = F)
//   row_max      R[row] = max_j S[row, j]                  (s, x = R)
//   exp_sum      S = exp(S - R[row]); L[row] = sum_j S     (s, x = R, y = L)
//   normalize_rows S /= L[row]                               (s, x = L)
//   where_zero   S = 0 on rows with F = 1 (they are NaN after exp(-inf - -inf)) (s, x = F)
// The row kernels use one thread per row: this is the slow protective path, not a fast one.

@group(0) @binding(1) var<storage, read_write> s: array<f32>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

fn elem_index(wg: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return linear_group(wg, nwg) * 256u + li;
}

@compute @workgroup_size(256, 1, 1)
fn add_mask(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let idx = elem_index(wg, nwg, li);
    if (idx < params.heads * params.seq * params.kv_seq) {
        s[idx] = s[idx] + x[idx];
    }
}

@compute @workgroup_size(256, 1, 1)
fn masked_rows(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let row = elem_index(wg, nwg, li);
    let n = params.kv_seq;  // row length: M keys
    if (row < params.heads * params.seq) {
        var all_masked = true;
        for (var j = 0u; j < n; j++) {
            all_masked = all_masked && (s[row * n + j] == neg_inf());
        }
        x[row] = select(0.0, 1.0, all_masked);
    }
}

@compute @workgroup_size(256, 1, 1)
fn row_max(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let row = elem_index(wg, nwg, li);
    let n = params.kv_seq;  // row length: M keys
    if (row < params.heads * params.seq) {
        var m = neg_inf();
        for (var j = 0u; j < n; j++) {
            m = max(m, s[row * n + j]);
        }
        x[row] = m;
    }
}

@compute @workgroup_size(256, 1, 1)
fn exp_sum(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let row = elem_index(wg, nwg, li);
    let n = params.kv_seq;  // row length: M keys
    if (row < params.heads * params.seq) {
        let m = x[row];
        var l = 0.0;
        for (var j = 0u; j < n; j++) {
            let e = exp(s[row * n + j] - m);
            s[row * n + j] = e;
            l += e;
        }
        y[row] = l;
    }
}

@compute @workgroup_size(256, 1, 1)
fn normalize_rows(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
    let idx = elem_index(wg, nwg, li);
    let n = params.kv_seq;  // row length: M keys
    if (idx < params.heads * params.seq * n) {
        s[idx] = s[idx] / x[idx / n];
    }
}

@compute @workgroup_size(256, 1, 1)
fn where_zero(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let idx = elem_index(wg, nwg, li);
    let n = params.kv_seq;  // row length: M keys
    if (idx < params.heads * params.seq * n && x[idx / n] != 0.0) {
        s[idx] = 0.0;
    }
}
