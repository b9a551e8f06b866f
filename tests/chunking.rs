//! Chunked unfused plans actually run: a lowered binding limit (caps are plain data) forces the
//! N x N buffers to hold a few heads at a time, and the result still matches the reference.

mod common;

use attn_wgpu::gpu::runner::Runner;
use attn_wgpu::mask::normalize;
use attn_wgpu::problem::{Convention, DType, Inputs, Problem};
use attn_wgpu::validate::{rows_to_check, validate, Verdict};
use attn_wgpu::variants;

#[test]
fn chunked_plans_run_and_match() {
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let mut caps = gpu.caps.clone();
    // B*H = 5 heads of N = 40: one head's S is 6400 bytes; allow 2 heads per binding.
    caps.max_storage_binding = 2 * 40 * 40 * 4 + 100;
    for dtype in [DType::F32, DType::BF16] {
        for name in ["unfused", "unfused-inplace", "math"] {
            let mut p = Problem::new(1, 5, 40, 16, true, 9);
            p.dtype = dtype;
            let mut x = Inputs::generate(&p);
            normalize(&mut p, &mut x, None, Convention::Sdpa, Some(&[33])).unwrap();
            let plan = variants::plan(name, &p, &caps).unwrap();
            let qk: Vec<u32> = plan
                .dispatches
                .iter()
                .filter(|d| d.name == "qk")
                .map(|d| d.params.head_offset)
                .collect();
            assert_eq!(qk, [0, 2, 4], "{name}: three chunks");
            let m = runner.execute(&plan, &x, common::ONCE).unwrap();
            let sem = variants::find(name).unwrap().fully_masked;
            let v = validate(&p, &x, &m.output, &rows_to_check(&p), sem);
            assert_eq!(v.verdict, Verdict::Pass, "{name} {dtype:?}: {v:?}");
        }
    }
}
