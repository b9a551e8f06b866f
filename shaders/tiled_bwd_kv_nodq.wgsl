// tiled_bwd_kv_nodq.wgsl — the dK/dV pass without dQ (appended to tiled_bwd_kv.wgsl; the default:
// `bwd_q` computes dQ in a pass of its own, deterministic, no float atomics). With
// `--bwd-dq atomic`: tiled_bwd_kv_dq.wgsl.
fn add_dq(head: u32, i0: u32, t: u32, n: u32, d: u32) {}
