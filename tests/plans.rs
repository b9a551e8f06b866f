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
    assert_eq!(tiled::choose(64, &c).unwrap().br, 64);
    c.max_workgroup_storage = 32 * 1024;
    assert_eq!(tiled::choose(64, &c).unwrap().br, 32);
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
fn declared_needs_decide_backends_and_refusals() {
    use attn_wgpu::variants::{Backend, Variant};
    let coop = Variant {
        name: "needs-coop",
        summary: "",
        build: tiled::build,
        needs: wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
        excludes: &[],
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
