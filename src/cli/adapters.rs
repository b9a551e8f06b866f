//! `adapters`: every adapter wgpu finds, with the features and limits that matter here, and which
//! variants it can run (at the default run shape) or why not.

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

pub fn cmd_adapters(a: AdapterArgs) -> anyhow::Result<u8> {
    // Only the adapters that --backend / --adapter select; none is exit 1 with what exists.
    let (_instance, adapters) = select(&a.sel.selection())?;
    for (i, ad) in adapters.iter().enumerate() {
        let r = AdapterReport::new(ad);
        let c = &r.caps;
        println!("[{i}] {} — {} / {}", r.name, r.backend, r.device_type);
        println!("    driver: {} {}", r.driver, r.driver_info);
        println!(
            "    features: timestamps={} f16={} subgroups={} (size {}..{}) cooperative_matrix={} \
             passthrough_shaders={}",
            c.timestamps,
            c.f16,
            c.subgroups,
            c.subgroup_min_size,
            c.subgroup_max_size,
            c.cooperative_matrix,
            c.passthrough
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
    }
    Ok(0)
}
