//! `adapters`: every adapter wgpu finds, with the features and limits that matter here, and which
//! variants it can run (at the default run shape) or why not; where a SPIR-V matrix kernel could
//! run, the device is opened to probe what only a device tells (the matrix element layout, bf16).

use clap::Args;

use attn_wgpu::gpu::context::{select, AdapterReport};
use attn_wgpu::problem::Problem;
use attn_wgpu::report::table;
use attn_wgpu::variants;

use super::args::{AdapterSel, RUN, RUN_SEQ};

#[derive(Args)]
pub struct AdapterArgs {
    #[command(flatten)]
    sel: AdapterSel,
}

/// Which matrix-unit path each cooperative-matrix variant takes on this adapter, and what the
/// driver offers that nothing here uses (issue 38: the selector says which path ran and why the
/// others did not).
fn matrix_paths(exts: &[String], caps: &attn_wgpu::gpu::AdapterCaps, adapter: &wgpu::Adapter) {
    if exts.is_empty() {
        return;
    }
    println!("    matrix units: the driver offers {}", exts.join(", "));
    // The cooperative-matrix variants are f16: asked at the default shape in f16.
    let mut p = Problem::new(RUN.batch, RUN.heads, RUN_SEQ, RUN.head_dim, true, 0);
    p.dtype = attn_wgpu::problem::DType::F16;
    let avail = variants::availability(&p, caps);
    let khr = exts.iter().any(|e| e == "VK_KHR_cooperative_matrix");
    for (v, path) in [
        (
            "tiled-coop",
            "WGSL cooperative matrices (wgpu's EXPERIMENTAL_COOPERATIVE_MATRIX, VK_KHR_cooperative_matrix underneath)",
        ),
        (
            "tiled-coop-vk",
            "GLSL GL_KHR_cooperative_matrix, SPIR-V through PASSTHROUGH_SHADERS (VK_KHR_cooperative_matrix)",
        ),
        (
            "tiled-coop-cm2",
            "GLSL GL_NV_cooperative_matrix2 (workgroup-scope matrices), SPIR-V through PASSTHROUGH_SHADERS, the device opened with VK_NV_cooperative_matrix2",
        ),
        (
            "unfused-coop",
            "GLSL GL_KHR_cooperative_matrix for qk and pv, SPIR-V through PASSTHROUGH_SHADERS (VK_KHR_cooperative_matrix)",
        ),
    ] {
        match avail.iter().find(|(n, _)| *n == v).map(|x| &x.1) {
            Some(Ok(())) => println!("      {v} takes (f16): {path}"),
            Some(Err(why)) => {
                println!("      {v} would take {path}, but cannot run here in f16: {why}")
            }
            None => {}
        }
    }
    if khr {
        // bf16: the bf16 builds of tiled-coop-vk (forward and backward) and unfused-coop, where
        // the device is opened with VK_KHR_shader_bfloat16 (src/gpu/bf16.rs); tiled-coop is f16
        // only.
        match attn_wgpu::gpu::bf16::offered(adapter) {
            Ok(()) => println!(
                "      bf16 on matrix units: tiled-coop-vk (forward and backward) and unfused-coop (GLSL \
                 GL_EXT_bfloat16), \
                 the device opened through wgpu-hal with VK_KHR_shader_bfloat16 \
                 (shaderBFloat16Type, shaderBFloat16CooperativeMatrix) when a matrix variant runs; \
                 tiled-coop is f16 only"
            ),
            Err(why) => println!("      bf16 on matrix units: none ({why})"),
        }
    }
    if exts.iter().any(|e| e == "VK_NV_cooperative_matrix2") {
        match attn_wgpu::gpu::cm2::offered(adapter) {
            Ok(()) => println!(
                "      VK_NV_cooperative_matrix2: tiled-coop-cm2's forward (f16, and bf16 with \
                 VK_KHR_shader_bfloat16), the device opened through wgpu-hal with it when a \
                 matrix variant runs"
            ),
            Err(why) => println!("      VK_NV_cooperative_matrix2: not used ({why})"),
        }
    }
}

/// The caps of `r`'s adapter opened as a device with the matrix variants' features, probed, where
/// the SPIR-V matrix kernels could run (printing the probe's findings); `None` elsewhere, or where
/// opening fails (printed).
fn matrix_device_caps(r: &AdapterReport) -> Option<attn_wgpu::gpu::AdapterCaps> {
    if r.matrix_extensions.is_empty()
        || attn_wgpu::kernels::tiled_coop_vk::device_check(&r.caps).is_err()
    {
        return None;
    }
    let sel = attn_wgpu::gpu::AdapterSelection {
        backend: Some(r.backend.clone()),
        name: Some(r.name.clone()),
    };
    let wanted = variants::features_for(&[
        "tiled-coop",
        "tiled-coop-vk",
        "tiled-coop-cm2",
        "unfused-coop",
    ]);
    match attn_wgpu::device::open(&sel, wanted) {
        Ok(gpu) => {
            use attn_wgpu::gpu::{Bf16Matrix, Cm2, CoopLayout};
            let layout = match &gpu.caps.coop_layout {
                CoopLayout::Assumed => "the one the kernels assume".to_string(),
                CoopLayout::Other(what) => format!("another ({what})"),
                CoopLayout::NotProbed(why) => format!("not probed ({why})"),
            };
            let bf16 = match &gpu.caps.bf16_matrix {
                Bf16Matrix::On => "enabled".to_string(),
                Bf16Matrix::Off(why) => format!("off ({why})"),
            };
            let cm2 = match &gpu.caps.cm2 {
                Cm2::On => "enabled".to_string(),
                Cm2::Off(why) => format!("off ({why})"),
            };
            println!(
                "    opened to probe: cooperative-matrix element layout {layout}; bf16 matrices \
                 {bf16}; VK_NV_cooperative_matrix2 {cm2}"
            );
            Some(gpu.caps.clone())
        }
        Err(e) => {
            println!("    could not open the device to probe its matrix layout: {e}");
            None
        }
    }
}

pub fn cmd_adapters(a: AdapterArgs) -> anyhow::Result<u8> {
    // Only the adapters that --backend / --adapter select; none is exit 1 with what exists.
    let (_instance, adapters) = select(&a.sel.selection())?;
    for (i, ad) in adapters.iter().enumerate() {
        let r = AdapterReport::new(ad);
        // Where a SPIR-V matrix kernel could run, the device is opened (as a run opens it) so
        // that the caps hold what only a device tells: the cooperative-matrix element layout the
        // kernels assume (probed) and whether bf16 matrices were enabled.
        let opened = matrix_device_caps(&r);
        let c = opened.as_ref().unwrap_or(&r.caps);
        println!("[{i}] {} — {} / {}", r.name, r.backend, r.device_type);
        println!("    driver: {} {}", r.driver, r.driver_info);
        println!(
            "    features: timestamps={} f16={} subgroups={} (size {}..{}) cooperative_matrix={} \
             passthrough_shaders={} float32_atomics={}",
            c.timestamps,
            c.f16,
            c.subgroups,
            c.subgroup_min_size,
            c.subgroup_max_size,
            c.cooperative_matrix,
            c.passthrough,
            c.float32_atomics
        );
        println!(
            "    limits: workgroup storage {} B, invocations/workgroup {}, max storage binding {}, max buffer {}",
            c.max_workgroup_storage,
            c.max_invocations_per_workgroup,
            table::bytes(c.max_storage_binding),
            table::bytes(c.max_buffer)
        );
        let p = Problem::new(RUN.batch, RUN.heads, RUN_SEQ, RUN.head_dim, true, 0);
        let avail = variants::availability(&p, c);
        let can: Vec<&str> = avail
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| *n)
            .collect();
        println!(
            "    variants (at the default run shape {}): can run: {}",
            p.shape_string(),
            if can.is_empty() {
                "none".to_string()
            } else {
                can.join(", ")
            }
        );
        for (name, r) in &avail {
            if let Err(why) = r {
                println!("      cannot run {name}: {why}");
            }
        }
        matrix_paths(&r.matrix_extensions, c, ad);
    }
    Ok(0)
}
