//! `unfused-coop`: `unfused-inplace`'s plan with S = Q·Kᵀ and O = P·V on cooperative matrices
//! (shaders/gemm_coop_vk.comp, SPIR-V through PASSTHROUGH_SHADERS). No adapter here has
//! cooperative matrices, so what is checked: its plan on an adapter as the H100 offers itself
//! (five dispatches, the products' SPIR-V, padded inputs), its refusals with their reasons, and
//! the kernels' logic on lavapipe: the same GLSL built on shaders/coopmat_emu.glsl, run through
//! the runner and validated against the f64 reference at D = 64, 128 and 256, causal and not,
//! N != M in both alignments, GQA, a mask with key padding, dropout and training.

mod common;

use attn_wgpu::gpu::{AdapterCaps, Bf16Matrix, CoopLayout};
use attn_wgpu::kernels::gemm_coop_vk;
use attn_wgpu::mask::normalize;
use attn_wgpu::problem::{CausalAlign, Convention, DType, Inputs, Problem};
use attn_wgpu::variants;
use rand_core::SeedableRng;

fn f16(h: u32, n: u32, d: u32, causal: bool) -> Problem {
    let mut p = Problem::new(1, h, n, d, causal, (n * 7 + d) as u64);
    p.dtype = DType::F16;
    p
}

#[test]
fn the_plan_is_unfused_inplace_with_the_products_on_matrices() {
    let p = f16(4, 100, 128, true);
    let caps = common::matrix_adapter();
    let plan = variants::plan("unfused-coop", &p, &caps).unwrap();
    let names: Vec<&str> = plan.dispatches.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["qk", "scale", "mask", "softmax", "pv"]);
    let scalar = variants::plan("unfused-inplace", &p, &caps).unwrap();
    let scalar_names: Vec<&str> = scalar.dispatches.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names, scalar_names,
        "the same dispatch structure as unfused-inplace"
    );
    for d in [&plan.dispatches[0], &plan.dispatches[4]] {
        assert!(d.shader.is_spirv(), "{}", d.name);
        assert_eq!(d.shader.file, "gemm_coop_vk.comp");
        assert!(d.shader.tag.ends_with("_d128"), "{}", d.shader.tag);
    }
    // The same work as the scalar products; in inference with M % 4 == 0 the scores are kept in
    // f16 (as PyTorch's naive path keeps them), so every step moves half the score bytes.
    for i in 0..5 {
        assert_eq!(plan.dispatches[i].flops, scalar.dispatches[i].flops);
    }
    let nn = 4 * 100 * 100;
    assert_eq!(plan.dispatches[0].writes_bytes, nn * 2);
    assert_eq!(scalar.dispatches[0].writes_bytes, nn * 4);
    for i in [1, 3] {
        assert_eq!(
            plan.dispatches[i].reads_bytes,
            nn * 2,
            "{}",
            plan.dispatches[i].name
        );
        assert_eq!(
            2 * plan.dispatches[i].reads_bytes,
            scalar.dispatches[i].reads_bytes
        );
    }
    assert_eq!(
        plan.dispatches[4].reads_bytes + nn * 2,
        scalar.dispatches[4].reads_bytes
    );
    let s = plan.buffers.iter().find(|b| b.name == "S").unwrap();
    assert_eq!(s.bytes, nn * 2);
    for i in 1..4 {
        assert!(
            plan.dispatches[i].shader.file.ends_with("+scores_f16.wgsl"),
            "{}",
            plan.dispatches[i].shader.file
        );
    }
    // f16 scores overflow past 65504 (bf16's range is f32's): the plan says so.
    assert!(plan
        .notes
        .iter()
        .any(|n| n.contains("S and P kept in f16") && n.contains("65504")));
    let q = plan.buffers.iter().find(|b| b.name == "Q").unwrap();
    assert_eq!(q.bytes, p.qkv_bytes() + gemm_coop_vk::PAD_ROWS * 128 * 2);
    // The workgroup memory the check counts is what each product's SPIR-V declares (qk: S's four
    // 16 x 68 f32 tiles and K's 64 x 40 staged chunk).
    for (i, qk) in [(0, true), (4, false)] {
        let d = &plan.dispatches[i];
        assert_eq!(
            attn_wgpu::kernels::workgroup_bytes(&d.shader, d.entry, &d.overrides),
            Some(gemm_coop_vk::storage(qk, 128)),
            "{}",
            d.name
        );
    }
    assert_eq!(gemm_coop_vk::storage(true, 128), 17408 + 5120);
}

#[test]
fn the_scores_stay_f32_where_a_step_needs_them_so_and_the_plan_says_why() {
    let caps = common::matrix_adapter();
    let f32_because = |p: &Problem, why: &str| {
        let plan = variants::plan("unfused-coop", p, &caps).unwrap();
        let s = plan.buffers.iter().find(|b| b.name == "S").unwrap();
        assert_eq!(s.bytes, p.bh() * p.seq as u64 * p.kv_seq as u64 * 4);
        assert!(
            plan.notes
                .iter()
                .any(|n| n.contains("kept in f32") && n.contains(why)),
            "{why}: {:?}",
            plan.notes
        );
        assert!(plan.dispatches[1].shader.file.ends_with("+scores_f32.wgsl"));
    };
    let mut p = f16(2, 64, 64, true);
    p.backward = true;
    f32_because(&p, "backward");
    let mut p = f16(2, 64, 64, true);
    p.dropout = 0.1;
    f32_because(&p, "dropout");
    f32_because(&f16(2, 70, 64, true), "M % 4 == 0");
    // unfused-inplace keeps f32 scores in every dtype.
    let plan = variants::plan("unfused-inplace", &f16(2, 64, 64, true), &caps).unwrap();
    assert!(plan.notes[0].contains("(f32 scores)"), "{}", plan.notes[0]);
}

#[test]
fn sixteen_bit_scores_take_twice_the_heads_a_chunk() {
    // A binding that holds two heads' f32 scores holds four heads' f16 ones: unfused-inplace (and
    // unfused-coop in training, f32 scores) chunk 4 heads in 2, unfused-coop's inference in 1.
    let mut caps = common::matrix_adapter();
    caps.max_storage_binding = 2 * 128 * 128 * 4;
    let chunks = |variant: &str, backward: bool| {
        let mut p = f16(4, 128, 64, true);
        p.backward = backward;
        let plan = variants::plan(variant, &p, &caps).unwrap();
        let get = |k: &str| plan.config.iter().find(|(n, _)| n == k).unwrap().1;
        (get("chunks"), get("heads_per_chunk"))
    };
    assert_eq!(chunks("unfused-inplace", false), (2.0, 2.0));
    assert_eq!(chunks("unfused-coop", true), (2.0, 2.0));
    assert_eq!(chunks("unfused-coop", false), (1.0, 4.0));
    // And run: two chunks of two heads' f16 scores each (head_offset into 16-bit S), emulated.
    let mut small = common::gpu().caps.clone();
    small.max_storage_binding = 4 * 128 * 64 * 2 + gemm_coop_vk::PAD_ROWS * 64 * 2;
    let p = f16(4, 128, 64, true);
    let plan = variants::unfused::build_coop_emulated(&p, &small).unwrap();
    let get = |k: &str| plan.config.iter().find(|(n, _)| n == k).unwrap().1;
    assert_eq!((get("chunks"), get("heads_per_chunk")), (2.0, 2.0));
    common::plan_passes(&p, &Inputs::generate(&p), "unfused-coop", "chunked", plan);
}

#[test]
fn refusals_name_their_reason() {
    let caps = common::matrix_adapter();
    let why = |p: &Problem, caps: &AdapterCaps| match variants::plan("unfused-coop", p, caps) {
        Ok(_) => panic!("accepted {}", p.shape_string()),
        Err(e) => e.to_string(),
    };
    // bf16 needs bf16 cooperative matrices (VK_KHR_shader_bfloat16), which this adapter lacks.
    let mut p = f16(2, 64, 64, true);
    p.dtype = DType::BF16;
    assert!(
        why(&p, &caps).contains("VK_KHR_shader_bfloat16"),
        "{}",
        why(&p, &caps)
    );
    let mut bf = caps.clone();
    bf.bf16_matrix = Bf16Matrix::On;
    let plan = variants::plan("unfused-coop", &p, &bf).unwrap();
    let tags: Vec<&str> = plan.dispatches.iter().map(|d| d.shader.tag).collect();
    assert!(
        tags.contains(&"gemm_coop_vk_bf16_qk_sh_d64")
            && tags.contains(&"gemm_coop_vk_bf16_pv_sh_d64"),
        "{tags:?}"
    );
    assert!(plan.dispatches[3]
        .shader
        .file
        .ends_with("+scores_bf16.wgsl"));
    assert!(plan
        .notes
        .iter()
        .any(|n| n.contains("S and P kept in bf16") && !n.contains("65504")));
    p.dtype = DType::F32;
    assert!(why(&p, &caps).contains("f32"), "{}", why(&p, &caps));
    let p = f16(2, 64, 80, true);
    assert!(
        why(&p, &caps).contains("D = 64, 128 and 256"),
        "{}",
        why(&p, &caps)
    );
    let mut other = caps.clone();
    other.coop_layout = CoopLayout::Other("rows first".into());
    assert!(why(&f16(2, 64, 64, true), &other).contains("layout"));
    let mut gl = caps.clone();
    gl.backend = "gl".into();
    assert!(!why(&f16(2, 64, 64, true), &gl).is_empty());
}

/// Runs the emulated plan on `p` and asserts O (and in training dQ, dK, dV) PASS.
fn emulated_passes(p: &Problem) {
    emulated_passes_on(p, &Inputs::generate(p));
}

fn emulated_passes_on(p: &Problem, x: &Inputs) {
    let gpu = common::gpu();
    let plan = variants::unfused::build_coop_emulated(p, &gpu.caps)
        .unwrap_or_else(|e| panic!("{}: {e}", p.shape_string()));
    let qk = plan.dispatches.iter().find(|d| d.name == "qk").unwrap();
    assert!(qk.shader.tag.ends_with("_emu"), "{}", qk.shader.tag);
    common::plan_passes(p, x, "unfused-coop", "unfused-coop-emu", plan);
}

#[test]
fn the_products_pass_on_emulated_matrices_at_every_head_dim() {
    for d in gemm_coop_vk::HEAD_DIMS {
        // M % 4 = 2 and 1: S and P word by word.
        emulated_passes(&f16(2, 70, d, true));
        emulated_passes(&f16(1, 33, d, false));
        // M % 4 = 0: S written and P read as 8-byte words of four f16 scores; a partial row
        // tile and key block.
        emulated_passes(&f16(1, 100, d, true));
    }
}

#[test]
fn the_bf16_products_pass_on_emulated_matrices() {
    // BF16 = 1: bf16 operands, P rounded to bf16, O stored as bf16 (bf16 bits in the emulation's
    // f16 containers), at each head dimension; and GQA with N != M.
    for d in gemm_coop_vk::HEAD_DIMS {
        let mut p = f16(2, 70, d, true);
        p.dtype = DType::BF16;
        let plan = variants::unfused::build_coop_emulated(&p, &common::gpu().caps).unwrap();
        let qk = plan.dispatches.iter().find(|x| x.name == "qk").unwrap();
        assert_eq!(qk.shader.tag, format!("gemm_coop_vk_bf16_qk_d{d}_emu"));
        emulated_passes(&p);
    }
    // M % 4 = 0: S and P kept in bf16 (written and read as 8-byte words).
    let mut p = f16(1, 100, 128, true);
    p.dtype = DType::BF16;
    emulated_passes(&p);
    let mut p = f16(4, 24, 64, false);
    p.dtype = DType::BF16;
    p.kv_seq = 90;
    p.kv_heads = 2;
    emulated_passes(&p);
}

#[test]
fn the_products_pass_on_emulated_matrices_with_gqa_masks_dropout_and_training() {
    // N != M bottom-right with GQA 4:2.
    let mut p = f16(4, 24, 64, true);
    p.kv_seq = 90;
    p.kv_heads = 2;
    p.causal_align = CausalAlign::BottomRight;
    emulated_passes(&p);
    // A random float mask (some keys -inf), non-causal, N > M, with key padding.
    let mut p = f16(2, 50, 128, false);
    p.kv_seq = 19;
    let mut x = Inputs::generate(&p);
    let mut rng = rand_pcg::Pcg32::seed_from_u64(5);
    let user = common::random_mask(&mut rng, &p, true);
    normalize(&mut p, &mut x, Some(&user), Convention::Sdpa, Some(&[11])).unwrap();
    assert!(p.mask.bias.is_some());
    emulated_passes_on(&p, &x);
    // The same with M % 4 = 0: the mask's bias added to f16 scores; and GQA causal over them.
    let mut p = f16(2, 50, 64, false);
    p.kv_seq = 24;
    let mut x = Inputs::generate(&p);
    let user = common::random_mask(&mut rng, &p, true);
    normalize(&mut p, &mut x, Some(&user), Convention::Sdpa, Some(&[13])).unwrap();
    emulated_passes_on(&p, &x);
    let mut p = f16(4, 24, 64, true);
    p.kv_seq = 96;
    p.kv_heads = 2;
    emulated_passes(&p);
    // Dropout in inference (in place on P), then the training step (out of place, scalar backward).
    let mut p = f16(2, 40, 64, true);
    p.dropout = 0.2;
    emulated_passes(&p);
    p.backward = true;
    emulated_passes(&p);
}
