// Scratch tool of stop 31 (not part of the crate): writes the SPIR-V that naga 30 makes of
// `tiled`'s bwd_kv and bwd_q at f32 and f16 (B8 H16 N1024 D64 causal, the pipeline constants
// substituted, bounds checks off as `run` does by default) to /tmp, for spirv-dis.
//   mkdir -p examples && cp results/h200/2026-12-05-v38-backward/prepared/spvdump.rs examples/ \
//     && cargo run --release --example spvdump && rm -r examples
//   for f in /tmp/bwd_*.spv; do spirv-dis $f > ${f%.spv}.txt; done
use attn_wgpu::gpu::AdapterCaps;
use attn_wgpu::problem::{DType, Problem};
use attn_wgpu::variants;
use naga::back::spv;
use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy::Unchecked};
fn main() {
    let mut c = AdapterCaps::webgpu_defaults();
    c.max_workgroup_storage = 49152;
    c.f16 = true;
    for dt in [DType::F32, DType::F16] {
        let mut p = Problem::new(8, 16, 1024, 64, true, 0);
        p.backward = true;
        p.dtype = dt;
        let plan = variants::plan("tiled", &p, &c).unwrap();
        for d in plan.dispatches.iter().filter(|d| d.name == "bwd_q" || d.name == "bwd_kv") {
            let module = naga::front::wgsl::parse_str(d.shader.source).unwrap();
            let mut v = naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            );
            let info = v.validate(&module).unwrap();
            let consts: naga::back::PipelineConstants =
                d.overrides.iter().map(|(k, x)| (k.clone(), *x)).collect();
            let stage = Some((naga::ShaderStage::Compute, d.entry));
            let (m, i) =
                naga::back::pipeline_constants::process_overrides(&module, &info, stage, &consts)
                    .unwrap();
            let opts = spv::Options {
                lang_version: (1, 6),
                bounds_check_policies: BoundsCheckPolicies {
                    index: Unchecked,
                    buffer: Unchecked,
                    image_load: Unchecked,
                    binding_array: Unchecked,
                },
                ..Default::default()
            };
            let pipe = spv::PipelineOptions {
                shader_stage: naga::ShaderStage::Compute,
                entry_point: d.entry.into(),
            };
            let w = spv::write_vec(&m, &i, &opts, Some(&pipe)).unwrap();
            let f = format!("/tmp/{}_{:?}.spv", d.name, dt);
            std::fs::write(&f, bytemuck::cast_slice::<u32, u8>(&w)).unwrap();
            println!("{f}");
        }
    }
}
