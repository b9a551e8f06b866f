//! The runner builds every bind-group layout from the plan's declared access (no layout inferred
//! from the shader): a plan that declares a binding read-only where the kernel writes it is
//! refused at pipeline creation, naming the pipeline and the bindings.

mod common;

use attn_wgpu::gpu::runner::{Runner, Schedule};
use attn_wgpu::plan::Access;
use attn_wgpu::problem::{Inputs, Problem};
use attn_wgpu::{variants, Error};

#[test]
fn a_wrong_declared_access_is_refused() {
    let gpu = common::gpu();
    let p = Problem::new(1, 1, 16, 16, true, 0);
    let x = Inputs::generate(&p);
    let schedule = Schedule {
        warmup: 0,
        reps: 1,
        host_reps: 0,
        warmup_ms: None,
    };
    let mut runner = Runner::new(gpu).unwrap();
    let good = variants::plan("tiled", &p, &gpu.caps).unwrap();
    runner
        .execute(&good, &x, schedule)
        .expect("the plan as declared runs");

    let mut bad = good.clone();
    let o = bad.dispatches[0]
        .bindings
        .iter_mut()
        .find(|b| b.buffer == "O")
        .unwrap();
    o.access = Access::Read;
    match runner.execute(&bad, &x, schedule) {
        Err(Error::Gpu { stage, .. }) => {
            assert!(stage.contains("creating the pipeline"), "{stage}");
            assert!(stage.contains("O Read"), "{stage}");
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a read-only O was accepted: the layout is not the plan's"),
    }
}
