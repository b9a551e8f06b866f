//! Plan shapes and the traffic model, without a GPU.

use attn_wgpu::gpu::AdapterCaps;
use attn_wgpu::plan::Role;
use attn_wgpu::problem::Problem;
use attn_wgpu::variants::{self, tiled};
use attn_wgpu::Error;

fn caps() -> AdapterCaps {
    AdapterCaps::webgpu_defaults()
}

#[test]
fn dispatch_and_n_by_n_counts() {
    let p = Problem::new(2, 3, 100, 64, true, 0);
    for (name, dispatches, nn) in [
        ("unfused", 6, 2),
        ("unfused-inplace", 5, 1),
        ("tiled", 1, 0),
    ] {
        let plan = variants::plan(name, &p, &caps()).unwrap();
        assert_eq!(plan.dispatches.len(), dispatches, "{name}");
        assert_eq!(plan.n_by_n_buffers(), nn, "{name}");
    }
    let names: Vec<String> = variants::plan("unfused", &p, &caps())
        .unwrap()
        .dispatches
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(names, ["qk", "scale", "copy", "mask", "softmax", "pv"]);
}

#[test]
fn unfused_traffic_by_hand() {
    // B=1 H=2 N=4 D=8 causal: Q/K/V/O = 2*4*8*4 = 256 bytes each, S = 2*4*4*4 = 128 bytes.
    let p = Problem::new(1, 2, 4, 8, true, 0);
    let plan = variants::plan("unfused", &p, &caps()).unwrap();
    let get = |n: &str| plan.dispatches.iter().find(|d| d.name == n).unwrap();
    assert_eq!((get("qk").reads_bytes, get("qk").writes_bytes), (512, 128));
    assert_eq!(get("qk").flops, 2 * 2 * 4 * 4 * 8);
    assert_eq!(
        (get("scale").reads_bytes, get("scale").writes_bytes),
        (128, 128)
    );
    assert_eq!(
        (get("copy").reads_bytes, get("copy").writes_bytes),
        (128, 128)
    );
    // 6 masked pairs per head (N(N-1)/2) x 2 heads x 4 bytes.
    assert_eq!((get("mask").reads_bytes, get("mask").writes_bytes), (0, 48));
    assert_eq!(
        (get("softmax").reads_bytes, get("softmax").writes_bytes),
        (128, 128)
    );
    assert_eq!(
        (get("pv").reads_bytes, get("pv").writes_bytes),
        (128 + 256, 256)
    );
    assert_eq!(plan.bytes_by_role(Role::Intermediate), 256);
    assert_eq!(plan.total_bytes(), 4 * 256 + 256);
    // Without a mask the in-place mask moves nothing, the out-of-place copy still moves S twice.
    let nc = Problem::new(1, 2, 4, 8, false, 0);
    let ip = variants::plan("unfused-inplace", &nc, &caps()).unwrap();
    let m = ip.dispatches.iter().find(|d| d.name == "mask").unwrap();
    assert_eq!((m.reads_bytes, m.writes_bytes), (0, 0));
}

#[test]
fn tiled_traffic_by_hand() {
    // B=1 H=1 N=100 D=16; on WebGPU defaults (16 KiB workgroup storage) the tile is chosen to fit.
    let p = Problem::new(1, 1, 100, 16, true, 0);
    let plan = variants::plan("tiled", &p, &caps()).unwrap();
    let cfg = tiled::choose(16, &caps()).unwrap();
    assert!(cfg.storage_bytes() <= caps().max_workgroup_storage as u64);
    let br = cfg.br as u64;
    let d = &plan.dispatches[0];
    // Q once + K,V for each query block up to its last row, O once; 400 bytes per Q/K/V/O... as f32:
    // one row = 16 * 4 = 64 bytes.
    let blocks = 100u64.div_ceil(br);
    let kv_rows: u64 = (0..blocks).map(|qb| 100u64.min((qb + 1) * br)).sum();
    assert_eq!(d.reads_bytes, 100 * 64 + kv_rows * 64 * 2);
    assert_eq!(d.writes_bytes, 100 * 64);
    // Non-causal: every block reads all 100 keys.
    let nc = Problem::new(1, 1, 100, 16, false, 0);
    let d2 = &variants::plan("tiled", &nc, &caps()).unwrap().dispatches[0];
    assert_eq!(d2.reads_bytes, 100 * 64 + blocks * 100 * 64 * 2);
    assert_eq!(d2.flops, 4 * 100 * 100 * 16);
    assert!(
        d.reads_bytes < d2.reads_bytes,
        "causal skips blocks above the diagonal"
    );
}

#[test]
fn tile_choice_follows_workgroup_storage() {
    let mut c = caps();
    c.max_workgroup_storage = 48 * 1024;
    assert!(tiled::choose(64, &c).unwrap().register_tiled());
    // Past D = 64 the register-tiled kernel takes fewer rows per thread (BR 32 at D <= 128, 16 at
    // D <= 256) and the largest key block that fits: 16, then 8 (BC * D <= 2048 staged elements).
    let wide = tiled::choose(128, &c).unwrap();
    assert_eq!(
        (wide.kernel, wide.br, wide.bc),
        (tiled::TileKernel::Rt, 32, 16)
    );
    let widest = tiled::choose(256, &c).unwrap();
    assert_eq!(
        (widest.kernel, widest.br, widest.bc),
        (tiled::TileKernel::Rt, 16, 8)
    );
    assert_eq!(widest.storage_bytes(), (16 + 16) * 65 * 16 + 8 * 256 + 1024);
    c.max_workgroup_storage = 32 * 1024;
    // lavapipe's 32 KiB: D = 128 with key blocks of 8, D = 256 of 4.
    assert_eq!(tiled::choose(128, &c).unwrap().bc, 8);
    assert_eq!(tiled::choose(256, &c).unwrap().bc, 4);
    assert!(tiled::choose(64, &c).unwrap().register_tiled());
    // Less storage: the register-tiled kernel with smaller key blocks, then one row per thread.
    c.max_workgroup_storage = 30 * 1024;
    let small = tiled::choose(64, &c).unwrap();
    assert_eq!((small.kernel, small.bc), (tiled::TileKernel::Rt, 8));
    c.max_workgroup_storage = 20 * 1024;
    let fallback = tiled::choose(64, &c).unwrap();
    assert!(!fallback.register_tiled());
    assert_eq!(fallback.br, 16);
    c.max_workgroup_storage = 256;
    let e = tiled::choose(256, &c).unwrap_err();
    assert!(e.contains("D=256") && e.contains("256"), "{e}");
}

#[test]
fn too_large_scores_are_refused_with_the_reason() {
    let mut c = caps();
    c.max_storage_binding = 1 << 20;
    let p = Problem::new(1, 1, 1024, 64, true, 0); // S = 4 MiB > 1 MiB
    match variants::plan("unfused", &p, &c) {
        Err(Error::Incompatible { variant, reason }) => {
            assert_eq!(variant, "unfused");
            assert!(
                reason.contains("max_storage_buffer_binding_size"),
                "{reason}"
            );
            assert!(reason.contains("4194304"), "{reason}");
        }
        other => panic!("expected Incompatible, got {other:?}"),
    }
    // The fused variant needs no N x N buffer and still plans.
    assert!(variants::plan("tiled", &p, &c).is_ok());
}

#[test]
fn unknown_variant_lists_the_known_ones() {
    let p = Problem::new(1, 1, 8, 8, true, 0);
    let e = variants::plan("flash9", &p, &caps())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("flash9") && e.contains("unfused-inplace") && e.contains("tiled"),
        "{e}"
    );
}

#[test]
fn a_retired_variant_is_refused_with_its_measured_reason() {
    let Err(e) = variants::find("tiled-subgroup") else {
        panic!("tiled-subgroup is still registered")
    };
    let e = e.to_string();
    assert!(
        e.contains("was retired") && e.contains("3417.5") && e.contains("rt2/rt3"),
        "{e}"
    );
    assert!(!variants::names().contains(&"tiled-subgroup"));
}

#[test]
fn unfused_chunks_heads_when_scores_exceed_the_binding() {
    // B*H = 6 heads of N = 64: S = 6 * 64 * 64 * 4 = 96 KiB. A 40 KiB binding holds 2 heads.
    let p = Problem::new(2, 3, 64, 16, true, 0);
    let mut c = caps();
    c.max_storage_binding = 40 * 1024;
    for (name, steps) in [("unfused", 6), ("unfused-inplace", 5)] {
        let plan = variants::plan(name, &p, &c).unwrap();
        assert_eq!(plan.dispatches.len(), 3 * steps, "{name}: 3 chunks");
        let s = plan.buffer("S").unwrap();
        assert_eq!(s.bytes, 2 * 64 * 64 * 4, "S holds one chunk");
        let offsets: Vec<(u32, u32)> = plan
            .dispatches
            .iter()
            .filter(|d| d.name == "qk")
            .map(|d| (d.params.head_offset, d.params.heads))
            .collect();
        assert_eq!(offsets, [(0, 2), (2, 2), (4, 2)]);
        assert!(plan.notes.iter().any(|n| n.contains("chunked")), "{name}");
        // Traffic is the same as unchunked: every head's work is counted once.
        let whole = variants::plan(name, &p, &caps()).unwrap();
        assert_eq!(plan.reads_bytes(), whole.reads_bytes());
        assert_eq!(plan.writes_bytes(), whole.writes_bytes());
        assert_eq!(plan.flops(), whole.flops());
    }
    // max_buffer_size limits the same way; an uneven split leaves a smaller last chunk.
    let mut c = caps();
    c.max_buffer = 3 * 64 * 64 * 4 + 1;
    let plan = variants::plan("math", &p, &c).unwrap();
    let heads: Vec<u32> = plan
        .dispatches
        .iter()
        .filter(|d| d.name == "qk")
        .map(|d| d.params.heads)
        .collect();
    assert_eq!(heads, [3, 3]);
    // Refused only when one head's N x N cannot be bound, with the reason.
    let mut c = caps();
    c.max_storage_binding = 64 * 64 * 4 - 1;
    let p = Problem::new(2, 3, 64, 4, true, 0); // Q/K/V (6 KiB) still fit
    for name in ["unfused", "unfused-inplace", "math"] {
        match variants::plan(name, &p, &c) {
            Err(Error::Incompatible { reason, .. }) => {
                assert!(reason.contains("one head's N x M"), "{reason}")
            }
            other => panic!("{name}: expected Incompatible, got {other:?}"),
        }
    }
    // tiled never materializes N x N.
    assert!(variants::plan("tiled", &p, &c).is_ok());
}

#[test]
fn mask_reads_are_counted() {
    use attn_wgpu::mask::normalize;
    use attn_wgpu::problem::{Convention, Inputs};
    let mut p = Problem::new(2, 3, 8, 16, false, 0);
    let mut x = Inputs::generate(&p);
    normalize(&mut p, &mut x, None, Convention::Sdpa, Some(&[3, 8])).unwrap();
    let plain = Problem::new(2, 3, 8, 16, false, 0);
    for name in ["unfused-inplace", "tiled", "math"] {
        let with = variants::plan(name, &p, &caps()).unwrap();
        let without = variants::plan(name, &plain, &caps()).unwrap();
        assert!(with.buffer("MASK").is_some(), "{name}");
        assert_eq!(with.buffer("MASK").unwrap().bytes, 2 * 8 * 8 * 4);
        // One N x N block of f32 bias per head (6 heads).
        let extra = with.reads_bytes() - without.reads_bytes();
        assert!(extra >= 6 * 8 * 8 * 4, "{name}: {extra}");
    }
    let ip = variants::plan("unfused-inplace", &p, &caps()).unwrap();
    let m = ip.dispatches.iter().find(|d| d.name == "mask").unwrap();
    assert_eq!(m.reads_bytes, 6 * 64 * 4 + 6 * 64 * 4, "S + bias");
}

#[test]
fn requirements_give_reasons() {
    use attn_wgpu::problem::DType;
    let mut p = Problem::new(1, 1, 8, 7, false, 0);
    p.dtype = DType::BF16;
    for name in ["unfused", "unfused-inplace", "tiled"] {
        let e = variants::plan(name, &p, &caps()).unwrap_err().to_string();
        assert!(e.contains("D must be even") && e.contains("D=7"), "{e}");
    }
    assert!(variants::plan("math", &p, &caps()).is_ok());
    p.dtype = DType::F16;
    p.head_dim = 8;
    let e = variants::plan("tiled", &p, &caps())
        .unwrap_err()
        .to_string();
    assert!(e.contains("SHADER_F16"), "{e}");
    // math reads f16 through pack2x16float: no feature needed.
    assert!(variants::plan("math", &p, &caps()).is_ok());
    let choice = variants::auto(&p, &caps()).unwrap();
    assert_eq!(choice.picked, "math");
    assert_eq!(choice.not_picked.len(), variants::names().len() - 1);
    // Variants needing an optional feature the plain caps lack say so; the rest lack SHADER_F16.
    assert!(choice
        .not_picked
        .iter()
        .all(|(v, r)| r.contains("SHADER_F16")
            || (v == "split-kv" && r.contains("SUBGROUP"))
            || ((v == "tiled-coop"
                || v == "tiled-coop-vk"
                || v == "tiled-coop-cm2"
                || v == "unfused-coop")
                && r.contains("COOPERATIVE_MATRIX"))));
    let mut c = caps();
    c.f16 = true;
    let choice = variants::auto(&p, &c).unwrap();
    assert_eq!(choice.picked, "tiled");
    assert!(choice
        .not_picked
        .iter()
        .all(|(v, r)| r.contains("ranked below `tiled`")
            || (v == "split-kv" && r.contains("SUBGROUP"))
            || ((v == "tiled-coop"
                || v == "tiled-coop-vk"
                || v == "tiled-coop-cm2"
                || v == "unfused-coop")
                && r.contains("COOPERATIVE_MATRIX"))));
}

#[test]
fn declared_needs_decide_backends_and_refusals() {
    use attn_wgpu::variants::{Backend, Variant};
    let coop = Variant {
        name: "needs-coop",
        summary: "",
        needs: wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
        excludes: &[],
        ..*variants::find("tiled").unwrap()
    };
    assert_eq!(coop.backends(), [Backend::Vulkan, Backend::Metal]);
    assert!(coop
        .unsupported_on(Backend::Dx12)
        .unwrap()
        .contains("EXPERIMENTAL_COOPERATIVE_MATRIX"));
    let mut c = caps();
    c.backend = "vulkan".into();
    let why = coop.check_adapter(&c).unwrap_err();
    assert!(why.contains("does not offer"), "{why}");
    c.cooperative_matrix = true;
    assert!(coop.check_adapter(&c).is_ok());
    let f16 = Variant {
        needs: wgpu::Features::SHADER_F16,
        excludes: &[(Backend::Metal, "a driver bug")],
        ..coop
    };
    assert_eq!(f16.backends(), [Backend::Vulkan, Backend::Dx12]);
    assert!(f16
        .unsupported_on(Backend::Metal)
        .unwrap()
        .contains("a driver bug"));
    // Every registered variant claims at least one backend.
    for v in variants::VARIANTS {
        assert!(!v.backends().is_empty(), "{}", v.name);
    }
}

#[test]
fn forced_tiles_are_checked_by_the_builder() {
    use tiled::{TileChoice, TileRequest};
    let mut c = caps();
    c.max_workgroup_storage = 32 * 1024;
    let mut p = Problem::new(1, 1, 100, 16, true, 0);
    let default = variants::plan("tiled", &p, &c).unwrap();
    let t = default.tile.unwrap();
    assert_eq!(
        (t.choice, t.source.as_str()),
        (TileChoice::RegisterTiled, "default")
    );
    // Every candidate that fits builds, with its own BR, and says where it came from.
    let cands = tiled::candidates(16, &c);
    assert_eq!(
        cands.len(),
        6,
        "rt and BR 64, 32, 16, 8, 4 all fit 32 KiB at D=16"
    );
    for (choice, cfg) in cands {
        p.tile = Some(TileRequest {
            choice,
            source: "--tile".into(),
        });
        let plan = variants::plan("tiled", &p, &c).unwrap();
        let br = plan.config.iter().find(|(k, _)| k == "BR").unwrap().1;
        assert_eq!(br, cfg.br as f64, "{choice}");
        assert_eq!(plan.tile.unwrap().choice, choice);
    }
    // One that does not fit: Incompatible, naming the tile, the bytes and the source.
    p.tile = Some(TileRequest {
        choice: TileChoice::Row(3000),
        source: "--tile".into(),
    });
    match variants::plan("tiled", &p, &c) {
        Err(Error::Incompatible { reason, .. }) => {
            assert!(
                reason.contains("row:3000") && reason.contains("32768"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // rt above D = 256.
    p.head_dim = 264;
    p.tile = Some(TileRequest {
        choice: TileChoice::RegisterTiled,
        source: "--tile".into(),
    });
    assert!(matches!(
        variants::plan("tiled", &p, &c),
        Err(Error::Incompatible { .. })
    ));
}

#[test]
fn coop_plan_states_its_shape_limits_and_pads_its_inputs() {
    let mut c = caps().with_shader_features(variants::SHADER_FEATURES);
    c.backend = "vulkan".into();
    c.subgroup_min_size = 32;
    c.subgroup_max_size = 32;
    c.max_workgroup_storage = 49152;
    let mut p = Problem::new(2, 3, 100, 40, true, 0);
    p.dtype = attn_wgpu::problem::DType::F16;
    let why = variants::plan("tiled-coop", &p, &c)
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("multiple of 16 up to 256") && why.contains("40"),
        "{why}"
    );
    p.head_dim = 64;
    let plan = variants::plan("tiled-coop", &p, &c).unwrap();
    // Q, K and V get room for one more block of up to 128 rows (f16: 2 bytes), O does not.
    let qkv = 2 * 3 * 100 * 64 * 2;
    for name in ["Q", "K", "V"] {
        assert_eq!(
            plan.buffer(name).unwrap().bytes,
            qkv + 128 * 64 * 2,
            "{name}"
        );
    }
    // D <= 64: the two-row-tile kernel, 128 query rows a workgroup (N = 100: one block a head).
    assert_eq!(
        plan.dispatches[0].shader.file,
        "tiled_coop_rt2.wgsl+tiled_coop_lib.wgsl+tiled_coop_kv.wgsl+tiled_coop_lo.wgsl+tiled_mask.wgsl+tiled_nolse.wgsl"
    );
    assert_eq!(plan.dispatches[0].workgroups, [1, 6, 1]);
    assert_eq!(plan.buffer("O").unwrap().bytes, qkv);
    let cfg = |k: &str| plan.config.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    assert_eq!(
        cfg("workgroup_storage_bytes"),
        Some(tiled::COOP_STORAGE as f64)
    );
    assert!(cfg("LO").is_some() && cfg("TAU").is_some());
    // Wider heads: the same 16-key blocks, D / 16 tiles a row, storage growing with D.
    for (d, bytes) in [(128, 20992.0), (256, 29184.0)] {
        p.head_dim = d;
        let plan = variants::plan("tiled-coop", &p, &c).unwrap();
        assert_eq!(
            (override_of(&plan, "D16"), override_of(&plan, "BC")),
            (Some(d as f64 / 16.0), None),
            "D={d}"
        );
        let cfg = |k: &str| plan.config.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        assert_eq!(cfg("workgroup_storage_bytes"), Some(bytes), "D={d}");
        // Wider than 64: one row tile a subgroup, 64 rows a workgroup (two blocks at N = 100).
        assert!(plan.dispatches[0]
            .shader
            .file
            .starts_with("tiled_coop.wgsl+"));
        assert_eq!(plan.dispatches[0].workgroups, [2, 6, 1], "D={d}");
    }
    p.head_dim = 64;
    // Training: the forward also writes L, then bwd_dot and the two cooperative-matrix passes;
    // dO is padded like Q (the dQ pass reads whole 16-row tiles of it).
    p.backward = true;
    let plan = variants::plan("tiled-coop", &p, &c).unwrap();
    let files: Vec<&str> = plan.dispatches.iter().map(|d| d.shader.file).collect();
    assert_eq!(
        files,
        [
            "tiled_coop_rt2.wgsl+tiled_coop_lib.wgsl+tiled_coop_kv.wgsl+tiled_coop_lo.wgsl+tiled_mask.wgsl+tiled_lse.wgsl",
            "tiled_bwd_dot.wgsl",
            "tiled_coop_bwd_kv.wgsl+tiled_coop_lib.wgsl+tiled_mask.wgsl",
            "tiled_coop_bwd_q.wgsl+tiled_coop_lib.wgsl+tiled_coop_kv.wgsl+tiled_mask.wgsl",
        ]
    );
    assert_eq!(plan.buffer("dO").unwrap().bytes, qkv + 128 * 64 * 2);
    // bwd_kv: a workgroup per 64 keys of each of the 6 K/V heads; bwd_q per 128 rows.
    assert_eq!(plan.dispatches[2].workgroups, [2, 6, 1]);
    assert_eq!(plan.dispatches[3].workgroups, [1, 6, 1]);
    assert_eq!(plan.grads, ["dQ", "dK", "dV"]);
    // Wider heads have no cooperative-matrix backward: refused, naming the limit.
    p.head_dim = 128;
    let why = variants::plan("tiled-coop", &p, &c)
        .unwrap_err()
        .to_string();
    assert!(why.contains("D <= 64") && why.contains("128"), "{why}");
    p.backward = false;
    p.head_dim = 64;
    // 16-wide subgroups: refused with the reason.
    c.subgroup_min_size = 16;
    let why = variants::plan("tiled-coop", &p, &c)
        .unwrap_err()
        .to_string();
    assert!(why.contains("32-wide"), "{why}");
}

#[test]
fn tiled_takes_its_v2_kernel_where_subgroups_allow_and_says_why_not_elsewhere() {
    use tiled::{TileChoice, TileRequest};
    let mut c = caps().with_shader_features(wgpu::Features::SUBGROUP);
    c.subgroup_min_size = 32;
    c.subgroup_max_size = 32;
    c.max_workgroup_storage = 49152;
    let mut p = Problem::new(1, 2, 100, 64, true, 0);
    let bc = |plan: &attn_wgpu::plan::Plan| {
        plan.dispatches[0]
            .overrides
            .iter()
            .find(|(k, _)| k == "BC")
            .map(|x| x.1)
    };
    // rt2 with key blocks of 32 (the measured default), in 128-thread workgroups of 64 rows.
    let plan = variants::plan("tiled", &p, &c).unwrap();
    assert_eq!(plan.tile.clone().unwrap().choice, TileChoice::Subgroup(32));
    assert!(plan.dispatches[0].shader.file.starts_with("tiled_v2.wgsl"));
    assert_eq!(bc(&plan), Some(32.0));
    assert_eq!(
        plan.dispatches[0].workgroups[0], 2,
        "ceil(100 / 64) query blocks"
    );
    assert_eq!(
        variants::find("tiled").unwrap().plan_needs(&p, &c),
        wgpu::Features::SUBGROUP
    );
    // rt2:64 where 48 KiB fit; refused at 32 KiB with the bytes.
    p.tile = Some(TileRequest {
        choice: TileChoice::Subgroup(64),
        source: "--tile".into(),
    });
    assert_eq!(bc(&variants::plan("tiled", &p, &c).unwrap()), Some(64.0));
    c.max_workgroup_storage = 32768;
    match variants::plan("tiled", &p, &c) {
        Err(Error::Incompatible { reason, .. }) => {
            assert!(
                reason.contains("rt2:64") && reason.contains("49152"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    p.tile = None;
    assert_eq!(bc(&variants::plan("tiled", &p, &c).unwrap()), Some(32.0));
    // D not a multiple of 8: the default falls back to rt; forcing rt2 names D.
    p.head_dim = 12;
    let t = variants::plan("tiled", &p, &c).unwrap().tile.unwrap();
    assert_eq!(t.choice, TileChoice::RegisterTiled);
    p.tile = Some(TileRequest {
        choice: TileChoice::Subgroup(32),
        source: "--tile".into(),
    });
    match variants::plan("tiled", &p, &c) {
        Err(Error::Incompatible { reason, .. }) => {
            assert!(
                reason.contains("rt2") && reason.contains("D=12"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Subgroups narrower than the 8-lane row group: refused, naming the width.
    p.head_dim = 64;
    c.subgroup_min_size = 4;
    match variants::plan("tiled", &p, &c) {
        Err(Error::Incompatible { reason, .. }) => {
            assert!(reason.contains("4..32 lanes"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    p.tile = None;
    let t = variants::plan("tiled", &p, &c).unwrap().tile.unwrap();
    assert_eq!(t.choice, TileChoice::RegisterTiled);
}

/// Above D = 64 `tiled` takes the chunked kernel (tile `rt3`, tiled_v3.wgsl) where subgroups of
/// at least 8 lanes allow and D is a multiple of 8, within 32 KiB of workgroup storage and with D as
/// its pipeline constant; elsewhere `rt`, and a forced `rt3` that cannot run names the reason.
#[test]
fn tiled_takes_the_chunked_kernel_above_d64_and_says_why_not_elsewhere() {
    use tiled::{TileChoice, TileRequest};
    let mut c = caps().with_shader_features(wgpu::Features::SUBGROUP);
    c.subgroup_min_size = 8;
    c.subgroup_max_size = 32;
    c.max_workgroup_storage = 32768;
    for d in [72u32, 80, 128, 200, 256] {
        let p = Problem::new(1, 2, 100, d, true, 0);
        let plan = variants::plan("tiled", &p, &c).unwrap();
        assert_eq!(
            plan.tile.clone().unwrap().choice,
            TileChoice::Chunked,
            "D={d}"
        );
        assert!(plan.dispatches[0].shader.file.starts_with("tiled_v3.wgsl"));
        assert_eq!(override_of(&plan, "HD"), Some(d as f64), "D={d}");
        let prefetch = if d <= 128 { 1.0 } else { 0.0 };
        assert_eq!(override_of(&plan, "PREFETCH"), Some(prefetch), "D={d}");
        assert_eq!(
            plan.dispatches[0].workgroups[0], 2,
            "ceil(100 / 64) query blocks"
        );
    }
    // D not a multiple of 8, or subgroups narrower than a row group: `rt` by default, and a
    // forced `rt3` names what it lacks.
    let forced = |p: &mut Problem| {
        p.tile = Some(TileRequest {
            choice: TileChoice::Chunked,
            source: "--tile".into(),
        })
    };
    let refusal = |p: &Problem, c: &attn_wgpu::gpu::AdapterCaps| match variants::plan("tiled", p, c)
    {
        Err(Error::Incompatible { reason, .. }) => reason,
        other => panic!("{other:?}"),
    };
    let mut p = Problem::new(1, 2, 100, 100, true, 0);
    let t = variants::plan("tiled", &p, &c).unwrap().tile.unwrap();
    assert_eq!(t.choice, TileChoice::RegisterTiled);
    forced(&mut p);
    let why = refusal(&p, &c);
    assert!(why.contains("rt3") && why.contains("D=100"), "{why}");
    p.head_dim = 64;
    let why = refusal(&p, &c);
    assert!(
        why.contains("rt3") && why.contains("D=64") && why.contains("rt2"),
        "{why}"
    );
    p.head_dim = 128;
    c.subgroup_min_size = 4;
    let why = refusal(&p, &c);
    assert!(why.contains("4..32 lanes"), "{why}");
    p.tile = None;
    let t = variants::plan("tiled", &p, &c).unwrap().tile.unwrap();
    assert_eq!(t.choice, TileChoice::RegisterTiled);
    // Short of 32 KiB of workgroup storage: refused with the bytes.
    c.subgroup_min_size = 8;
    c.max_workgroup_storage = 16384;
    forced(&mut p);
    let why = refusal(&p, &c);
    assert!(why.contains("32768") && why.contains("16384"), "{why}");
}

/// The pipeline constant `k` of the plan's first dispatch, if it declares one.
fn override_of(plan: &attn_wgpu::plan::Plan, k: &str) -> Option<f64> {
    plan.dispatches[0]
        .overrides
        .iter()
        .find(|(n, _)| n == k)
        .map(|x| x.1)
}

/// split-kv's layout and the kernel it picks agree: with GQA groups of at most 4 heads the split
/// pass is split_kv_hpl.wgsl, whose key groups are all 128 / KW lane sets, and the host's block
/// (`step`) is that many key groups times the unroll, so that every slice finds blocks; larger
/// groups take split_kv.wgsl, whose key groups are 128 / KW / GROUP.
#[test]
fn split_kv_layout_follows_its_kernel() {
    use attn_wgpu::kernels::split_kv;
    let mut c = caps().with_shader_features(variants::SHADER_FEATURES);
    c.subgroup_min_size = 32;
    c.subgroup_max_size = 32;
    c.max_workgroup_storage = 49152;
    c.max_storage_binding = (1 << 31) - 4;
    for (b, hq, hkv, m, every_head) in [
        (1u32, 32u32, 8u32, 4096u32, true),
        (16, 32, 8, 4096, true),
        (2, 8, 8, 5000, true),
        (2, 32, 4, 5000, false),
    ] {
        let mut p = Problem::new(b, hq, 1, 128, false, 0);
        p.dtype = attn_wgpu::problem::DType::F16;
        p.kv_heads = hkv;
        p.kv_seq = m;
        let lay = split_kv::layout(&p, &c).unwrap();
        assert_eq!(lay.every_head, every_head, "B{b} Hq{hq} Hkv{hkv}");
        let groups = if every_head {
            128 / lay.kw
        } else {
            128 / lay.kw / (hq / hkv)
        };
        assert_eq!(lay.groups(hq / hkv), groups);
        assert_eq!(lay.step, (groups * lay.unroll) as u64);
        // Every slice gets at least one block of keys.
        assert!(
            lay.splits <= (m as u64).div_ceil(lay.step),
            "B{b} M{m}: {lay:?}"
        );
        let plan = variants::plan("split-kv", &p, &c).unwrap();
        let file = plan.dispatches[0].shader.file;
        let want = if every_head {
            "split_kv_hpl.wgsl"
        } else {
            "split_kv.wgsl"
        };
        assert!(file.starts_with(want), "{file}");
    }
}

#[test]
fn auto_passes_over_tileds_small_backward_tiles_in_training() {
    // A 48 KiB adapter without matrix units (the H100's limits, scalar features): the training
    // step at D = 64 takes tiled's 32 x 32 backward tile, and auto picks tiled; at D = 128 in f32
    // the backward takes the chunked 32 x 32 tile (1.8x unfused-inplace on the H100), or with 40 KiB the
    // small 16 x 16 tile (measured 2.90x slower than materializing on the H100), and auto picks
    // unfused-inplace, saying why; forcing `tiled` still plans it. Inference at D = 128 still
    // picks tiled (its forward wins there).
    let mut c = caps();
    c.max_workgroup_storage = 48 << 10;
    let mut p = Problem::new(2, 4, 100, 64, true, 0);
    p.backward = true;
    assert_eq!(variants::auto(&p, &c).unwrap().picked, "tiled");
    p.head_dim = 128;
    let why_not_tiled = |p: &Problem, c: &AdapterCaps| {
        let choice = variants::auto(p, c).unwrap();
        assert_eq!(choice.picked, "unfused-inplace");
        let (_, why) = choice
            .not_picked
            .into_iter()
            .find(|(v, _)| v == "tiled")
            .unwrap();
        why
    };
    // f32 at D = 128 on 48 KiB: the chunked 32 x 32 tile, measured slower than materializing.
    let why = why_not_tiled(&p, &c);
    assert!(
        why.contains("chunked") && why.contains("1.8x slower than unfused-inplace"),
        "{why}"
    );
    // On 40 KiB the 16 x 16 tile, measured slower.
    c.max_workgroup_storage = 40 << 10;
    let why = why_not_tiled(&p, &c);
    assert!(why.contains("16 x 16") && why.contains("2.90x"), "{why}");
    c.max_workgroup_storage = 48 << 10;
    assert!(variants::plan("tiled", &p, &c).is_ok());
    p.backward = false;
    assert_eq!(variants::auto(&p, &c).unwrap().picked, "tiled");
    // f16 at D = 128 stages its 32 x 32 tile in 16 bits (D128H; 0.97x unfused-inplace on the
    // H100): auto keeps tiled in training.
    c.f16 = true;
    p.dtype = attn_wgpu::problem::DType::F16;
    p.backward = true;
    assert_eq!(variants::auto(&p, &c).unwrap().picked, "tiled");
}
