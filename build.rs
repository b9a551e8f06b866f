// Records the git commit the binary was built from (for result files), when git knows it, and
// compiles the GLSL kernels (shaders/*.comp) to SPIR-V in OUT_DIR, where src/kernels embeds them
// with include_bytes!. Those kernels run through wgpu's PASSTHROUGH_SHADERS on Vulkan only
// (src/kernels/tiled_coop_vk.rs); a compile error fails the build with glslang's log.
use std::process::Command;

/// A GLSL kernel to compile: (source under shaders/, output name, `#define`s).
type Glsl = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

const GLSL: &[Glsl] = &[
    // tiled_coop_vk.comp: inference and training (LSE: also writes L), one 16-row tile a subgroup
    // (ROWS = 1, BR = 64) or two (ROWS = 2, BR = 128).
    (
        "tiled_coop_vk.comp",
        "tiled_coop_vk_r1.spv",
        &[("LSE", "0"), ("ROWS", "1")],
    ),
    (
        "tiled_coop_vk.comp",
        "tiled_coop_vk_r1_lse.spv",
        &[("LSE", "1"), ("ROWS", "1")],
    ),
    (
        "tiled_coop_vk.comp",
        "tiled_coop_vk_r2.spv",
        &[("LSE", "0"), ("ROWS", "2")],
    ),
    (
        "tiled_coop_vk.comp",
        "tiled_coop_vk_r2_lse.spv",
        &[("LSE", "1"), ("ROWS", "2")],
    ),
    // Its backward passes (training): KV = 1 is bwd_kv (dK, dV), KV = 0 bwd_q (dQ).
    (
        "tiled_coop_vk_bwd.comp",
        "tiled_coop_vk_bwd_kv.spv",
        &[("KV", "1")],
    ),
    (
        "tiled_coop_vk_bwd.comp",
        "tiled_coop_vk_bwd_q.spv",
        &[("KV", "0")],
    ),
    ("coop_layout_probe.comp", "coop_layout_probe.spv", &[]),
    // The same kernels on shaders/coopmat_emu.glsl (no cooperative matrices): the tests run them
    // on lavapipe (src/kernels/tiled_coop_vk.rs, `Build::Emulated`).
    (
        "tiled_coop_vk.comp",
        "tiled_coop_vk_r1_emu.spv",
        &[("LSE", "0"), ("ROWS", "1"), ("EMULATE_COOPMAT", "1")],
    ),
    (
        "tiled_coop_vk.comp",
        "tiled_coop_vk_r1_lse_emu.spv",
        &[("LSE", "1"), ("ROWS", "1"), ("EMULATE_COOPMAT", "1")],
    ),
    (
        "tiled_coop_vk.comp",
        "tiled_coop_vk_r2_emu.spv",
        &[("LSE", "0"), ("ROWS", "2"), ("EMULATE_COOPMAT", "1")],
    ),
    (
        "tiled_coop_vk.comp",
        "tiled_coop_vk_r2_lse_emu.spv",
        &[("LSE", "1"), ("ROWS", "2"), ("EMULATE_COOPMAT", "1")],
    ),
    (
        "tiled_coop_vk_bwd.comp",
        "tiled_coop_vk_bwd_kv_emu.spv",
        &[("KV", "1"), ("EMULATE_COOPMAT", "1")],
    ),
    (
        "tiled_coop_vk_bwd.comp",
        "tiled_coop_vk_bwd_q_emu.spv",
        &[("KV", "0"), ("EMULATE_COOPMAT", "1")],
    ),
    (
        "coop_layout_probe.comp",
        "coop_layout_probe_emu.spv",
        &[("EMULATE_COOPMAT", "1")],
    ),
];

/// `#include "name"` resolves to shaders/name (the one include: coopmat_emu.glsl).
struct Includes;

impl glslang::include::IncludeHandler for Includes {
    fn include(
        &mut self,
        _ty: glslang::include::IncludeType,
        name: &str,
        _includer: &str,
        _depth: usize,
    ) -> Option<glslang::include::IncludeResult> {
        let path = format!("shaders/{name}");
        println!("cargo:rerun-if-changed={path}");
        let data = std::fs::read_to_string(&path).ok()?;
        Some(glslang::include::IncludeResult { name: path, data })
    }
}

fn compile_glsl(out_dir: &std::path::Path) {
    use glslang::*;
    let compiler = Compiler::acquire().expect("glslang: acquiring the compiler");
    for (file, out, defines) in GLSL {
        let path = format!("shaders/{file}");
        println!("cargo:rerun-if-changed={path}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let source = ShaderSource::from(text);
        let options = CompilerOptions {
            source_language: SourceLanguage::GLSL,
            target: Target::Vulkan {
                version: VulkanVersion::Vulkan1_3,
                spirv_version: SpirvVersion::SPIRV1_6,
            },
            messages: ShaderMessage::DEFAULT,
            version_profile: None,
        };
        let defs: Vec<(&str, Option<&str>)> = defines.iter().map(|(k, v)| (*k, Some(*v))).collect();
        let mut includes = Includes;
        let input = ShaderInput::new(
            &source,
            ShaderStage::Compute,
            &options,
            Some(&defs),
            Some(&mut includes),
        )
        .unwrap_or_else(|e| panic!("{path}: {e}"));
        let shader = Shader::new(compiler, input)
            .parse()
            .unwrap_or_else(|e| panic!("{path} {defines:?}: {e}"));
        let mut program = Program::new(compiler);
        program.add_shader(&shader);
        let words = program
            .compile(ShaderStage::Compute)
            .unwrap_or_else(|e| panic!("{path} {defines:?}: {e}"));
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(out_dir.join(out), bytes).expect("writing SPIR-V to OUT_DIR");
    }
}

fn main() {
    let out = Command::new("git").args(["rev-parse", "HEAD"]).output();
    let mut commit = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => String::new(),
    };
    if !commit.is_empty() {
        let dirty = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=no"])
            .output()
            .map(|o| !o.stdout.is_empty())
            .unwrap_or(false);
        if dirty {
            commit.push_str("-dirty");
        }
    }
    println!("cargo:rustc-env=ATTN_WGPU_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    compile_glsl(&out_dir);
}
