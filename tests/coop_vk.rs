//! `tiled-coop-vk`: the SPIR-V kernel (shaders/tiled_coop_vk.comp, compiled by glslang in build.rs)
//! that no adapter here can run (lavapipe has no cooperative matrices; tests/variants.rs shows its
//! refusal there). What can be checked without one: its plans on an adapter as the H200 offers
//! itself, every refusal with its reason, the layout check the device's probe answers, and the
//! workgroup memory read from the SPIR-V itself against what the plan declares. Its correctness
//! is checked on the device, against the f64 reference, by every run.

use attn_wgpu::gpu::{AdapterCaps, CoopLayout};
use attn_wgpu::kernels::{self, tiled_coop_vk};
use attn_wgpu::problem::{BiasLayout, DType, Problem};
use attn_wgpu::variants;

/// A Vulkan adapter as the H200 reports itself (cooperative matrices, passthrough shaders,
/// 32-wide subgroups, 48 KiB of workgroup storage) whose probe found the assumed layout.
fn h200() -> AdapterCaps {
    let mut c = AdapterCaps::webgpu_defaults().with_shader_features(
        wgpu::Features::SHADER_F16
            | wgpu::Features::SUBGROUP
            | wgpu::Features::SUBGROUP_BARRIER
            | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
    );
    c.backend = "vulkan".into();
    c.subgroup_min_size = 32;
    c.subgroup_max_size = 32;
    c.max_workgroup_storage = 48 << 10;
    c.passthrough = true;
    c.coop_layout = CoopLayout::Mma16816;
    c
}

fn problem() -> Problem {
    let mut p = Problem::new(2, 4, 100, 64, true, 0);
    p.dtype = DType::F16;
    p
}

fn refusal(p: &Problem, caps: &AdapterCaps) -> String {
    match variants::plan("tiled-coop-vk", p, caps) {
        Ok(_) => panic!("tiled-coop-vk accepted {p:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn plans_on_an_adapter_like_the_h200() {
    let p = problem();
    let plan = variants::plan("tiled-coop-vk", &p, &h200()).unwrap();
    assert_eq!(plan.dispatches.len(), 1);
    let d = &plan.dispatches[0];
    assert!(d.shader.is_spirv() && d.overrides.is_empty());
    let names: Vec<&str> = d.bindings.iter().map(|b| b.buffer.as_str()).collect();
    assert_eq!(names, ["Q", "K", "V", "O"]);
    // 100 rows in blocks of 64: 2 x B*H workgroups.
    assert_eq!(d.workgroups, [2, 8, 1]);
    // The SPIR-V's workgroup variables (K and V staged) are what the plan reports.
    let declared = plan
        .config
        .iter()
        .find(|(k, _)| k == "workgroup_storage_bytes")
        .map(|x| x.1 as u64);
    assert_eq!(declared, Some(tiled_coop_vk::STORAGE));
    assert_eq!(
        kernels::workgroup_bytes(&d.shader, d.entry, &d.overrides),
        Some(tiled_coop_vk::STORAGE)
    );
    assert_eq!(tiled_coop_vk::STORAGE, 18432);
    // Q, K and V padded as tiled-coop pads them (whole 64-row tiles are read past N).
    let q = plan.buffers.iter().find(|b| b.name == "Q").unwrap();
    assert_eq!(q.bytes, kernels::tiled_coop::input_bytes(&p));

    // Training: the forward's L-writing module, then tiled-coop's backward.
    let mut t = p.clone();
    t.backward = true;
    let plan = variants::plan("tiled-coop-vk", &t, &h200()).unwrap();
    let names: Vec<&str> = plan.dispatches.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["attention", "bwd_dot", "bwd_kv", "bwd_q"]);
    let f = &plan.dispatches[0];
    assert_ne!(f.shader.spirv, d.shader.spirv);
    assert_eq!(f.bindings.last().map(|b| b.buffer.as_str()), Some("L"));
    assert_eq!(
        kernels::workgroup_bytes(&f.shader, f.entry, &f.overrides),
        Some(tiled_coop_vk::STORAGE)
    );
    assert!(plan.dispatches[1..].iter().all(|d| !d.shader.is_spirv()));
}

#[test]
fn every_refusal_names_its_reason() {
    let p = problem();
    let mut c = h200();
    c.coop_layout = CoopLayout::Other("lane 0's accumulator elements are at (0, 0) (1, 0)".into());
    let e = refusal(&p, &c);
    assert!(e.contains("mma.m16n8k16") && e.contains("lane 0"), "{e}");
    c.coop_layout = CoopLayout::NotProbed("not a Vulkan device".into());
    assert!(refusal(&p, &c).contains("not probed"));
    let mut c = h200();
    c.passthrough = false;
    assert!(refusal(&p, &c).contains("PASSTHROUGH_SHADERS"));
    let mut c = h200();
    c.subgroup_min_size = 16;
    assert!(refusal(&p, &c).contains("32-wide"));
    let mut c = h200();
    c.backend = "metal".into();
    assert!(refusal(&p, &c).contains("Vulkan only"));
    let mut c = h200();
    c.max_workgroup_storage = 16 << 10;
    assert!(refusal(&p, &c).contains("18432 bytes"));

    let mut q = problem();
    q.head_dim = 128;
    assert!(refusal(&q, &h200()).contains("D = 64 only"));
    let mut q = problem();
    q.dtype = DType::BF16;
    assert!(refusal(&q, &h200()).contains("bf16"));
    let mut q = problem();
    q.mask.bias = Some(BiasLayout { batch: 1, heads: 1 });
    assert!(refusal(&q, &h200()).contains("mask"));
    let mut q = problem();
    q.dropout = 0.1;
    assert!(refusal(&q, &h200()).contains("dropout"));
}

/// What the probe writes: per lane the two lengths, then the (row, column) codes 16r + c of its 8
/// accumulator and 8 A elements, under `layout`.
fn probe_output(layout: impl Fn(u32, u32) -> (u32, u32)) -> Vec<f32> {
    let mut out = Vec::new();
    for lane in 0..32 {
        out.extend([8.0, 8.0]);
        for _ in 0..2 {
            out.extend((0..8).map(|i| {
                let (r, c) = layout(lane, i);
                (16 * r + c) as f32
            }));
        }
    }
    out
}

#[test]
fn the_layout_check_accepts_only_the_assumed_layout() {
    // Every (row, column) held exactly once: the assumed layout is a layout at all.
    let mut seen = std::collections::BTreeSet::new();
    for lane in 0..32 {
        for i in 0..8 {
            assert!(seen.insert(tiled_coop_vk::assumed(lane, i)));
        }
    }
    assert_eq!(seen.len(), 256);
    let ok = probe_output(tiled_coop_vk::assumed);
    assert_eq!(tiled_coop_vk::read_probe(&ok), CoopLayout::Mma16816);

    // The transpose (a plausible other driver's choice) is refused, naming a lane and element.
    let t = probe_output(|l, i| {
        let (r, c) = tiled_coop_vk::assumed(l, i);
        (c, r)
    });
    match tiled_coop_vk::read_probe(&t) {
        CoopLayout::Other(what) => assert!(what.contains("lane 0's accumulator"), "{what}"),
        x => panic!("{x:?}"),
    }
    // Only the A operand differs (the accumulator matches): still refused, for the A operand.
    let mut a = ok.clone();
    a[5 * tiled_coop_vk::PROBE_STRIDE + 10] = 255.0;
    match tiled_coop_vk::read_probe(&a) {
        CoopLayout::Other(what) => assert!(what.contains("lane 5's A"), "{what}"),
        x => panic!("{x:?}"),
    }
    // Other element counts, and a short read.
    let mut n = ok.clone();
    n[0] = 16.0;
    assert!(
        matches!(tiled_coop_vk::read_probe(&n), CoopLayout::Other(w) if w.contains("16 accumulator"))
    );
    assert!(matches!(
        tiled_coop_vk::read_probe(&ok[..100]),
        CoopLayout::Other(_)
    ));
}

#[test]
fn workgroup_memory_is_read_from_the_spirv() {
    // coop_layout_probe.comp, a plan like any other: 256 f32 + 256 f16.
    let plan = tiled_coop_vk::probe_plan();
    plan.check().unwrap();
    let d = &plan.dispatches[0];
    assert!(d.shader.is_spirv());
    assert_eq!(
        kernels::workgroup_bytes(&d.shader, d.entry, &d.overrides),
        Some(256 * 4 + 256 * 2)
    );
    // Not SPIR-V at all.
    assert_eq!(kernels::spirv_workgroup_bytes(b"not spir-v at all"), None);
}
